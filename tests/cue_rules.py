"""The subtitle cue rules a user notices, counted over a list of cues (tests and tests/bench)."""
from __future__ import annotations

from collections import Counter


def _has_word(text: str) -> bool:
    return any(c.isalnum() for c in text)


def cue_rule_breaks(cues, min_duration: float = 1.0, min_gap: float = 0.08, max_gap: float = 1.5,
                    max_chars: int = 84, max_duration: float = 7.0, duration: float | None = None) -> Counter:
    """How many cues break each rule.

    punctuation: a cue with no letter or digit. orphan: a one-word cue that could have joined a
    neighbour (within ``max_gap``, the two fitting ``max_chars`` and ``max_duration``). short: a cue
    under ``min_duration`` although the silence after it had room to keep it on screen that long;
    short_no_room: under ``min_duration`` with no room after it (allowed only when its speech is that
    short: counted apart so a table can show both)."""
    out: Counter = Counter()
    for i, cue in enumerate(cues):
        text = " ".join(cue.lines)
        if not _has_word(text):
            out["punctuation"] += 1
        if len(text.split()) == 1:
            for j in (i - 1, i + 1):
                if 0 <= j < len(cues):
                    other = cues[j]
                    a, b = (other, cue) if j < i else (cue, other)
                    if b.start - a.end <= max_gap and len(" ".join(other.lines)) + 1 + len(text) <= max_chars \
                            and b.end - a.start <= max_duration:
                        out["orphan"] += 1
                        break
        if cue.end - cue.start < min_duration - 1e-3:
            limit = cues[i + 1].start - min_gap if i + 1 < len(cues) else (duration or cue.end)
            out["short" if limit - cue.start >= min_duration - 1e-3 else "short_no_room"] += 1
    return out
