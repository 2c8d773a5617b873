"""Re-aligning an edited segment, in the engine thread: its audio slice, the loaded aligner, a checked result.

The transcript screen sends a ``SegmentAlignRequest`` through the EngineClient after an edit that
changed a segment's words; the worker answers with a ``SegmentAlignResult``. The edit is saved
before this runs (with words spread over the segment, marked estimated); this only brings better
word times, or a note saying why there are none. No Qt here.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.text.alignment_check import fallback_note
from engine.text.types import Word

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
DECODE_BLOCK_SECONDS = 30.0


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


def _audio_slice(path: str, start: float, end: float):
    """Samples of ``path`` from ``start`` to ``end`` s (16 kHz mono), decoded block by block up to ``end``."""
    from engine.audio.decode import stream_audio

    lo, hi = int(start * SAMPLE_RATE), int(end * SAMPLE_RATE)
    pieces, pos = [], 0
    for block in stream_audio(path, DECODE_BLOCK_SECONDS):
        a, b = max(lo, pos), min(hi, pos + len(block))
        if b > a:
            pieces.append(block[a - pos:b - pos])
        pos += len(block)
        if pos >= hi:
            break
    return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)


def _speech(samples, start: float) -> list[tuple[float, float]]:
    from engine.audio.vad import SpeechDetector

    regions = SpeechDetector.shared().speech_regions(samples)
    return [(start + a / SAMPLE_RATE, start + b / SAMPLE_RATE) for a, b in regions]


def align_segment(engine, request: SegmentAlignRequest) -> SegmentAlignResult:
    """Time the edited segment with ``engine``'s loaded aligner; never raises."""
    from engine.text.stretch_alignment import align_stretch

    aligner = getattr(engine, "aligner", None) if engine is not None else None
    if aligner is None or not callable(getattr(aligner, "align", None)):   # none, or a server's
        return SegmentAlignResult(request, "no aligner")

    def refused(why: str) -> SegmentAlignResult:
        return SegmentAlignResult(request, "estimated", note=fallback_note(request.start, request.end, why))

    if not Path(request.path).is_file():
        # a live session saved without its recording has a name, not a path
        return refused(f"its audio {request.path} is not there any more" if Path(request.path).is_absolute()
                       else "the session was not recorded")
    try:
        samples = _audio_slice(request.path, request.start, request.end)
        speech = _speech(samples, request.start) if len(samples) else []
    except Exception as exc:   # unreadable now (moved, truncated, another format): keep the edit as it is
        log.warning("re-aligning an edit: reading %s failed: %s", request.path, exc)
        return refused(f"its audio could not be read: {exc}")
    found = align_stretch(aligner, samples, request.start, request.text, request.language, speech)
    if not found.words:
        return refused(found.problem)
    return SegmentAlignResult(request, "aligned", words=found.words)
