"""Sentence-level segments: a chunk's text cut at sentence ends, each piece with its own times.

The model transcribes chunks of up to 30 s; readers want a row per sentence. With word
times, a sentence runs from its first word's start to its last word's end and keeps its
words. Without them, the chunk's time is shared out by character count; file jobs place
sentences on the VAD's speech instead (engine.text.placement) before they get here.
"""
from __future__ import annotations

from engine.text.joining import CLOSERS, SENTENCE_END
from engine.text.types import Segment, Word

_CJK_END = frozenset("。！？")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character ranges of the sentences in ``text``, whitespace trimmed.

    A sentence ends at end punctuation (with any closing quotes or brackets after it)
    followed by a space or the end of the text ("3.5" and "e.g.x" do not end one);
    CJK full stops need no space."""
    cuts, i, n = [0], 0, len(text)
    while i < n:
        if text[i] in SENTENCE_END:
            j = i + 1
            while j < n and (text[j] in SENTENCE_END or text[j] in CLOSERS):
                j += 1
            if j == n or text[j].isspace() or text[i] in _CJK_END:
                cuts.append(j)
            i = j
        else:
            i += 1
    cuts.append(n)
    spans = []
    for a, b in zip(cuts, cuts[1:]):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            spans.append((a, b))
    return spans


def word_positions(text: str, words: list[Word]) -> list[int] | None:
    """Where each word's text starts in ``text`` (in order), or None if they don't line up."""
    positions, pos = [], 0
    for word in words:
        found = text.find(word.text, pos) if word.text else pos
        if found < 0:
            return None
        positions.append(found)
        pos = found + len(word.text)
    return positions


def split_into_sentences(segment: Segment) -> list[Segment]:
    """``segment`` as one Segment per sentence (itself when it holds one sentence)."""
    spans = sentence_spans(segment.text)
    if len(spans) <= 1:
        return [segment]
    if segment.words:
        return _split_timed(segment, spans)
    return _split_untimed(segment, spans)


def _split_timed(segment: Segment, spans: list[tuple[int, int]]) -> list[Segment]:
    positions = word_positions(segment.text, segment.words)
    if positions is None:
        return [segment]
    out = []
    for a, b in spans:
        words = [w for w, p in zip(segment.words, positions) if a <= p < b]
        if not words:          # punctuation only, or words the aligner skipped: join the previous
            if out:
                out[-1].text = f"{out[-1].text} {segment.text[a:b]}"
                continue
            words = []
        start = words[0].start if words else segment.start
        end = words[-1].end if words else start
        out.append(Segment(start=start, end=max(start, end), text=segment.text[a:b], words=words,
                           language=segment.language, timing=segment.timing,
                           speaker=segment.speaker))
    return out


def _split_untimed(segment: Segment, spans: list[tuple[int, int]]) -> list[Segment]:
    total = sum(b - a for a, b in spans)
    length = segment.end - segment.start
    out, t = [], segment.start
    for a, b in spans:
        end = t + length * (b - a) / total
        out.append(Segment(start=round(t, 3), end=round(end, 3), text=segment.text[a:b],
                           language=segment.language, timing=segment.timing,
                           speaker=segment.speaker))
        t = end
    out[-1].end = segment.end
    return out
