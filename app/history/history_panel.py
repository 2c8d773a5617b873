"""Past transcripts from the history database, newest first, with a filter box."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.queue.queue_model import format_duration

FileIdRole = Qt.ItemDataRole.UserRole + 20


class HistoryPanel(QWidget):
    transcript_selected = Signal(int)  # file id
    delete_requested = Signal(list)    # file ids (Delete key or the context menu)
    clear_requested = Signal()         # "Clear history…"
    versions_requested = Signal(int)   # file id

    def __init__(self, parent=None):
        super().__init__(parent)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter past transcripts")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        self.list = QListWidget()
        self.list.setObjectName("historyList")
        self.list.setAlternatingRowColors(True)
        # Long previews end in "…" instead of pushing in a sideways scroll bar.
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setWordWrap(False)
        self.list.currentItemChanged.connect(self._current_changed)
        # Several entries at once (Ctrl/Shift+click) for deleting; Delete asks, then deletes.
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        QShortcut(QKeySequence.StandardKey.Delete, self.list, activated=self.request_delete,
                  context=Qt.ShortcutContext.WidgetShortcut)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.filter)
        layout.addWidget(self.list, 1)
        self._texts: dict[int, str] = {}

    def set_records(self, records) -> None:
        """``records``: app.history.TranscriptRecord list, newest first."""
        self.list.clear()
        self._texts.clear()
        for record in records:
            self._append(record.file.id, record.file.path, record.file.finished_at,
                         record.transcript, record.edited, at_top=False)
        self._apply_filter(self.filter.text())

    def add(self, file_id: int, path: str, finished_at: float | None, transcript,
            edited: bool = False) -> None:
        self.remove(file_id)
        self._append(file_id, path, finished_at, transcript, edited, at_top=True)
        self._apply_filter(self.filter.text())

    def remove(self, file_id: int) -> None:
        for row in range(self.list.count()):
            if self.list.item(row).data(FileIdRole) == file_id:
                self.list.takeItem(row)
                return

    def selected_ids(self) -> list[int]:
        return [item.data(FileIdRole) for item in self.list.selectedItems() if not item.isHidden()]

    def select(self, file_id: int) -> None:
        for row in range(self.list.count()):
            if self.list.item(row).data(FileIdRole) == file_id:
                self.list.setCurrentRow(row)
                return

    def request_delete(self) -> None:
        ids = self.selected_ids()
        if ids:
            self.delete_requested.emit(ids)

    def context_actions(self, menu) -> list:
        """The context menu's entries (built on ``menu``) for the selected entries."""
        ids = self.selected_ids()
        out = []
        if len(ids) == 1:
            versions = menu.addAction("Versions…")
            versions.triggered.connect(lambda: self.versions_requested.emit(ids[0]))
            out.append(versions)
        if ids:
            delete = menu.addAction(f"Delete {'entry' if len(ids) == 1 else f'{len(ids)} entries'}…")
            delete.triggered.connect(self.request_delete)
            out.append(delete)
        if self.list.count():
            menu.addSeparator()
            clear = menu.addAction("Clear history…")
            clear.triggered.connect(self.clear_requested)
            out.append(clear)
        return out

    def _context_menu(self, pos):
        from PySide6.QtWidgets import QMenu

        menu = QMenu(self)
        if self.context_actions(menu):
            menu.exec(self.list.viewport().mapToGlobal(pos))

    def file_ids(self) -> list[int]:
        return [self.list.item(row).data(FileIdRole) for row in range(self.list.count())]

    def _append(self, file_id, path, finished_at, transcript, edited, at_top):
        when = _dt.datetime.fromtimestamp(finished_at).strftime("%Y-%m-%d %H:%M") if finished_at else ""
        preview = (transcript.text or "").strip().replace("\n", " ")
        preview = preview[:80] + ("…" if len(preview) > 80 else "")
        details = " · ".join(p for p in (when, format_duration(getattr(transcript, "duration", None)),
                                          preview) if p)
        item = QListWidgetItem(f"{Path(path).name}{'  (edited)' if edited else ''}\n{details}")
        item.setData(FileIdRole, file_id)
        item.setToolTip(path)
        self._texts[file_id] = f"{path} {transcript.text}".lower()
        if at_top:
            self.list.insertItem(0, item)
        else:
            self.list.addItem(item)

    def _apply_filter(self, text: str):
        needle = text.strip().lower()
        for row in range(self.list.count()):
            item = self.list.item(row)
            item.setHidden(bool(needle) and needle not in self._texts.get(item.data(FileIdRole), ""))

    def _current_changed(self, current, _previous):
        if current is not None:
            self.transcript_selected.emit(current.data(FileIdRole))
