"""A message strip above the panels that stays until the user closes it.

For news a user must be able to read at leisure ("12 files skipped: …", "3 unfinished files were
resumed", "Exported 4 files" with an "Open folder" button): the status bar's messages are replaced
by the next one within a second while a queue runs.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
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
        self.hide()

    def show_notice(self, text: str, action: str = "", callback=None) -> None:
        """Show ``text`` (replacing any notice) with an optional button ``action``."""
        self.label.setText(text)
        self._callback = callback
        self.action_button.setText(action)
        self.action_button.setVisible(bool(action and callback))
        self.show()

    def text(self) -> str:
        return self.label.text() if self.isVisible() or not self.isHidden() else ""

    def dismiss(self) -> None:
        self.label.setText("")
        self._callback = None
        self.hide()

    def _act(self):
        if self._callback is not None:
            self._callback()
