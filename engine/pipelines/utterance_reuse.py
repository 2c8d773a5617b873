"""What one pass over a live stream's open utterance hands on to the next pass of it.

Every update re-transcribes the open utterance, which has only grown by an update interval
since the previous pass. Three things carry over, each exact by construction:

- encoder outputs of unchanged conv chunks and complete attention windows (``EncoderReuse``,
  bit-identical with a fresh encode where ``rows_round_alike`` holds; fresh encodes elsewhere);
- the cache blocks of the prompt prefix whose inputs are unchanged (the system turn, the
  context, and the leading audio embeddings that are bit-identical): the next pass's prefill
  starts after them;
- the previous pass's tokens, as a draft that the engine verifies several tokens a step
  instead of decoding one token a step (``Request.draft``). A new utterance has no previous
  pass; its first one gets the last utterance's language prefix (``language English<asr_text>``)
  as its draft, which a stream in one language says again: three tokens, three steps fewer.

The held blocks are reference-counted in the cache's allocator: a pass borrows them, the
holder keeps its own reference. When an utterance ends (``next_utterance``) the holder keeps
only the whole blocks before the audio (the system turn and the context, which the next
utterance's prompt starts with too; whole blocks, because a pass writes into the last block it
borrows and the ended utterance's final pass may still be running in that one); ``reset``
(stream closed or cancelled) gives everything back.
"""
from __future__ import annotations

import torch

from engine.network.encoder_reuse import EncoderReuse
from engine.serving.request import Request


class UtteranceReuse:
    """Encoder outputs, prompt-prefix cache blocks and the draft of the open utterance's last pass."""

    def __init__(self, engine):
        from engine.text.prompt import ASR_TEXT

        self.engine = engine
        self.allocator = engine.cache.allocator
        self.encoder = EncoderReuse(engine.net)
        self.draft: list[int] = []
        self._marker = engine.tokenizer.convert_tokens_to_ids(ASR_TEXT)   # ends the language prefix
        self._blocks: list[int] = []              # referenced blocks holding the KV of _ids
        self._ids: list[int] = []                 # the held prompt prefix
        self._audio_start = 0
        self._embeds: torch.Tensor | None = None  # the audio embeddings of the held prompt
        self.prefix_reused = 0                    # prompt tokens whose prefill was skipped (for benchmarks)
        self.prompt_tokens = 0                    # prompt tokens of every prepared pass

    @property
    def held_blocks(self) -> int:
        return len(self._blocks)

    def prepare(self, request: Request, *, keep: bool) -> None:
        """Before ``request`` (a pass of the open utterance) is queued: encode its audio (reusing the
        last pass's unchanged windows), lend it the held prefix's blocks, give it the last tokens as its draft.
        ``keep``: hold its prompt's blocks once it finishes, for the next pass (updates, not finals)."""
        if request.features is not None:
            embeds = self.encoder.encode(request.features)
            if embeds.shape[0] != request.num_audio_tokens:
                raise RuntimeError(f"encoder gave {embeds.shape[0]} tokens, prompt has {request.num_audio_tokens}")
            request.audio_embeds, request.features = embeds.to(self.engine.torch_device), None
        request.draft = list(self.draft)
        self.prompt_tokens += len(request.prompt_ids)
        shared = self._shared_prefix(request)
        partial = shared % self.allocator.block_size
        if partial and self.allocator.holders(self._blocks[shared // self.allocator.block_size]) > 1:
            # The pass would write its first tokens into that block, which another pass (the last
            # utterance's final, still running) reads beyond this point: start on a block of its own.
            shared -= partial
        if shared:
            request.block_table = self.allocator.share(self._blocks, shared)
            request.num_cached = shared
            self.prefix_reused += shared
            # The pass writes its own tokens into the last shared block from `shared` on, so only
            # that much of the held prefix stays valid.
            self._truncate(shared)
        request.retain_tokens = len(request.prompt_ids) - 1 if keep else 0

    def take(self, request: Request) -> None:
        """A pass finished: its tokens become the draft, its prompt's blocks the held prefix."""
        if request.error or request.finish_reason == "cancelled":
            self.discard(request)
            return
        self.draft = list(request.token_ids)
        if request.retained_blocks is not None:
            self._release()
            self._blocks, request.retained_blocks = request.retained_blocks, None
            self._ids = request.prompt_ids[:request.retain_tokens]
            self._audio_start, self._embeds = request.audio_start, request.audio_embeds

    def discard(self, request: Request) -> None:
        """A pass that will not be taken: give back any blocks it retained."""
        if request.retained_blocks is not None:
            self.allocator.release(request.retained_blocks)
            request.retained_blocks = None

    def next_utterance(self) -> None:
        """The utterance is over: keep the whole blocks of the prompt before its audio, and the
        language prefix of its last tokens as the next utterance's first draft; drop the rest."""
        self.encoder.clear()
        self._embeds = None
        before_audio = min(len(self._ids), self._audio_start)
        self._truncate(before_audio - before_audio % self.allocator.block_size)
        self.draft = language_prefix(self.draft, self._marker)

    def reset(self) -> None:
        """The stream is over: drop everything, give the blocks back."""
        self._release()
        self.encoder.clear()
        self.draft = []

    # ---------------------------------------------------------------- internals
    def _shared_prefix(self, request: Request) -> int:
        """Leading prompt tokens whose inputs (ids, and embeddings for audio) equal the held prefix's."""
        ids, limit = request.prompt_ids, min(len(self._ids), len(request.prompt_ids) - 1)
        n = 0
        while n < limit and ids[n] == self._ids[n]:
            n += 1
        start = request.audio_start
        if n > start:
            if start != self._audio_start or self._embeds is None:
                return min(n, start)
            m = min(n - start, request.num_audio_tokens, self._embeds.shape[0])
            differs = (request.audio_embeds[:m] != self._embeds[:m]).any(dim=-1).nonzero()
            if differs.numel():
                return start + int(differs[0])
            if n - start > m:                    # the whole held audio matches but the new one goes on
                return start + m
        return n

    def _truncate(self, tokens: int) -> None:
        keep = -(-tokens // self.allocator.block_size)
        extra = self._blocks[keep:]
        if extra:
            self.allocator.release(extra)
            del self._blocks[keep:]
        self._ids = self._ids[:tokens]

    def _release(self) -> None:
        if self._blocks:
            self.allocator.release(self._blocks)
        self._ids, self._embeds = [], None


def language_prefix(tokens: list[int], marker: int | None) -> list[int]:
    """The tokens up to and including the ``<asr_text>`` marker (``language English<asr_text>``),
    or [] when there is none (a prompt that forces the language, or no pass yet)."""
    return tokens[:tokens.index(marker) + 1] if marker is not None and marker in tokens else []
