"""A message strip above the panels, until the user closes it or it times out.

For news a user must be able to read at leisure ("12 files skipped: …", "3 unfinished files were
resumed", "Exported 4 files" with an "Open folder" button): the status bar's messages are replaced
by the next one within a second while a queue runs.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QToolButton


class NoticeBar(QFrame):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("noticeBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        # As tall as its text, never more: the panels below take the rest of the window.
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.setStyleSheet("#noticeBar { background-color: palette(alternate-base);"
                           " border: 1px solid palette(mid); border-radius: 4px; }")
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action_button = QPushButton("")
        self.action_button.hide()
        self.action_button.clicked.connect(self._act)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action_button)
        layout.addWidget(self.close_button)
        self._callback = None
        # Notices go away by themselves after a while (longer for longer texts), but not
        # while the pointer is on them: someone is reading or about to press the button.
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self.dismiss)
        self.hide()

    def show_notice(self, text: str, action: str = "", callback=None,
                    timeout_ms: int | None = None) -> None:
        """Show ``text`` (replacing any notice) with an optional button ``action``; it goes
        after ``timeout_ms`` (default: 12 s plus 1 s per 20 characters; 0: stays)."""
        self.label.setText(text)
        self._callback = callback
        self.action_button.setText(action)
        self.action_button.setVisible(bool(action and callback))
        self.show()
        if timeout_ms is None:
            timeout_ms = min(60_000, 12_000 + 50 * len(text))
        self._timer.stop()
        if timeout_ms:
            self._timer.start(timeout_ms)

    def enterEvent(self, event):  # noqa: N802
        self._paused = self._timer.remainingTime() if self._timer.isActive() else -1
        self._timer.stop()
        super().enterEvent(event)

    def leaveEvent(self, event):  # noqa: N802
        if getattr(self, "_paused", -1) >= 0 and self.isVisible():
            self._timer.start(max(3000, self._paused))
        super().leaveEvent(event)

    def text(self) -> str:
        return self.label.text() if self.isVisible() or not self.isHidden() else ""

    def dismiss(self) -> None:
        self.label.setText("")
        self._callback = None
        self.hide()

    def _act(self):
        if self._callback is not None:
            self._callback()
