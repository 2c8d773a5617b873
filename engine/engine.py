"""The engine: requests in, tokens out, one scheduled step at a time.

    schedule -> run -> postprocess

Queued files, aligner requests and live streams all become requests in the
same scheduler, so one step mixes decode rows and prefill rows of them all.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .audio_input import as_samples
from .config import audio_token_count
from .features import SAMPLE_RATE, log_mel, num_frames
from .kv_cache import KVCache
from .model import load_network, load_tokenizer, resolve_device, resolve_dtype
from .prompt import build_prompt_ids, decode_text, language_name, parse_output
from .request import Request, RequestOutput, RequestState
from .runner import ModelRunner
from .scheduler import Scheduler, SchedulerConfig


def default_max_new_tokens(duration: float) -> int:
    """A cap that grows with the clip: fast speech is ~5 tokens/s; a model that never says
    'end' cannot run away."""
    return int(48 + 15 * duration)


class Engine:
    """A loaded Qwen3-ASR model with its scheduler and KV cache. Create with ``engine.load``."""

    def __init__(self, model_dir, *, device=None, dtype=None, max_batch_size: int = 64,
                 max_prefill_rows: int = 8, max_step_tokens: int = 4096, kv_cache_bytes: int | None = None,
                 block_size: int | None = None, pad_buckets: bool | None = None, use_vad: bool = True):
        self.model_dir = str(model_dir)
        self.torch_device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.torch_device)
        self.net, self.config = load_network(model_dir, self.torch_device, self.torch_dtype)
        self.tokenizer = load_tokenizer(model_dir)
        on_cuda = self.torch_device.type == "cuda"
        # CPU attention reads a row's keys in place only when they sit in one block, so
        # CPU blocks are long; flash-attn's paged kernels want 256-slot blocks.
        block_size = block_size or (256 if on_cuda else 1024)
        if kv_cache_bytes is None:
            kv_cache_bytes = self._default_cache_bytes()
        num_blocks = KVCache.blocks_for_budget(self.config.decoder, kv_cache_bytes, block_size, self.torch_dtype)
        self.cache = KVCache(self.config.decoder, num_blocks, block_size, self.torch_dtype, self.torch_device)
        self.scheduler = Scheduler(SchedulerConfig(max_batch_size, max_prefill_rows, max_step_tokens),
                                   self.cache.allocator)
        self.runner = ModelRunner(self.net, self.cache, self.torch_device,
                                  pad_buckets=on_cuda if pad_buckets is None else pad_buckets)
        self.aligner = None
        self.use_vad = use_vad
        self._requests: dict[int, Request] = {}
        self._jobs: list = []        # FileJobs and Streams; each advances once per step
        self._last_step_kinds: set[str] = set()

    @property
    def device(self) -> str:
        return self.torch_device.type

    @property
    def dtype(self) -> str:
        return str(self.torch_dtype).removeprefix("torch.")

    def _default_cache_bytes(self) -> int:
        if self.torch_device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.torch_device)
            return int(free * 0.6)
        return 2 << 30

    # ----------------------------------------------------------------- requests
    def make_request(self, audio, *, language=None, context: str = "", max_new_tokens: int | None = None,
                     priority: int = 0, ignore_eos: bool = False) -> Request:
        samples = as_samples(audio)
        features = log_mel(samples)
        n_audio = audio_token_count(num_frames(len(samples)), self.config.encoder)
        prompt, audio_start = build_prompt_ids(self.tokenizer, n_audio, context=context, language=language)
        duration = len(samples) / SAMPLE_RATE
        if max_new_tokens is not None and max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        return Request(prompt_ids=prompt, audio_start=audio_start, features=features, num_audio_tokens=n_audio,
                       max_new_tokens=max_new_tokens or default_max_new_tokens(duration), priority=priority,
                       eos_token_ids=() if ignore_eos else self.config.eos_token_ids,
                       language=language_name(language),
                       duration=duration)

    def add_request(self, request: Request) -> Request:
        self._requests[request.id] = request
        self.scheduler.add(request)
        return request

    def submit(self, audio, *, language=None, context: str = "", max_new_tokens: int | None = None,
               priority: int = 0, ignore_eos: bool = False) -> Request:
        """Queue one clip (float32 16 kHz samples or a file path); returns at once.

        ``ignore_eos`` makes it generate exactly ``max_new_tokens`` (for benchmarks)."""
        return self.add_request(self.make_request(audio, language=language, context=context,
                                                  max_new_tokens=max_new_tokens, priority=priority,
                                                  ignore_eos=ignore_eos))

    def submit_file(self, source, *, language=None, context: str = "", word_timestamps: bool = False,
                    priority: int = 0, max_chunk_seconds: float | None = None):
        """Queue a whole file (or an array); returns a FileJob at once. Work happens in ``step()``."""
        from .jobs import FileJob, array_job

        options = dict(language=language, context=context, word_timestamps=word_timestamps, priority=priority,
                       max_chunk_seconds=max_chunk_seconds, use_vad=self.use_vad)
        if isinstance(source, (str, Path)):
            job = FileJob(self, source, **options)
        else:
            job = array_job(self, as_samples(source), **options)
        self._jobs.append(job)
        return job

    def open_stream(self, *, language=None, context: str = "", **options):
        """A live stream: ``feed()`` samples, read ``committed`` and ``tentative``; see engine.stream."""
        from .stream import Stream

        stream = Stream(self, language=language, context=context, **options)
        self._jobs.append(stream)
        return stream

    def has_work(self) -> bool:
        # An open live stream waiting for audio is not work: the step loop may sleep.
        return any(job.busy for job in self._jobs) or self.scheduler.has_work() or (
            self.aligner is not None and self.aligner.has_work())

    # ---------------------------------------------------------------- the loop
    def step(self) -> list[RequestOutput]:
        """One engine step: schedule rows, run the model once, hand out tokens."""
        for job in list(self._jobs):
            job.advance()
            if job.finished:
                self._jobs.remove(job)
        outputs = self._reap_cancelled()
        if self.aligner is not None and self.aligner.has_work():
            self.aligner.step()
        rows = self.scheduler.schedule()
        outputs += [RequestOutput(r, [], True, r.error) for r in self.scheduler.take_rejected()]
        if not rows:
            return outputs
        before = {r.request.id: len(r.request.token_ids) for r in rows}
        self._last_step_kinds = {r.kind for r in rows}
        try:
            next_tokens = self.runner.run(rows, self.config.timestamp_token_id)
            finished = self.scheduler.postprocess(rows, next_tokens)
        except Exception as e:  # a crash fails this step's requests only; the engine stays usable
            return outputs + self._fail_rows(rows, e)
        done = {r.id for r in finished}
        for row in rows:
            req = row.request
            new = req.token_ids[before[req.id]:]
            if new or req.id in done:
                outputs.append(RequestOutput(req, new, req.id in done))
            if req.id in done:
                self._requests.pop(req.id, None)
        return outputs

    def _reap_cancelled(self) -> list[RequestOutput]:
        outputs = []
        for req in [r for r in self._requests.values() if r.cancelled and not r.finished]:
            self.scheduler.release(req)
            req.state, req.finish_reason = RequestState.FINISHED, "cancelled"
            self._requests.pop(req.id, None)
            outputs.append(RequestOutput(req, [], True))
        return outputs

    def _fail_rows(self, rows, error: Exception) -> list[RequestOutput]:
        outputs = []
        message = f"engine step failed: {type(error).__name__}: {error}"
        for row in rows:
            req = row.request
            self.scheduler.release(req)
            req.state, req.finish_reason, req.error = RequestState.FINISHED, "error", message
            self._requests.pop(req.id, None)
            outputs.append(RequestOutput(req, [], True, message))
        return outputs

    def run_until_done(self, requests: list[Request], progress=None) -> None:
        """Step until every request in ``requests`` finished (others in the queue advance too)."""
        while not all(r.finished for r in requests):
            self.step()
            if progress is not None:
                progress(sum(r.finished for r in requests) / max(1, len(requests)))

    # ------------------------------------------------------------- conveniences
    def generate(self, audios, *, language=None, context: str = "", max_new_tokens: int | None = None) -> list[list[int]]:
        """Greedy token ids per clip, up to and including the first end token."""
        if isinstance(audios, (str, Path, np.ndarray)):
            audios = [audios]
        requests = [self.submit(a, language=language, context=context, max_new_tokens=max_new_tokens)
                    for a in audios]
        self.run_until_done(requests)
        for r in requests:
            if r.error:
                raise RuntimeError(r.error)
        return [list(r.token_ids) for r in requests]

    def decode(self, request: Request) -> tuple[str | None, str]:
        """(language, text) of a finished request."""
        return parse_output(decode_text(self.tokenizer, request.token_ids), request.language)

    def transcribe(self, audio, *, language=None, context: str = "", word_timestamps: bool = False,
                   progress=None, max_chunk_seconds: float | None = None):
        """Transcribe a whole file or array; its speech chunks run as one batch. Returns a Transcript."""
        job = self.submit_file(audio, language=language, context=context, word_timestamps=word_timestamps,
                               max_chunk_seconds=max_chunk_seconds)
        while not job.finished:
            self.step()
            if progress is not None:
                progress(job.progress)
        if job.state == "failed":
            raise RuntimeError(job.error)
        return job.transcript


def load(model_dir, device=None, dtype=None, *, aligner=None, **engine_options) -> Engine:
    """Load a Qwen3-ASR checkpoint folder (either published layout) into an Engine.

    device defaults to CUDA when available, else CPU; dtype to bfloat16 on CUDA and
    float32 on CPU. ``aligner`` is an optional Qwen3-ForcedAligner folder for word times.
    """
    eng = Engine(model_dir, device=device, dtype=dtype, **engine_options)
    if aligner is not None:
        from .aligner import Aligner

        eng.aligner = Aligner(aligner, device=eng.torch_device, dtype=eng.torch_dtype)
    return eng
