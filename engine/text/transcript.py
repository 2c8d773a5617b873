"""Assembling a Transcript from the segments of a file."""
from __future__ import annotations

from collections import Counter

from engine.text.types import Segment, Transcript


def make_transcript(segments: list[Segment], duration: float, model: str, words_note: str = "") -> Transcript:
    languages = Counter(s.language for s in segments if s.language)
    return Transcript(
        text=" ".join(s.text for s in segments).strip(),
        language=languages.most_common(1)[0][0] if languages else None,
        duration=duration, segments=segments, model=model, words_note=words_note,
    )
