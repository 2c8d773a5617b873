"""Assembling a Transcript from the segments of a file."""
from __future__ import annotations

from collections import Counter

from engine.text.sentences import split_into_sentences
from engine.text.types import Segment, Transcript


def make_transcript(segments: list[Segment], duration: float, model: str, words_note: str = "") -> Transcript:
    """A file's Transcript from its chunk segments, one segment per sentence."""
    segments = [sentence for chunk in segments for sentence in split_into_sentences(chunk)]
    languages = Counter(s.language for s in segments if s.language)
    return Transcript(
        text=" ".join(s.text for s in segments).strip(),
        language=languages.most_common(1)[0][0] if languages else None,
        duration=duration, segments=segments, model=model, words_note=words_note,
    )
