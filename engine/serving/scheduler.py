"""Decides which rows run in a step: decode rows first, then prefill rows under a token budget.

Priority first (the live stream), then fairness: decode rows rotate by the step
they last ran, and a newcomer waiting behind a full decode set gets a reserved
row, so it reaches its first token within a few steps. Prefill of lower priority
yields to higher (``_background_budget``): while a live update is in the engine,
queued files only decode (their rows ride along almost free in a step bound by
reading the weights) and prefill in the gaps, in small chunks, so an update never
waits behind a whole file chunk's prefill. When cache blocks run
out, the newest running request is preempted: its blocks go back and it is
recomputed later from its prompt and the tokens it already has, never lost.

With a prefix-caching allocator, a request starts from the longest prompt prefix the cache
holds (``start_from_cache``): blocks keyed by their tokens and audio embeddings, which every
request leaves there when it releases them. A live stream's next pass is such a request.
"""
from __future__ import annotations

import enum
import math
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

from engine.serving.kv_cache import BlockAllocator
from engine.serving.prefix_cache import prompt_keys
from engine.serving.repetition import cut_repetition
from engine.serving.request import Request, RequestState


class RowMode(enum.Enum):
    """What a step reads out of a row, which the runner computes and ``postprocess`` takes in."""

    FEED = "feed"        # part of a prompt: its keys and values enter the cache, nothing is read out
    SAMPLE = "sample"    # greedy's next token after the row's last token
    VERIFY = "verify"    # the last token plus draft tokens: greedy's token after each of them
    SCORE = "score"      # a scored request (``score_token_id``): score-head classes at its marked positions


@dataclass
class ScheduledRow:
    request: Request
    start: int          # first token of the row (== request.num_cached before the step)
    length: int         # tokens this step feeds
    sample: bool        # whether this row ends at the request's last token (a token is produced)
    draft: list[int] = field(default_factory=list)   # draft tokens fed after the last token, to verify

    @property
    def kind(self) -> str:
        """'decode' (one new token), 'prefill' (the rest of a prompt), 'chunk' (part of one) or
        'verify' (the last token plus draft tokens: greedy's token after each of them)."""
        if not self.sample:
            return "chunk"
        if self.draft:
            return "verify"
        return "decode" if self.length == 1 and self.request.token_ids else "prefill"

    @property
    def mode(self) -> RowMode:
        """Chosen by the request's data: every row of a scored request is scored (its prompt may
        run in chunks); otherwise a row samples only when it ends at the last token."""
        if self.request.score_token_id is not None:
            return RowMode.SCORE
        if not self.sample:
            return RowMode.FEED
        return RowMode.VERIFY if self.draft else RowMode.SAMPLE


