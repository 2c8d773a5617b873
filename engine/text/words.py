"""Word timestamps for transcript segments: aligner requests in, Words out, or a note saying why not."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.text.prompt import ALIGNER_LANGUAGES, language_name
from engine.text.types import Segment, Word
from engine.text.word_split import display_spans, split_words


def aligner_supports(language: str | None) -> bool:
    try:
        name = language_name(language)
    except ValueError:
        return False
    return name is None or name in ALIGNER_LANGUAGES


@dataclass(eq=False)
class PendingAlignment:
    """An aligner request with the words it times: what ``submit_alignment`` gives and
    ``words_from_alignment`` takes. ``finished`` turns True when the aligner pushes the request's
    last output (``take``); ``error``, ``result`` and ``cancel()`` are the request's."""

    request: object          # the aligner's request (engine.serving.request.Request)
    words: list[str]         # the words, in order, as the aligner got them
    answered: bool = False   # the aligner pushed the request's finished output

    def take(self, output) -> None:
        """The aligner's push (an engine.serving.request.RequestOutput) for this request."""
        if output.finished:
            self.answered = True

    @property
    def finished(self) -> bool:
        return self.answered

    @property
    def error(self) -> str | None:
        return self.request.error

    @property
    def result(self):
        return self.request.result

    def cancel(self) -> None:
        self.request.cancel()


def submit_alignment(aligner, samples: np.ndarray, segment: Segment,
                     problems: list[str] | None = None) -> PendingAlignment | None:
    """Queue an alignment request for a segment's text, or None when it cannot be aligned.

    A failure to build the request is added to ``problems`` (when given) and the segment
    keeps its text and times: word timestamps never cost a transcript."""
    if samples is None or not aligner_supports(segment.language):
        return None
    try:
        words = split_words(segment.text, segment.language if segment.language in ALIGNER_LANGUAGES else None)
    except ImportError:   # Japanese/Korean word splitters are optional; words_note names the package
        return None
    if not words:
        return None
    pending = PendingAlignment(None, words)
    try:
        pending.request = aligner.submit(samples, words, pending.take)
    except Exception as exc:
        if problems is None:
            raise
        problems.append(_problem(segment, exc))
        return None
    return pending


def words_from_alignment(aligner, request: PendingAlignment, segment: Segment, problems: list[str] | None = None) -> list[Word]:
    """Words in file time, their text as written in the segment (punctuation kept).

    A failed alignment (the request's error, or times that do not match the words) gives no
    words and, when ``problems`` is given, a line saying why; the segment keeps its times."""
    if problems is None:
        return _aligned_words(aligner, request, segment)
    try:
        if request.error:
            raise RuntimeError(request.error)
        return _aligned_words(aligner, request, segment)
    except Exception as exc:
        problems.append(_problem(segment, exc))
        return []


def _problem(segment: Segment, exc: Exception) -> str:
    return f"{segment.start:.1f}-{segment.end:.1f} s: {exc}"


def _aligned_words(aligner, request, segment: Segment) -> list[Word]:
    ms = aligner.times(request.request)
    pieces = display_spans(segment.text, request.words)
    if len(ms) < 2 * len(pieces):
        raise ValueError(f"the aligner gave {len(ms)} timestamps for {len(pieces)} words "
                         f"(expected {2 * len(pieces)})")
    out = []
    for i, piece in enumerate(pieces):
        start = min(segment.end, segment.start + ms[2 * i] / 1000.0)
        end = min(segment.end, max(start, segment.start + ms[2 * i + 1] / 1000.0))
        out.append(Word(piece, round(start, 3), round(end, 3)))
    return out


def words_note(aligner, segments: list[Segment], problems: list[str] | None = None) -> str:
    """Why some words carry no timestamps, in words a user understands; empty when all do.
    ``aligner``: the loaded forced aligner, or None."""
    if problems:
        return (f"Word timestamps failed for {len(problems)} of {len(segments)} segments, which keep their "
                f"segment times: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    if aligner is None:
        return "No aligner model is configured, so words have no timestamps (segments keep their times)."
    unsupported = sorted({s.language for s in segments if s.language and not aligner_supports(s.language)})
    if unsupported:
        return (f"Word timestamps are not available for {', '.join(unsupported)}: the aligner supports "
                f"{', '.join(sorted(ALIGNER_LANGUAGES))}.")
    missing = {_splitter_missing(s.language) for s in segments if s.language and not s.words}
    return " ".join(sorted(m for m in missing if m))


def _splitter_missing(language: str) -> str:
    """Why words of ``language`` cannot be split (an optional package is missing), or ''."""
    try:
        split_words("a", language)
    except ImportError as e:
        return f"{e}."
    except ValueError:
        pass
    return ""
