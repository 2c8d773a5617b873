"""Live transcription of a stream of samples: committed segments plus a tentative tail.

Silero VAD (``UtteranceTracker``) splits the stream into utterances. While one
is open, every ``update_interval`` seconds of *stream* time (counted in
samples, so the result does not depend on playback speed) only that
utterance's audio is transcribed again as a high-priority request, giving the
tentative text. When the utterance ends (or is cut at its quietest point once
it runs past ``max_utterance_s``) its final pass is submitted, and its text is
committed when that pass finishes. The official streaming re-feeds everything
heard so far, so its cost grows without bound; here a pass never sees more than
one utterance, and only the open utterance (plus a short pre-roll) is kept in
memory, so the cost of an update does not depend on how long the session runs.

``feed`` and ``close`` may be called from any thread; all the work happens in
``advance``, which the engine calls once per step on its own thread. The engine pushes
each pass's outputs back to the stream (``_on_output``, given with the request), as it
does to file jobs: the stream learns that a pass finished from the push.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

import numpy as np

from engine.network.features import SAMPLE_RATE
from engine.pipelines.argument_rules import MAX_UTTERANCE_SECONDS, PRIORITY, positive_seconds
from engine.pipelines.final_pass import COVERING_EXTRA_S, FinalPass, covering_update, covers
from engine.pipelines.live_speakers import stream_speakers
from engine.pipelines.pass_draft import PassDraft
from engine.pipelines.stream_audio import KeptSamples, take_front
from engine.pipelines.stream_text import RecentContext, stable_prefix
from engine.serving.request import Request, RequestOutput
from engine.text.types import Segment

__all__ = ["FinalPass", "Stream", "stable_prefix"]


class Stream:
    """A live stream in an engine. Create with ``Engine.open_stream``; see the module docstring.

    Read ``committed`` (segments in stream seconds; only grows), ``tentative``
    (may change), ``stable_prefix`` (the start of the open utterance's text that
    the last two updates agreed on), ``state`` ("listening", "closing", "done",
    "failed", "cancelled"), ``error`` and ``finished``. ``finals`` runs parallel
    to ``committed``: the context and request (tokens) of each segment's final pass.

    Options: ``update_interval`` seconds of stream between updates of the open
    utterance; ``max_utterance_s`` where a long utterance is cut at its quietest
    point; ``recent_context_chars`` of committed text appended to ``context`` for
    every pass; ``priority`` of the stream's updates in the engine (its final passes run one
    above, so a commit never queues behind tentative updates of this or other streams);
    ``min_silence_s`` of silence that ends an utterance; ``max_new_tokens`` per
    pass (None: the engine's default, or a function of the pass's audio seconds);
    ``word_timestamps`` when the engine has an aligner; ``speakers`` labels each committed
    segment's speaker (``speakers.changes`` lists later corrections).
    """

    PRE_ROLL_S = 3.0   # audio kept before speech is confirmed: the VAD dates a start back this far at most
    # Audio taken in (through the VAD) per engine step: twice what arrives in real time between
    # steps (so a live source never falls behind), at least MIN_INGEST_S, at most MAX_INGEST_S
    # (about 1 CPU-second of voice detection on 2 cores), so one huge feed() is worked off over
    # many steps instead of holding every other request for the whole of it.
    MIN_INGEST_S, MAX_INGEST_S = 0.5, 8.0

    def __init__(self, engine, *, language=None, context: str = "", update_interval: float = 0.75,
                 max_utterance_s: float = 20.0, recent_context_chars: int = 200, priority: int = 10,
                 min_silence_s: float = 0.5, max_new_tokens: int | Callable[[float], int] | None = None,
                 word_timestamps: bool = True, detector=None, speakers: bool = False):
        from engine.audio.vad import SpeechDetector
        from engine.audio.vad_stream import UtteranceTracker
        from engine.text.prompt import language_name

        update_interval = positive_seconds(update_interval, "update_interval")
        max_utterance_s = MAX_UTTERANCE_SECONDS.check(max_utterance_s)   # the chunk-length bounds
        min_silence_s = positive_seconds(min_silence_s, "min_silence_s")
        if not isinstance(recent_context_chars, int) or recent_context_chars < 0:
            raise ValueError(f"recent_context_chars must be a non-negative integer, got {recent_context_chars!r}")
        if not (max_new_tokens is None or callable(max_new_tokens)
                or (isinstance(max_new_tokens, int) and max_new_tokens >= 1)):
            raise ValueError(f"max_new_tokens must be None, at least 1, or a function of seconds, "
                             f"got {max_new_tokens!r}")
        if not isinstance(context, str):
            raise ValueError(f"context must be a string, got {type(context).__name__}")
        if not isinstance(priority, int):
            raise ValueError(f"priority must be an integer, got {priority!r}")
        self.engine = engine
        self.language = language_name(language)           # ValueError for unknown languages, here and now
        self.update_interval = update_interval
        self.max_utterance_s = max_utterance_s
        self.priority = priority
        self.max_new_tokens = max_new_tokens
        self.word_timestamps = word_timestamps
        self._tracker = UtteranceTracker(detector or SpeechDetector.shared(), min_silence_s=min_silence_s,
                                         max_utterance_s=max_utterance_s)
        self._interval = max(1, round(self.update_interval * SAMPLE_RATE))
        # Audio past an utterance's end that a covering update may hold (final_pass.covering_update):
        # never so much that its segment could reach into the next utterance's padded start.
        tr = self._tracker
        self._covering_extra = max(0, min(round(COVERING_EXTRA_S * SAMPLE_RATE), tr.min_silence - 2 * tr.pad))
        self._cadence = self._interval          # stream samples between updates: spaced out while behind
        self._draft = PassDraft(engine.tokenizer)   # the open utterance's last tokens, the next pass's draft
        self.committed: list[Segment] = []
        # speakers=True: each committed segment gets a speaker label (engine.pipelines.live_speakers)
        self.speakers = stream_speakers(engine) if speakers else None
        self.finals: list[FinalPass] = []                  # parallel to committed
        self.tentative = ""
        self.stable_prefix = ""
        self.state = "listening"
        self.error: str | None = None
        # Hooks for tests and benchmarks: on_request(kind, request, (start, end)) with kind "update" or
        # "final"; on_final(final_pass) once a final pass is resolved (committed, or empty and dropped).
        self.on_request: Callable | None = None
        self.on_final: Callable | None = None
        self._lock = threading.Lock()
        self._inbox: deque[np.ndarray] = deque()
        self._closed = False
        self._cancelled = False
        self._kept = KeptSamples()              # samples heard (and fed to the VAD); the open utterance's kept
        self._open: int | None = None           # start sample of the open utterance
        self._next_update = 0
        self._update: Request | None = None     # the one tentative update in flight, if any
        self._update_answered = False           # the engine pushed the update's finished output
        self._update_span = (0, 0)              # samples the update in flight covers
        self._update_end = 0                    # stream position the last finished update covered
        self._update_context = ""               # the context of the update in flight
        self._last_update: tuple | None = None  # (request, span, context) of the open utterance's last finished update
        self._received = 0                      # samples fed, whether or not taken in yet
        self._last_advance: float | None = None  # monotonic time of the last advance (sizes the next slice)
        self._preview = ""                      # latest update text of the open utterance
        self._pending: list[FinalPass] = []     # submitted finals, in utterance order
        self._recent = RecentContext(context, recent_context_chars)   # every pass's context

    # ------------------------------------------------------------ any thread
    def feed(self, pcm) -> None:
        """Queue float32 mono 16 kHz samples (any block size); returns at once."""
        from engine.audio.samples import pcm_to_float

        if pcm is None:
            raise ValueError("feed() needs audio samples (a 1-D array of float32 16 kHz samples or integer "
                             "PCM), got None; to end the stream call close()")
        samples = pcm_to_float(pcm, copy=True)   # a copy: the caller may reuse its buffer; int PCM scaled
        with self._lock:
            if self._closed or self._cancelled:
                raise RuntimeError("feed() on a closed stream")
            if samples.size:
                self._inbox.append(samples)
                self._received += samples.size

    def close(self) -> None:
        """End of audio: the open utterance ends here; ``finished`` once every final pass is committed."""
        with self._lock:
            self._closed = True

    def cancel(self) -> None:
        """Stop now, dropping what is not committed; takes effect at the engine's next step."""
        with self._lock:
            self._cancelled = True

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    @property
    def busy(self) -> bool:
        """True while the stream has audio or passes the engine still has to work on."""
        with self._lock:
            queued = bool(self._inbox) or (self._closed and not self.finished) or self._cancelled
        return not self.finished and (queued or self._update is not None or bool(self._pending))

    @property
    def lag_seconds(self) -> float:
        """How far the text shown is behind the audio fed: seconds of the open utterance (and of audio
        not taken in yet) that no finished pass has covered. Between utterances, only the latter."""
        covered = self._kept.position if self._open is None else max(self._open, self._update_end)
        return max(0, self._received - covered) / SAMPLE_RATE

    @property
    def update_seconds(self) -> float:
        """Seconds of stream between updates now: ``update_interval``, or more while the engine is behind."""
        return self._cadence / SAMPLE_RATE

    @property
    def buffered_seconds(self) -> float:
        """Seconds of audio held in memory: the open utterance, or the pre-roll between utterances."""
        return len(self._kept.samples) / SAMPLE_RATE

    @property
    def duration(self) -> float:
        """Seconds of audio processed so far."""
        return self._kept.position / SAMPLE_RATE

    @property
    def context(self) -> str:
        """The base context of every pass."""
        return self._recent.base

    @property
    def recent_context_chars(self) -> int:
        """Characters of committed text appended to ``context`` for every pass."""
        return self._recent.chars

    @property
    def pass_context(self) -> str:
        """The context the next pass gets: ``context`` plus the tail of the committed text."""
        return self._recent.text()

    @property
    def final_contexts(self) -> list[str]:
        """The context each committed segment's final pass used (parallel to ``committed``)."""
        return [f.context for f in self.finals]

    # ---------------------------------------------------------- engine thread
    def advance(self) -> None:
        """Bounded work for one engine step: collect results, take new audio, submit passes."""
        if self.finished:
            return
        now = time.monotonic()
        since, self._last_advance = now - (self._last_advance or now), now
        seconds = min(self.MAX_INGEST_S, max(self.MIN_INGEST_S, 2 * since))
        with self._lock:
            blocks = take_front(self._inbox, round(seconds * SAMPLE_RATE))
            closing, cancelled = self._closed and not self._inbox, self._cancelled
        if cancelled:
            self._stop("cancelled")
            return
        try:
            self._collect()
            for block in blocks:
                self._ingest(block)
            if closing and self.state == "listening":
                self._flush()
            self._collect()
        except Exception as e:  # a failing stream stops alone; the engine and its other jobs go on
            self._stop("failed", f"live transcription failed: {type(e).__name__}: {e}")
            return
        if self.state == "closing" and not self._pending:
            self.state = "done"

    def _ingest(self, block: np.ndarray) -> None:
        """Feed the VAD in pieces of at most one update interval, so updates keep their cadence."""
        for i in range(0, len(block), self._interval):
            piece = block[i:i + self._interval]
            self._kept.append(piece)
            for event in self._tracker.feed(piece):
                self._on_event(event)
            self._maybe_update()
            self._trim()

    def _on_event(self, event: tuple) -> None:
        kind = event[0]
        if kind == "start":
            self._begin(event[1])
        elif kind == "end":
            self._end(event[1], event[2], silence_after=True)
            self._open = None
        elif kind == "cut":                     # the utterance ran too long: it ends at c, the next starts there
            self._end(event[1], event[2], silence_after=False)
            self._begin(event[2])

    def _begin(self, start: int) -> None:
        self._open = max(start, self._kept.start)
        self._next_update = self._open + self._cadence
        self._update_end = self._open
        self._draft.next_utterance()
        self._preview = self.stable_prefix = ""
        self._publish()

    def _flush(self) -> None:
        """End of audio: close the open utterance and submit its final pass."""
        for event in self._tracker.finish():
            self._on_event(event)
        self._drop_update()
        self._draft.reset()
        self._open = None
        self.state = "closing"

    def _maybe_update(self) -> None:
        """Re-transcribe the open utterance when an interval of stream time has passed. In a pause
        a pass ends where the pause began (padded): if the pause goes on, that pass is the final
        one (``_end`` takes it as such). Once the pause has lasted half of ``min_silence_s`` such a
        pass starts at once, in place of an update in flight that would not serve."""
        if self._open is None:
            return
        due = self._kept.position >= self._next_update
        if due:
            missed = (self._kept.position - self._next_update) // self._cadence + 1
            self._next_update += missed * self._cadence
        pause = self._tracker.pause
        end = pause[0] if pause is not None and pause[0] <= self._kept.position else None
        if not due and end is None:
            return
        context = self._recent.text()
        early = (end is not None and pause[1] >= self._tracker.min_silence // 2
                 and not self._final_ready(end, context))
        if not (due or early):
            return
        if self._update is not None:
            if not early:
                return                           # still running: skip this one rather than queue it
            self._drop_update()                  # the early pass hears more of the utterance
        span = (self._open, self._kept.position if end is None else end)
        last = self._last_update
        if last is not None and last[1] == span and last[2] == context:
            return                               # the same audio as the last pass: the same text
        if early:
            self._next_update = self._kept.position + self._cadence   # it takes this interval's update's place
        self._update_span, self._update_context = span, context
        self._update_answered = False
        self._update = self._submit(span, context)
        self._notify_request("update", self._update, span)

    def _final_ready(self, end: int, context: str) -> bool:
        """Whether the update in flight, or the last finished one, is the final pass of the open
        utterance if it ends at ``end`` with ``context``."""
        start, extra = self._open, self._covering_extra
        if self._update is not None:
            return covers(self._update_span, self._update_context, start, end, context, extra)
        return covering_update(self._last_update, start, end, context, extra) is not None

    def _end(self, start: int, end: int, *, silence_after: bool) -> None:
        """The utterance ``[start, end)`` is over: submit its final pass, unless the last finished
        update already is one (``covering_update``) or the update in flight will be (it is then
        kept, at a final's priority); any other update in flight is cancelled."""
        start = max(start, self._kept.start)
        context = self._recent.text()
        running = self._running_final(start, end, context) if silence_after and end > start else None
        self._drop_update()
        last, self._last_update = self._last_update, None
        if end - start <= 0:
            self._draft.next_utterance()
            return
        covering = covering_update(last, start, end, context, self._covering_extra) if silence_after else None
        if running is not None:
            request, end, answered = running
        elif covering is not None:
            (request, end), answered = covering, True     # a covering update finished already
        else:
            request, answered = self._submit((start, end), context, final=True), False
        self._draft.next_utterance()
        keep = self.word_timestamps and self.engine.aligner is not None
        final = FinalPass(start, end, context, request, heard_at=self._kept.position, preview=self._preview,
                          samples=self._kept.slice(start, end) if keep else None, answered=answered)
        self._pending.append(final)
        if self.speakers is not None:
            self.speakers.hear(final, self._kept.slice(start, end))
        self._preview = self.stable_prefix = ""
        self._notify_request("final", request, (start, end))

    def _running_final(self, start: int, end: int, context: str) -> tuple[Request, int, bool] | None:
        """The update in flight (request, where its audio ends, whether it finished) when it is the
        final pass of ``[start, end)``, as ``covering_update`` decides for a finished one; it is
        handed over: the stream no longer tracks it as its update, and it runs at a final's priority."""
        update = self._update
        if update is None or update.error or update.finish_reason not in (None, "stop", "length"):
            return None
        if not covers(self._update_span, self._update_context, start, end, context, self._covering_extra):
            return None
        answered, self._update = self._update_answered, None
        update.priority = self._final_priority()
        return update, self._update_span[1], answered

    def _final_priority(self) -> int:
        # Finals one above updates: with many streams on a busy engine, the text people keep
        # must not wait behind previews of the same or other streams, which are redone anyway.
        return min(self.priority + 1, int(PRIORITY.high))

    def _submit(self, span: tuple[int, int], context: str | None = None, final: bool = False) -> Request:
        """Queue a pass over ``span`` of the open utterance, reusing what its last pass computed."""
        cap = self.max_new_tokens
        if callable(cap):                        # a cap that follows the pass's audio length
            cap = max(1, int(cap((span[1] - span[0]) / SAMPLE_RATE)))
        priority = self._final_priority() if final else self.priority
        request = self.engine.make_request(self._kept.slice(*span), language=self.language,
                                           context=self._recent.text() if context is None else context,
                                           max_new_tokens=cap, priority=priority)
        self._draft.give(request)                # the rest it reuses, serving finds in its caches
        return self.engine.add_request(request, self._on_output)

    def _on_output(self, output: RequestOutput) -> None:
        """The engine's push for one of this stream's passes (taken by ``_collect``); a dropped
        update's late push finds no owner and is ignored."""
        if not output.finished:
            return
        if output.request is self._update:
            self._update_answered = True
            return
        for final in self._pending:
            if final.request is output.request:
                final.take(output)
                return

    def _drop_update(self) -> None:
        if self._update is not None:
            self._update.cancel()
            self._update = None

    def _pace(self, span: tuple[int, int]) -> None:
        """Space updates out while the engine is behind: when the audio that arrived while an
        update ran exceeds two intervals, the next one waits that long (up to 4 intervals);
        once it keeps up again, back to ``update_interval``."""
        behind = self._received - span[1]
        if behind > 2 * self._interval:
            self._cadence = min(4 * self._interval, behind)
        else:
            self._cadence = max(self._interval, (self._cadence + self._interval) // 2)

    def _trim(self) -> None:
        """Keep only the open utterance, or a short pre-roll where the next one may start."""
        pre_roll = self._kept.position - round(self.PRE_ROLL_S * SAMPLE_RATE)
        self._kept.keep_from(self._open if self._open is not None else pre_roll)

    # --------------------------------------------------------------- results
    def _collect(self) -> None:
        """Take a finished update's text, then commit finished finals in utterance order."""
        update = self._update
        if update is not None and self._update_answered:
            self._update = None
            self._draft.take(update)
            if not update.error and update.finish_reason != "cancelled":
                self._update_end = self._update_span[1]
                self._last_update = (update, self._update_span, self._update_context)
                self._pace(self._update_span)
                _, text = self.engine.decode(update)
                self.stable_prefix = stable_prefix(self._preview, text)
                self._preview = text
        while self._pending and self._pending[0].resolve(self.engine):
            final = self._pending.pop(0)
            if final.segment is not None:
                self.committed.append(final.segment)
                self.finals.append(final)
                self._recent.remember(final.segment.text)
            if self.speakers is not None:
                self.speakers.resolved(final, self.committed)
            if self.on_final is not None:
                self.on_final(final)
        self._publish()

    def _publish(self) -> None:
        """Tentative text: the previews of finals not yet committed, then the open utterance's."""
        self.tentative = " ".join(t for t in [f.preview for f in self._pending] + [self._preview] if t)

    def _notify_request(self, kind: str, request: Request, span: tuple[int, int]) -> None:
        if self.on_request is not None:
            self.on_request(kind, request, span)

    def _stop(self, state: str, error: str | None = None) -> None:
        """Cancel everything in flight and finish in ``state``."""
        self._drop_update()
        self._last_update = None
        self._draft.reset()
        for final in self._pending:
            final.cancel()
        self._pending = []
        self._kept.clear()
        self.tentative = self.stable_prefix = ""
        self.error, self.state = error, state