@dataclass
class SchedulerConfig:
    max_batch_size: int = 64        # rows of a decode-only step
    max_prefill_rows: int = 8       # prefill rows in a mixed step
    max_step_tokens: int = 2048     # tokens of one step, decode and prefill together
    reserve_after_steps: int = 1    # a waiting request gets a row after waiting this many steps
    background_prefill_tokens: int = 256   # prefill tokens a step gives lower priority while higher is about
    background_window_steps: int = 32      # "about": seen in the engine within this many steps...
    background_window_s: float = 3.0       # ...and seconds (the engine does not step while idle)

    def __post_init__(self):
        for name in ("max_batch_size", "max_prefill_rows", "max_step_tokens", "background_prefill_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.background_window_steps < 0:
            raise ValueError(f"background_window_steps must be at least 0, got {self.background_window_steps}")
        if not self.background_window_s >= 0:
            raise ValueError(f"background_window_s must be at least 0, got {self.background_window_s}")


class Scheduler:
    def __init__(self, config: SchedulerConfig, allocator: BlockAllocator, clock=time.monotonic):
        self.config = config
        self.clock = clock      # seconds, for ``background_window_s``; tests pass a fake one
        self.allocator = allocator
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.step_count = 0
        self.preemptions = 0
        self.rejected: list[Request] = []
        self._top_priority = (0, -1, -math.inf)   # (highest priority seen lately, the step and time it was last seen)
        # Called with a request about to start, before its prefix is looked up: the runner encodes it
        # there when its audio is a repeat (ModelRunner.encode_if_cached), so its audio prefix can match.
        self.before_start: Callable[[Request], None] | None = None
        self.prompt_tokens = 0          # prompt tokens of every request started...
        self.prefix_tokens_cached = 0   # ...and of those, the ones found in the cache
        self._keys: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # request -> its prompt keys

    def add(self, request: Request) -> None:
        request.arrival_step = self.step_count
        request.state = RequestState.WAITING
        self.waiting.append(request)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def release(self, request: Request) -> None:
        """Give a request's blocks back (what they hold of its prompt stays cached) and drop it from the queues."""
        self._cache_prompt(request)
        self.allocator.release(request.block_table)
        request.num_cached = 0
        if request in self.running:
            self.running.remove(request)
        if request in self.waiting:
            self.waiting.remove(request)

    def _reject(self, request: Request, reason: str) -> None:
        self.release(request)
        request.state, request.finish_reason, request.error = RequestState.FINISHED, "error", reason
        self.rejected.append(request)

    def take_rejected(self) -> list[Request]:
        """Requests failed since the last call (they could never fit); the engine reports them."""
        rejected, self.rejected = self.rejected, []
        return rejected

    def _preempt(self, request: Request) -> None:
        self.preemptions += 1
        self.release(request)
        request.state = RequestState.WAITING
        self.waiting.insert(0, request)

    def _ensure_blocks(self, request: Request, num_tokens: int, protect: set[int], may_preempt: bool) -> bool:
        """Grow ``request``'s block table to ``num_tokens``, preempting the newest other running
        requests (never those in ``protect``) when ``may_preempt``."""
        while not self.allocator.grow(request.block_table, num_tokens):
            victims = [r for r in self.running if r.id not in protect and r is not request]
            if not may_preempt or not victims:
                return False
            self._preempt(max(victims, key=lambda r: (-r.priority, r.arrival_step, r.id)))
        return True

    def schedule(self) -> list[ScheduledRow]:
        """Rows for this step. Every returned row has its cache blocks allocated."""
        self.step_count += 1
        cfg = self.config
        rows: list[ScheduledRow] = []
        budget = cfg.max_step_tokens
        scheduled: set[int] = set()
        decoders = sorted((r for r in self.running if not r.in_prefill),
                          key=lambda r: (-r.priority, r.last_scheduled_step, r.arrival_step))
        pending = sorted(self.waiting + [r for r in self.running if r.in_prefill],
                         key=lambda r: (-r.priority, r.arrival_step, r.id))
        decode_cap = cfg.max_batch_size
        if len(decoders) >= decode_cap and any(
                self.step_count - r.arrival_step >= cfg.reserve_after_steps for r in pending):
            decode_cap -= 1  # a reserved row keeps newcomers from starving behind a full decode set
        for req in decoders:
            if len(rows) >= decode_cap or budget < 1:
                break
            if req.state is not RequestState.RUNNING:
                continue  # preempted earlier in this step
            draft = req.draft_proposal(budget - 1)
            if self._ensure_blocks(req, req.num_tokens + len(draft), scheduled, may_preempt=True):
                rows.append(ScheduledRow(req, req.num_cached, 1 + len(draft), True, draft))
                scheduled.add(req.id)
                budget -= 1 + len(draft)
            else:
                self._preempt(req)  # nothing left to take from: recompute it later
        prefill_rows = 0
        top, background = self._background_budget(decoders + pending)
        background_rows = 0
        for req in pending:
            if budget < 1 or prefill_rows >= cfg.max_prefill_rows or len(rows) >= max(cfg.max_batch_size, 1):
                break
            if req.state is RequestState.FINISHED or req.id in scheduled:
                continue
            limit = budget
            fresh = req.state is RequestState.WAITING and not req.block_table and not req.num_cached
            if req.priority < top:   # background: what is left of its allowance, or a chunk when it starves
                limit = min(budget, max(background, cfg.background_prefill_tokens if self._starving(req) else 0))
                if background_rows:
                    limit = 0        # one background prefill row a step: each new clip runs its whole encoder
            if limit < 1:
                continue
            if fresh:
                self.start_from_cache(req)
            length = min(req.num_tokens - req.num_cached, limit)
            sample = req.num_cached + length == req.num_tokens
            draft = req.draft_proposal(budget - length) if sample else []
            length += len(draft)
            lowest = min((r.priority for r in self.running if r.id not in scheduled), default=req.priority)
            if not self._ensure_blocks(req, req.num_cached + length, scheduled, may_preempt=req.priority > lowest):
                if fresh:   # it waits: the cached blocks it was given go back
                    self.allocator.release(req.block_table)
                    req.num_cached = 0
                capacity = self.allocator.num_blocks * self.allocator.block_size
                if req.num_tokens > capacity:  # it can never run: fail it alone, the rest go on
                    self._reject(req, f"the clip needs {req.num_tokens} tokens of cache, more than the whole "
                                      f"cache holds ({capacity}); raise the KV cache budget or shorten the clip")
                continue
            if req in self.waiting:
                self.waiting.remove(req)
                req.state = RequestState.RUNNING
                self.running.append(req)
            rows.append(ScheduledRow(req, req.num_cached, length, sample, draft))
            scheduled.add(req.id)
            budget -= length
            if req.priority < top:
                background -= length
                background_rows += 1
            prefill_rows += 1
        for row in rows:
            row.request.last_scheduled_step = self.step_count
        return rows

    def _background_budget(self, requests: list[Request]) -> tuple[int, int]:
        """(the priority that counts as foreground now, prefill tokens this step gives the rest).

        While a request of the top priority is in the engine, lower priorities get no prefill: a
        live update's steps stay short. In the steps between its requests (until
        ``background_window_steps`` pass without one) they get ``background_prefill_tokens``
        a step, so the next update waits behind a short step at most. Then everything is
        foreground again."""
        cfg = self.config
        present = max((r.priority for r in requests), default=None)
        top, seen, seen_at = self._top_priority
        now = self.clock()
        stale = self.step_count - seen > cfg.background_window_steps or now - seen_at > cfg.background_window_s
        if present is not None and (present >= top or stale):
            self._top_priority = top, seen, seen_at = present, self.step_count, now
            stale = False
        if stale:
            return min((r.priority for r in requests), default=0), 0
        if any(r.priority >= top for r in requests):
            return top, 0
        return top, cfg.background_prefill_tokens

    def _starving(self, req: Request) -> bool:
        """A background request that has not run for twice the window (a stream that never
        leaves a gap must not stop the queue)."""
        last = max(req.arrival_step, req.last_scheduled_step)
        return self.step_count - last > 2 * self.config.background_window_steps

    def postprocess(self, rows: list[ScheduledRow], next_tokens: dict[int, int | list[int]]) -> list[Request]:
        """Advance the cache counters, append sampled tokens (a scored row's classes to its
        ``result``); return the requests that finished.

        A verify row brings greedy's token after its last token and after each draft token: the
        tokens are taken while they equal the draft, plus the one after (exactly greedy decoding),
        and the cache keeps only what was accepted (later slots are overwritten by later steps)."""
        missing = [r.request.id for r in rows if r.mode is not RowMode.FEED and r.request.id not in next_tokens]
        if missing:
            raise RuntimeError(f"step dropped rows of requests {missing}")
        finished = []
        for row in rows:
            req = row.request
            req.num_cached = row.start + row.length
            mode = row.mode
            if mode is RowMode.SCORE:
                req.result = (req.result or []) + next_tokens[req.id]
                if row.sample:                 # the whole prompt is scored: done
                    req.finish_reason = "stop"
            elif mode is not RowMode.FEED:
                tokens = next_tokens[req.id]
                self._take_tokens(req, [tokens] if isinstance(tokens, int) else tokens, row.draft)
                req.num_cached = min(req.num_cached, req.num_tokens - 1)   # the rejected draft's KV is dropped
            if req.finish_reason:
                finished.append(req)
        for row in rows:
            if row.start < len(row.request.prompt_ids) <= row.request.num_cached:
                self._cache_prompt(row.request)   # its prompt is in: later requests may share it now
        for req in finished:
            self.release(req)
            req.state = RequestState.FINISHED
        return finished

    def start_from_cache(self, req: Request) -> None:
        """Give a request about to start the cached blocks of its prompt's longest cached prefix
        (never its last prompt token, which must run to give the first logits)."""
        if self.allocator.prefix is None:
            return
        if self.before_start is not None:
            self.before_start(req)
        keys = self._prompt_keys(req)[:len(req.prompt_ids) - 1]
        req.block_table, req.num_cached = self.allocator.match(keys)
        req.prefix_cached = req.num_cached
        self.prompt_tokens += len(req.prompt_ids)
        self.prefix_tokens_cached += req.num_cached

    def _cache_prompt(self, req: Request) -> None:
        """Register the blocks holding the part of ``req``'s prompt that is in the cache."""
        if self.allocator.prefix is None or not req.block_table:
            return
        keys = self._prompt_keys(req)[:min(req.num_cached, len(req.prompt_ids))]
        self.allocator.register(req.block_table, keys)

    def _prompt_keys(self, req: Request) -> list[bytes]:
        keys = self._keys.get(req)
        if keys is None or (len(keys) < len(req.prompt_ids) and req.audio_embeds is not None):
            keys = prompt_keys(req.prompt_ids, req.audio_start, req.num_audio_tokens, req.audio_embeds)
            self._keys[req] = keys
        return keys

    def _take_tokens(self, req: Request, tokens: list[int], draft: list[int]) -> None:
        """Append greedy tokens up to the first that departs from ``draft``, an end token, or the cap."""
        req.draft_offered += len(draft)
        for i, token in enumerate(tokens):
            req.token_ids.append(token)
            if req.first_token_step is None:
                req.first_token_step = self.step_count
            if token in req.eos_token_ids:
                req.finish_reason = "stop"
            elif len(req.token_ids) >= req.max_new_tokens:
                req.finish_reason = "length"
            elif req.repetition_guard and cut_repetition(req.token_ids):
                req.finish_reason = "repetition"   # a loop: one copy kept (engine.serving.repetition)
            accepted = i < len(draft) and token == draft[i]
            req.draft_accepted += accepted
            if req.finish_reason or not accepted:
                return
