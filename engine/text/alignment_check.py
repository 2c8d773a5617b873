"""Is a chunk's forced alignment believable? Checks against the words' own times and the VAD's speech.

A forced aligner always answers, even when it has lost track of the audio: then its words run
backwards, collapse onto one instant (zero-length words), crowd into a small part of the chunk, or
sit in silence. Such times look exact in a transcript and in subtitles while being wrong, so a chunk
that fails a check keeps its text and gets estimated times instead (engine.text.placement), with a
note saying where.
"""
from __future__ import annotations

from engine.text.types import Word

MAX_BACKWARD_SHARE = 0.15     # raw aligner times that go back in time (before the monotonic repair)
MAX_ZERO_SHARE = 0.2          # words with no duration
MIN_SPEECH_COVERED = 0.5      # share of the VAD's speech that lies between the first and last word
MAX_OUTSIDE_SHARE = 0.2       # words whose middle is far from any speech
OUTSIDE_SECONDS = 0.5


def _overlap(a: float, b: float, islands) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in islands)


def _distance(t: float, islands) -> float:
    return min((0.0 if x <= t <= y else min(abs(t - x), abs(t - y))) for x, y in islands)


def alignment_problem(words: list[Word], speech, raw_ms: list[float] | None = None) -> str:
    """Why these word times cannot be trusted, or '' when they pass every check.

    words: the aligned words in file time; speech: the VAD's (start, end) speech islands in the
    chunk, seconds; raw_ms: the aligner's times before repair (start, end per word), if known."""
    if not words:
        return ""
    n = len(words)
    if raw_ms and len(raw_ms) > 2:
        backward = sum(1 for x, y in zip(raw_ms, raw_ms[1:]) if y < x)
        if backward / (len(raw_ms) - 1) > MAX_BACKWARD_SHARE:
            return f"{backward} of {len(raw_ms) - 1} word times went back in time"
    zero = sum(1 for w in words if w.end - w.start <= 0.0)
    if n >= 3 and zero / n > MAX_ZERO_SHARE:
        return f"{zero} of {n} words had no duration"
    islands = [(float(a), float(b)) for a, b in speech or () if b > a]
    if not islands:
        return ""
    total = sum(b - a for a, b in islands)
    covered = _overlap(words[0].start, words[-1].end, islands)
    if n >= 3 and total > 1.0 and covered < MIN_SPEECH_COVERED * total:
        return f"the words were crowded into {covered:.1f} s of {total:.1f} s of speech"
    outside = sum(1 for w in words if _distance((w.start + w.end) / 2, islands) > OUTSIDE_SECONDS)
    if outside / n > MAX_OUTSIDE_SHARE:
        return f"{outside} of {n} words fell outside the speech"
    return ""


def widen_instant_words(words: list[Word], step: float) -> None:
    """A word the aligner put on one instant (start and end in the same time class) lies somewhere in
    that class: give it the class's length, as far as the next word leaves room. Only for alignments
    that passed the checks, where such words are few (a share of them makes the check refuse)."""
    for i, w in enumerate(words):
        if w.end <= w.start:
            room = words[i + 1].start if i + 1 < len(words) else w.start + step
            w.end = round(max(w.start, min(w.start + step, room)), 3)


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` past an hour) for notes a user reads."""
    s = int(max(0.0, seconds))
    h, m, s = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def fallback_note(start: float, end: float, problem: str = "") -> str:
    """The transcript note for a chunk whose alignment was refused (``problem`` says why)."""
    why = f" ({problem})" if problem else ""
    return f"word times for {clock(start)}-{clock(end)} could not be aligned{why}; times there are estimated"
