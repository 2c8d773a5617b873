"""Requests the engine serves and what a step reports about them."""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field

import torch

_ids = itertools.count()


class RequestState(enum.Enum):
    WAITING = "waiting"      # queued, or preempted and waiting to be recomputed
    RUNNING = "running"      # holds cache blocks
    FINISHED = "finished"


@dataclass(eq=False)
class Request:
    """One clip to transcribe (or align). ``token_ids`` grows as the engine generates.

    ``num_cached`` counts the tokens of ``prompt_ids + token_ids`` whose keys and
    values are in the cache; a step advances it. Cancel with ``cancel()``: the
    engine frees the request's cache at its next step.
    """

    prompt_ids: list[int]
    audio_start: int                       # index of the first audio placeholder in prompt_ids
    features: torch.Tensor | None          # [mels, frames] log-mel; dropped once encoded
    num_audio_tokens: int
    max_new_tokens: int
    priority: int = 0
    eos_token_ids: tuple[int, ...] = ()
    language: str | None = None
    duration: float = 0.0
    # Set: the request is scored, not generated: one pass over its whole prompt, the network's score
    # head (class argmax) read at each position holding this token, appended to ``result``.
    score_token_id: int | None = None
    id: int = field(default_factory=lambda: next(_ids))
    token_ids: list[int] = field(default_factory=list)
    audio_embeds: torch.Tensor | None = None
    block_table: list[int] = field(default_factory=list)
    num_cached: int = 0
    state: RequestState = RequestState.WAITING
    cancelled: bool = False
    error: str | None = None
    finish_reason: str | None = None       # "stop", "length", "repetition", "cancelled", "error"
    repetition_guard: bool = False         # stop (keeping one copy) when the tokens loop; see serving.repetition
    result: object = None                  # a scored request's classes, in prompt order (the aligner's times)
    arrival_step: int = 0
    last_scheduled_step: int = -1
    first_token_step: int | None = None
    # Speculative verification without a draft model: tokens a previous pass of (almost) the same
    # audio produced. Steps feed them after the last token and keep the prefix greedy agrees with.
    draft: list[int] = field(default_factory=list)
    draft_offered: int = 0                 # draft tokens fed for verification
    draft_accepted: int = 0                # of those, the ones greedy decoding agreed with
    prefix_cached: int = 0                 # prompt tokens found in the prefix cache when it (last) started

    @property
    def finished(self) -> bool:
        return self.state is RequestState.FINISHED

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.token_ids)

    @property
    def in_prefill(self) -> bool:
        """True while more than the last token still has to enter the cache (any token, for a
        scored request: no token is kept back to sample after)."""
        held_back = 0 if self.score_token_id is not None else 1
        return self.num_tokens - self.num_cached > held_back

    def draft_proposal(self, limit: int) -> list[int]:
        """Up to ``limit`` draft tokens to verify after the last token; [] when the draft has nothing to say.

        While the tokens so far follow the draft, the rest of it; after a divergence, what follows the
        latest place in the draft where its last two tokens occur (the draft skipped or changed a word).
        Never more than the tokens still allowed, and nothing past an end token."""
        n, draft = len(self.token_ids), self.draft
        limit = min(limit, self.max_new_tokens - n - 1)
        if not draft or limit < 1:
            return []
        if draft[:n] == self.token_ids:
            at = n
        else:
            tail, at = self.token_ids[-2:], -1
            if len(tail) == 2:
                for j in range(len(draft) - 1, 1, -1):
                    if draft[j - 2] == tail[0] and draft[j - 1] == tail[1]:
                        at = j
                        break
            if at < 0:
                return []
        proposal = draft[at:at + limit]
        for i, token in enumerate(proposal):
            if token in self.eos_token_ids:
                return proposal[:i + 1]
        return proposal

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class RequestOutput:
    """What one step did for one request."""

    request: Request
    new_token_ids: list[int]
    finished: bool
    error: str | None = None
