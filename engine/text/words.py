"""Word timestamps for transcript segments: aligner requests in, Words out, or a note saying why not."""
from __future__ import annotations

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


def submit_alignment(aligner, samples: np.ndarray, segment: Segment):
    """Queue an alignment request for a segment's text, or None when it cannot be aligned."""
    if samples is None or not aligner_supports(segment.language):
        return None
    try:
        words = split_words(segment.text, segment.language if segment.language in ALIGNER_LANGUAGES else None)
    except ImportError:   # Japanese/Korean word splitters are optional; words_note names the package
        return None
    if not words:
        return None
    request = aligner.submit(samples, words)
    request.words = words
    return request


def words_from_alignment(aligner, request, segment: Segment) -> list[Word]:
    """Words in file time, their text as written in the segment (punctuation kept)."""
    ms = aligner.times(request)
    pieces = display_spans(segment.text, request.words)
    out = []
    for i, piece in enumerate(pieces):
        start = min(segment.end, segment.start + ms[2 * i] / 1000.0)
        end = min(segment.end, max(start, segment.start + ms[2 * i + 1] / 1000.0))
        out.append(Word(piece, round(start, 3), round(end, 3)))
    return out


def words_note(engine, segments: list[Segment]) -> str:
    """Why some words carry no timestamps, in words a user understands; empty when all do."""
    if engine.aligner is None:
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
