"""A one-line label that shortens its text with "…" to the width it gets, never asking for more.

A plain QLabel's minimum width is its whole text: one 172-character file name made the main
window 2225 px wide. This label's minimum is a few characters; the full text is in its tooltip.
"""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QStyle, QStyleOption


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent=None, mode=Qt.TextElideMode.ElideMiddle):
        super().__init__(parent)
        self._full = ""
        self._mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        self._full = text or ""
        super().setText(self._full)
        self._update_tooltip()
        self.updateGeometry()
        self.update()

    def _update_tooltip(self) -> None:
        # The full text whenever the label cannot show it all (and for long texts anyway).
        cut = self.isVisible() and self.elided_text() != self._full
        self.setToolTip(self._full if cut or len(self._full) > 40 else "")

    def resizeEvent(self, event):  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._update_tooltip()

    def full_text(self) -> str:
        return self._full

    def elided_text(self) -> str:
        width = max(0, self.contentsRect().width())
        return self.fontMetrics().elidedText(self._full, self._mode, width)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        metrics = self.fontMetrics()
        return QSize(metrics.horizontalAdvance("M…M"), super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:  # noqa: N802
        hint = super().sizeHint()
        return QSize(min(hint.width(), 400), hint.height())

    def paintEvent(self, event):  # noqa: N802
        painter = QPainter(self)
        option = QStyleOption()
        option.initFrom(self)
        self.style().drawPrimitive(QStyle.PrimitiveElement.PE_Widget, option, painter, self)
        rect = self.contentsRect()
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(self.alignment().value), self.elided_text())
