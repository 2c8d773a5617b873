"""How words join into text: spaces (none around CJK), clean text, and break points.

Shared by the subtitle cues and the plain-text exports: ``glue`` puts a space
between two words unless the script is written without spaces or the next word
is punctuation; ``break_score`` says how good a line or cue break after a word is.
"""
from __future__ import annotations

import unicodedata

SENTENCE_END = frozenset(".!?。！？…‼⁇⁈⁉؟")
CLAUSE_END = frozenset(",;:，、；：—–")
CLOSERS = frozenset("\"'”’»)]}」』》）】")
PAUSE_BREAK = 0.5  # seconds of silence after a word that count as a clause break
_NO_SPACE_BEFORE = frozenset(",.!?;:)]}%…")
_CJK_RANGES = (
    (0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x3100, 0x312F),
    (0x31A0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
    (0xFF00, 0xFFEF), (0x20000, 0x3134F),
)
BREAK_SENTENCE, BREAK_CLAUSE, BREAK_PLAIN = 3, 2, 1


def is_cjk(ch: str) -> bool:
    """Whether ``ch`` belongs to a script written without spaces (Chinese, Japanese)."""
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def clean_text(text: str) -> str:
    """Collapse whitespace to single spaces and drop control and surrogate characters."""
    text = " ".join(str(text).split())
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cs"))


def glue(prev: str, text: str) -> str:
    """The separator between two adjacent words: a space, or nothing around CJK."""
    if not prev or not text:
        return ""
    if is_cjk(prev[-1]) or is_cjk(text[0]) or text[0] in _NO_SPACE_BEFORE:
        return ""
    return " "


def split_cjk(text: str) -> list[str]:
    """Split space-less text into one piece per CJK character.

    Punctuation sticks to the character before it, opening brackets to the
    one after, and runs of Latin letters or digits stay whole.
    """
    pieces: list[str] = []
    stick = False
    for ch in text:
        cat = unicodedata.category(ch)
        if stick or (pieces and cat.startswith("P") and cat not in ("Ps", "Pi")):
            pieces[-1] += ch
        elif pieces and not is_cjk(ch) and not is_cjk(pieces[-1][-1]):
            pieces[-1] += ch
        else:
            pieces.append(ch)
        stick = cat in ("Ps", "Pi")
    return pieces


def break_score(text: str) -> int:
    """How good a cue break after this word is: sentence end, clause end, or plain."""
    core = text.rstrip("".join(CLOSERS))
    if core and core[-1] in SENTENCE_END:
        return BREAK_SENTENCE
    if core and core[-1] in CLAUSE_END:
        return BREAK_CLAUSE
    return BREAK_PLAIN
