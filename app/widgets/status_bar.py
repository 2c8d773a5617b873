"""A status bar whose messages end in "…" at a word boundary, with the whole text in the tooltip.

Qt's own bar clipped a long message wherever the space ended ("…(version 2, 2024-0"), with
no way to read the rest. Here a message is shortened to the room left beside the permanent
labels, at the last whole word, and shortened again when the window is resized.
"""
from __future__ import annotations

from PySide6.QtWidgets import QStatusBar

ELLIPSIS = "…"


def elide_words(text: str, fits) -> str:
    """``text`` whole when ``fits(text)``, else its longest run of whole words + "…" that fits
    (a single over-long word is cut inside it: there is no word boundary to use)."""
    if fits(text):
        return text
    words = text.split(" ")
    for count in range(len(words) - 1, 0, -1):
        candidate = " ".join(words[:count]).rstrip(" ,;:·-–") + ELLIPSIS
        if fits(candidate):
            return candidate
    for end in range(len(text) - 1, 0, -1):
        if fits(text[:end] + ELLIPSIS):
            return text[:end] + ELLIPSIS
    return ELLIPSIS


class ElidingStatusBar(QStatusBar):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._full = ""
        self._until = 0.0          # monotonic time the message goes away (0: stays)
        self._permanent = []
        self.messageChanged.connect(lambda text: None if text else self.setToolTip(""))

    def addPermanentWidget(self, widget, stretch: int = 0) -> None:  # noqa: N802
        self._permanent.append(widget)
        super().addPermanentWidget(widget, stretch)

    def full_message(self) -> str:
        """The whole text of the message shown now ("" when none)."""
        return self._full if self.currentMessage() else ""

    def showMessage(self, text: str, timeout: int = 0) -> None:  # noqa: N802 (Qt's name)
        import time

        self._full = text or ""
        self._until = time.monotonic() + timeout / 1000.0 if timeout else 0.0
        self._show(timeout)

    def _show(self, timeout: int) -> None:
        metrics = self.fontMetrics()
        room = max(40, self.width() - sum(w.width() for w in self._permanent if w.isVisible()) - 24)
        shown = elide_words(self._full, lambda t: metrics.horizontalAdvance(t) <= room)
        self.setToolTip(self._full if shown != self._full else "")
        super().showMessage(shown, timeout)

    def resizeEvent(self, event):  # noqa: N802
        import time

        super().resizeEvent(event)
        if self.currentMessage() and self._full:
            left = int((self._until - time.monotonic()) * 1000) if self._until else 0
            if not self._until or left > 0:
                self._show(max(left, 0))
