"""The versions of one transcript: read any of them, make one current again."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
)

from app.transcript.transcript_model import format_time
from app.transcript.transcript_notes import ESTIMATED_MARK, is_estimated
from app.history.transcript_versions import describe_version

VersionIdRole = Qt.ItemDataRole.UserRole + 30


def version_text(transcript) -> str:
    """A version as the user reads it: each segment's start time and text."""
    lines = [f"[{ESTIMATED_MARK if is_estimated(s) else ''}{format_time(s.start)}] {s.text}"
             for s in transcript.segments if s.text.strip()]
    return "\n".join(lines) or (transcript.text or "")


class VersionsDialog(QDialog):
    """Lists the file's versions, newest first; "Restore" makes the selected one current (saved
    as a new version, so nothing is replaced)."""

    restored = Signal(int)   # file id: its current transcript changed

    def __init__(self, history, file_id: int, parent=None):
        super().__init__(parent)
        self.history, self.file_id = history, file_id
        record = history.get_file(file_id)
        name = Path(record.path).name if record else f"entry {file_id}"
        self.setWindowTitle(f"Versions of {name}")
        self.resize(760, 440)
        self.intro = QLabel("Every transcription and every saved edit of this transcript is kept. "
                            "Select one to read it; Restore makes it the current text again.")
        self.intro.setWordWrap(True)
        self.list = QListWidget()
        self.list.setObjectName("versionsList")
        self.preview = QPlainTextEdit()
        self.preview.setReadOnly(True)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.list)
        splitter.addWidget(self.preview)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        splitter.setSizes([260, 500])
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.restore_button = QPushButton("Restore this version")
        buttons.addButton(self.restore_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.restore_button.clicked.connect(self.restore_selected)
        layout = QVBoxLayout(self)
        layout.addWidget(self.intro)
        layout.addWidget(splitter, 1)
        layout.addWidget(buttons)
        self.list.currentItemChanged.connect(self._show)
        self.reload()

    def reload(self) -> None:
        self.list.clear()
        self._versions = {v.id: v for v in self.history.versions.list(self.file_id)}
        ordered = list(self._versions.values())
        for number, version in reversed(list(enumerate(ordered, 1))):
            label = describe_version(version, number)
            if number == len(ordered):
                first, rest = label.split("\n", 1)
                label = f"{first} (current)\n{rest}"
            item = QListWidgetItem(label)
            item.setData(VersionIdRole, version.id)
            self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)

    def _show(self, current, _previous=None):
        version = self._versions.get(current.data(VersionIdRole)) if current else None
        self.preview.setPlainText(version_text(version.transcript) if version else "")
        self.restore_button.setEnabled(version is not None and self.list.currentRow() > 0)

    def select_version(self, version_id: int) -> None:
        for row in range(self.list.count()):
            if self.list.item(row).data(VersionIdRole) == version_id:
                self.list.setCurrentRow(row)

    def restore_selected(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        self.history.restore_version(self.file_id, item.data(VersionIdRole))
        self.restored.emit(self.file_id)
        self.reload()
