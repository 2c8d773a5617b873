"""Re-aligning an edited segment: its stretch of audio, the loaded aligner, a checked result. No Qt here.

The transcript screen sends a ``SegmentAlignRequest`` through the EngineClient after an edit that
changed a segment's words; the worker answers with a ``SegmentAlignResult``. The edit is saved
before this runs (with words spread over the segment, marked estimated); this only brings better
word times, or a note saying why there are none. ``start_alignment`` queues the work as an engine
job (Engine.submit_stretch_alignment: read on a thread, aligned beside the files and live captions
in the engine's steps), so the worker keeps stepping; ``align_segment`` does the same work at once,
blocking, and gives the same result.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from engine.audio.stretch import read_stretch, speech_islands
from engine.text.alignment_check import fallback_note
from engine.text.types import Word

log = logging.getLogger(__name__)


@dataclass
class SegmentAlignRequest:
    """One edited segment to time: the transcript's audio ``path`` (a file, or a live session's
    recording), the stretch to align (``start``..``end`` s: the segment with a small margin that
    stops at its neighbours), the edited ``text`` and its ``language``."""

    file_id: int
    index: int
    path: str
    start: float
    end: float
    text: str
    language: str | None = None


@dataclass
class SegmentAlignResult:
    """state: "aligned" (``words`` carry checked aligner times), "estimated" (no times: ``note``
    says why, for the transcript's notes) or "no aligner" (nothing loaded that can align: the
    segment keeps the estimated times the edit gave it, with no note)."""

    request: SegmentAlignRequest
    state: str
    words: list[Word] = field(default_factory=list)
    note: str = ""


def _has_aligner(engine) -> bool:
    aligner = getattr(engine, "aligner", None) if engine is not None else None
    return aligner is not None and callable(getattr(aligner, "align", None))   # none, or a server's


def _refused(request: SegmentAlignRequest, why: str) -> SegmentAlignResult:
    return SegmentAlignResult(request, "estimated", note=fallback_note(request.start, request.end, why))


def _missing_audio(request: SegmentAlignRequest) -> str:
    """Why the request's audio cannot be aligned before anything is read ('' when it is there)."""
    if Path(request.path).is_file():
        return ""
    # a live session saved without its recording has a name, not a path
    return (f"its audio {request.path} is not there any more" if Path(request.path).is_absolute()
            else "the session was not recorded")


def _answer(request: SegmentAlignRequest, found) -> SegmentAlignResult:
    """The result for engine.text.stretch_alignment.StretchWords ``found``."""
    if not found.words:
        return _refused(request, found.problem)
    return SegmentAlignResult(request, "aligned", words=found.words)


@dataclass(eq=False)
class PendingSegmentAlignment:
    """A request being answered: ``job`` is the engine's StretchAlignmentJob, or None when the answer
    was known at once (``answer``). The worker emits ``result()`` once ``finished``."""

    request: SegmentAlignRequest
    job: object = None
    answer: SegmentAlignResult | None = None

    @property
    def finished(self) -> bool:
        return self.answer is not None or self.job.finished

    def result(self) -> SegmentAlignResult:
        if self.answer is None:
            self.answer = _answer(self.request, self.job.result)
        return self.answer

    def cancel(self, why: str) -> None:
        """Answer now, without times (the engine that was aligning it went away)."""
        if self.answer is None:
            if self.job is not None and not self.job.finished:
                self.job.cancel()
            self.answer = _refused(self.request, why)


def start_alignment(engine, request: SegmentAlignRequest) -> PendingSegmentAlignment:
    """Queue the edited segment's alignment with ``engine``'s loaded aligner; never raises.
    The answer comes in the engine's steps (``finished``), or at once when there is nothing to align."""
    if not _has_aligner(engine):
        return PendingSegmentAlignment(request, answer=SegmentAlignResult(request, "no aligner"))
    missing = _missing_audio(request)
    if missing:
        return PendingSegmentAlignment(request, answer=_refused(request, missing))
    try:
        job = engine.submit_stretch_alignment(request.path, request.start, request.end, request.text,
                                              language=request.language)
    except Exception as exc:   # a bad stretch from the view: keep the edit as it is
        log.warning("re-aligning an edit: %s", exc)
        return PendingSegmentAlignment(request, answer=_refused(request, f"the aligner failed: {exc}"))
    return PendingSegmentAlignment(request, job)


def align_segment(engine, request: SegmentAlignRequest) -> SegmentAlignResult:
    """Time the edited segment with ``engine``'s loaded aligner at once, blocking; never raises."""
    from engine.text.stretch_alignment import align_stretch

    if not _has_aligner(engine):
        return SegmentAlignResult(request, "no aligner")
    missing = _missing_audio(request)
    if missing:
        return _refused(request, missing)
    try:
        samples = read_stretch(request.path, request.start, request.end)
        speech = speech_islands(samples, request.start)
    except Exception as exc:   # unreadable now (moved, truncated, another format): keep the edit as it is
        log.warning("re-aligning an edit: reading %s failed: %s", request.path, exc)
        return _refused(request, f"its audio could not be read: {exc}")
    return _answer(request, align_stretch(engine.aligner, samples, request.start, request.text,
                                          request.language, speech))
