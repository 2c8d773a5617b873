"""Splitting text into the words the forced aligner times, per language.

Space-delimited scripts give whole words, CJK ideographs one by one, punctuation
dropped; Japanese and Korean use nagisa and soynlp where installed.
"""
from __future__ import annotations

import unicodedata

from engine.text.prompt import language_name

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def is_kept(char: str) -> bool:
    """Letters, numbers, apostrophes and CJK survive; everything else is dropped."""
    if char == "'":
        return True
    category = unicodedata.category(char)
    return category[0] in "LN" or is_cjk(char)


def _clean(tokens) -> list[str]:
    return [c for t in tokens if (c := "".join(ch for ch in t if is_kept(ch)))]


def split_words(text: str, language: str | None = None) -> list[str]:
    text = text.strip()
    name = language_name(language) if language else None
    if name == "Japanese":
        try:
            import nagisa
        except ImportError as e:
            raise ImportError("Japanese word timestamps need the nagisa package: pip install nagisa") from e
        return _clean(nagisa.tagging(text).words)
    if name == "Korean":
        try:
            from soynlp.tokenizer import LTokenizer
        except ImportError as e:
            raise ImportError("Korean word timestamps need the soynlp package: pip install soynlp") from e
        return _clean(LTokenizer().tokenize(text))
    words, buf = [], []
    for ch in text:
        if is_cjk(ch) or ch.isspace():
            if buf:
                words.append("".join(buf))
                buf = []
            if is_cjk(ch):
                words.append(ch)
        elif is_kept(ch):
            buf.append(ch)
    if buf:
        words.append("".join(buf))
    return words


def display_spans(text: str, words: list[str]) -> list[str]:
    """The piece of ``text`` each aligned word stands for, punctuation included, so that
    the pieces joined (with spaces between space-delimited words) give back the text."""
    if not words:
        return []
    starts, stops, pos = [], [], 0
    for word in words:
        first = None
        for ch in word:
            while pos < len(text) and text[pos] != ch:
                pos += 1
            if first is None:
                first = pos
            pos = min(pos + 1, len(text))
        starts.append(min(first if first is not None else pos, len(text)))
        stops.append(pos)
    # Cut between two words at the last space between them, so punctuation stays with the
    # word it touches ("foo ,bar" -> "foo", ",bar"); with no space (CJK), at the next word.
    cuts = [0]
    for stop, start in zip(stops, starts[1:]):
        gap = text[stop:start]
        spaces = [i for i, ch in enumerate(gap) if ch.isspace()]
        cuts.append(stop + spaces[-1] if spaces else start)
    cuts.append(len(text))
    return [text[a:b].strip() for a, b in zip(cuts, cuts[1:])]
