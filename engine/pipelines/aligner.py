"""Qwen3-ForcedAligner run by our own model code: the ASR trunk plus a timestamp-class head.

Input: ``<|audio_start|>`` + audio placeholders + ``<|audio_end|>`` followed by
each word and two ``<timestamp>`` tokens. The class argmax at each timestamp
token times 80 ms is a word's start or end; a monotonic repair fixes outliers.
The aligner is a second network, so it has its own KV cache, scheduler and runner:
instances of the serving classes the ASR engine steps, not a copy of them. Its requests
carry ``score_token_id`` (the timestamp token), so every row of them runs in the row mode
SCORE: one pass over the whole prompt, the score head's classes read at each timestamp
token. Many alignments batch into one step. Whoever steps the engine steps the aligner
beside it while it ``has_work()``; ``align`` steps it alone. As in the engine's core, a
request's owner learns that it finished from a pushed output (the ``on_output`` it was
submitted with), never by polling the request.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from engine.audio.samples import as_samples
from engine.errors import CheckpointError
from engine.network.config import audio_token_count
from engine.network.features import SAMPLE_RATE, log_mel, num_frames
from engine.network.loading import (
    load_network,
    load_tokenizer,
    resolve_device,
    resolve_dtype,
)
from engine.serving.kv_cache import KVCache
from engine.serving.request import Request, RequestOutput, RequestState
from engine.serving.runner import ModelRunner
from engine.serving.scheduler import Scheduler, SchedulerConfig
from engine.text.prompt import AUDIO_PAD, render_around_audio
from engine.text.types import Word
from engine.text.word_split import split_words
from engine.text.words import PendingAlignment

TIMESTAMP = "<timestamp>"


def fix_timestamps(values: list[float]) -> list[int]:
    """Make predicted times non-decreasing, as transformers' ``_fix_timestamps`` does:
    keep a longest non-decreasing subsequence, snap short outlier runs (<= 2) to the
    nearer good neighbour, interpolate longer runs linearly."""
    n = len(values)
    if n == 0:
        return []
    best, parent = [1] * n, [-1] * n
    for i in range(1, n):
        for j in range(i):
            if values[j] <= values[i] and best[j] + 1 > best[i]:
                best[i], parent[i] = best[j] + 1, j
    good = [False] * n
    i = best.index(max(best))
    while i != -1:
        good[i], i = True, parent[i]
    out = list(values)
    i = 0
    while i < n:
        if good[i]:
            i += 1
            continue
        j = i
        while j < n and not good[j]:
            j += 1
        left = next((out[k] for k in range(i - 1, -1, -1) if good[k]), None)
        right = next((out[k] for k in range(j, n) if good[k]), None)
        for pos in range(i, j):
            if j - i <= 2:
                if left is None or right is None:
                    out[pos] = right if left is None else left
                else:
                    out[pos] = left if (pos - (i - 1)) <= (j - pos) else right
            elif left is not None and right is not None:
                out[pos] = left + (right - left) / (j - i + 1) * (pos - i + 1)
            else:
                out[pos] = left if left is not None else right
        i = j
    return [int(v) for v in out]


class Aligner:
    """A loaded forced aligner. ``align(audio, text)`` gives words with start and end seconds."""

    def __init__(self, aligner_dir, device=None, dtype=None, *, max_step_tokens: int = 8192,
                 kv_cache_bytes: int = 512 << 20):
        self.model_dir = str(aligner_dir)
        self.torch_device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.torch_device)
        self.net, self.config = load_network(aligner_dir, self.torch_device, self.torch_dtype)
        if not self.config.num_labels or self.config.timestamp_token_id is None:
            raise CheckpointError(f"{aligner_dir}: not a Qwen3-ForcedAligner checkpoint (no timestamp head)")
        self.tokenizer = load_tokenizer(aligner_dir)
        self._check_prompt_format()
        block_size = 256 if self.torch_device.type == "cuda" else 2048
        self._max_step_tokens = max_step_tokens
        self._too_long: list[Request] = []   # requests waiting for the cache to grow (see _grow_cache)
        self._owners: dict[int, Callable[[RequestOutput], None]] = {}   # request id -> its on_output
        self._build_cache(KVCache.blocks_for_budget(self.config.decoder, kv_cache_bytes, block_size,
                                                    self.torch_dtype), block_size)

    def _build_cache(self, blocks: int, block_size: int) -> None:
        self.cache = KVCache(self.config.decoder, blocks, block_size, self.torch_dtype, self.torch_device)
        self.scheduler = Scheduler(SchedulerConfig(max_batch_size=16, max_prefill_rows=16,
                                                   max_step_tokens=self._max_step_tokens), self.cache.allocator)
        self.runner = ModelRunner(self.net, self.cache, self.torch_device)

    @property
    def cache_tokens(self) -> int:
        """How many tokens the whole cache holds: the longest request that can run."""
        return self.cache.allocator.num_blocks * self.cache.block_size

    def _grow_cache(self) -> None:
        """Size the cache for the longest waiting request, once no request holds blocks.

        The budget fits a few ordinary requests, but an aligned chunk of 180 s of dense speech
        needs its audio tokens plus each word and two timestamps (2340+ tokens with the real
        0.6B aligner, more than the 2048 one CPU block holds). Such a request waits until the
        aligner is idle, then the cache is rebuilt big enough for it (on CPU the memory is only
        touched as it fills)."""
        if not self._too_long or self.scheduler.has_work():
            return
        longest = max(r.num_tokens for r in self._too_long)
        blocks = -(-longest // self.cache.block_size)
        if blocks > self.cache.allocator.num_blocks:
            self._build_cache(blocks, self.cache.block_size)
        for req in self._too_long:
            self.scheduler.add(req)
        self._too_long = []

    def make_request(self, samples: np.ndarray, words: list[str]) -> Request:
        n_audio = audio_token_count(num_frames(len(samples)), self.config.encoder)
        pad = self.tokenizer.convert_tokens_to_ids(AUDIO_PAD)
        head, tail = self._prompt_parts(words)
        return Request(prompt_ids=head + [pad] * n_audio + tail, audio_start=len(head),
                       features=log_mel(samples), num_audio_tokens=n_audio, max_new_tokens=1,
                       score_token_id=self.config.timestamp_token_id, duration=len(samples) / SAMPLE_RATE)

    def _prompt_parts(self, words: list[str]) -> tuple[list[int], list[int]]:
        """Token ids before and after the audio placeholders.

        As transformers' prepare_forced_aligner_inputs: one user turn of the audio and each word,
        rendered by the checkpoint's template; the aligner's own format where it has none. A
        template that does not give exactly two timestamp tokens per word (it drops them, or
        words) would misplace every time, so the raw format built from token ids is used then."""
        content = [{"type": "audio"}] + [{"type": "text", "text": w} for w in words]
        rendered = render_around_audio(self.tokenizer, [{"role": "user", "content": content}]) or (
            "<|audio_start|>", "<|audio_end|>" + "".join(w + TIMESTAMP * 2 for w in words))
        head = self.tokenizer.encode(rendered[0], add_special_tokens=False)
        tail = self.tokenizer.encode(rendered[1], add_special_tokens=False)
        if tail.count(self.config.timestamp_token_id) == 2 * len(words) \
                and self.config.timestamp_token_id not in head:
            return head, tail
        return self._raw_prompt_parts(words)

    def _raw_prompt_parts(self, words: list[str]) -> tuple[list[int], list[int]]:
        """The aligner's raw input from ids: audio start, (audio), audio end, then each word and
        two timestamp tokens."""
        ts = self.config.timestamp_token_id
        tail = [self._special_ids["<|audio_end|>"]]
        for w in words:
            tail += [t for t in self.tokenizer.encode(w, add_special_tokens=False) if t != ts] + [ts, ts]
        return [self._special_ids["<|audio_start|>"]], tail

    def _check_prompt_format(self) -> None:
        """At load: the tokens the raw format needs exist, so no alignment fails on them later."""
        self._special_ids = {}
        vocab = self.tokenizer.get_vocab()
        for token in ("<|audio_start|>", "<|audio_end|>", AUDIO_PAD):
            if token not in vocab:
                raise CheckpointError(f"{self.model_dir}: the aligner's tokenizer has no {token} token")
            self._special_ids[token] = vocab[token]
        ts = self.config.timestamp_token_id
        if not 0 <= ts < self.config.decoder.vocab_size:
            raise CheckpointError(f"{self.model_dir}: config.json timestamp_token_id {ts} is outside the "
                                  f"vocabulary ({self.config.decoder.vocab_size} tokens)")
        probe = ["hello", "world"]
        self.prompt_format = "raw" if self._prompt_parts(probe) == self._raw_prompt_parts(probe) else "template"

    def submit(self, samples: np.ndarray, words: list[str],
               on_output: Callable[[RequestOutput], None] | None = None) -> Request:
        """Queue the alignment of ``words`` in ``samples``; ``on_output`` gets the request's finished
        output (its times in ``result``, or its error, or "cancelled") from the step that ends it."""
        req = self.make_request(samples, words)
        req.result = []
        if on_output is not None:
            self._owners[req.id] = on_output
        if req.num_tokens > self.cache_tokens:
            self._too_long.append(req)   # runs once the cache has grown for it (_grow_cache)
        else:
            self.scheduler.add(req)
        return req

    def has_work(self) -> bool:
        return self.scheduler.has_work() or bool(self._too_long)

    def step(self) -> list[RequestOutput]:
        """One aligner step; the requests it finished (done, failed or cancelled) go to their owners."""
        ended = []
        for req in [r for r in self.scheduler.waiting + self.scheduler.running + self._too_long if r.cancelled]:
            if req in self._too_long:
                self._too_long.remove(req)
            else:
                self.scheduler.release(req)
            req.state, req.finish_reason = RequestState.FINISHED, "cancelled"
            ended.append(req)
        self._grow_cache()
        rows = self.scheduler.schedule()
        ended += self.scheduler.take_rejected()
        if rows:
            try:
                ended += self.scheduler.postprocess(rows, self.runner.run(rows))
            except Exception as e:  # fail these alignments only; the aligner stays usable
                for row in rows:
                    self.scheduler.release(row.request)
                    row.request.state, row.request.error = RequestState.FINISHED, f"aligner step failed: {e}"
                    ended.append(row.request)
        return self._deliver(ended)

    def _deliver(self, ended: list[Request]) -> list[RequestOutput]:
        outputs = [RequestOutput(req, [], True, req.error) for req in ended]
        for out in outputs:
            owner = self._owners.pop(out.request.id, None)
            if owner is not None:
                owner(out)
        return outputs

    def times(self, request: Request) -> list[int]:
        """Repaired milliseconds at each timestamp token of a finished request."""
        ms = [float(c) * self.config.timestamp_segment_ms for c in request.result]
        return fix_timestamps(ms)

    def submit_text(self, audio, text: str, *, language=None) -> PendingAlignment | None:
        """Queue the alignment of ``text``'s words over ``audio``; returns at once (None when the text
        has no words). Whoever steps the engine steps this aligner; ``aligned_words`` reads the answer."""
        samples = as_samples(audio)
        words = split_words(text, language)
        if not words:
            return None
        pending = PendingAlignment(None, words)
        pending.request = self.submit(samples, words, pending.take)   # the push says it finished
        return pending

    def aligned_words(self, pending: PendingAlignment) -> list[Word]:
        """The words of a finished ``submit_text`` with their times (seconds, rounded to ms);
        RuntimeError with the request's error when the alignment failed."""
        if pending.error:
            raise RuntimeError(pending.error)
        ms = self.times(pending.request)
        return [Word(w, round(ms[2 * i] / 1000.0, 3), round(ms[2 * i + 1] / 1000.0, 3))
                for i, w in enumerate(pending.words)]

    def align(self, audio, text: str, *, language=None) -> list[Word]:
        """Words of ``text`` with their times in ``audio`` (seconds, rounded to ms); steps the aligner
        alone until done (``submit_text`` leaves the stepping to the engine)."""
        pending = self.submit_text(audio, text, language=language)
        if pending is None:
            return []
        while not pending.finished:
            self.step()
        return self.aligned_words(pending)
