"""What a live stream keeps of its text: the start two updates agree on, and the committed tail
that every pass gets as context."""
from __future__ import annotations

import os

__all__ = ["stable_prefix", "RecentContext"]


def stable_prefix(previous: str, latest: str) -> str:
    """The start two consecutive updates agree on, cut back to a whole word where words have spaces."""
    n = len(os.path.commonprefix([previous, latest]))
    if n < len(previous) or n < len(latest):
        cut = latest.rfind(" ", 0, n + 1)   # the texts part inside a word: keep the words before it
        if cut >= 0:
            n = cut
    return latest[:n].rstrip()


class RecentContext:
    """A pass's context: the base context plus the last ``chars`` characters of committed text.
    Only as much committed text is kept as the context can use, not the whole session's."""

    def __init__(self, base: str, chars: int):
        self.base, self.chars = base, chars
        self._recent = ""

    def remember(self, text: str) -> None:
        keep = 2 * self.chars
        self._recent = (self._recent + " " + text).strip()[-keep:] if keep else ""

    def text(self) -> str:
        tail = self._recent[-self.chars:] if self.chars else ""
        if len(self._recent) > len(tail) and " " in tail:
            tail = tail[tail.index(" ") + 1:]   # don't start on half a word
        return "\n".join(part for part in (self.base, tail) if part)
