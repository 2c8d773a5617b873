"""The file queue as a Qt table model: one row per file, in processing order.

States, as the engine reports them: "waiting" (in the engine's queue, not started by its
admission: language, context, speakers and order can still change), "running", "done",
"failed", "cancelled". The controller (queue_controller.py) hands every queued file to the
engine at once; the engine decides which start.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal

from app.transcript.speaker_setup import speaker_choice, speaker_choice_text
from app.widgets.theme import state_color

COL_NAME, COL_DURATION, COL_LANGUAGE, COL_CONTEXT, COL_STATUS, COL_PROGRESS, COL_SPEAKERS = range(7)
# Speakers is the last column here (the view shows it after Language), so older column numbers hold.
HEADERS = ("File", "Length", "Language", "Context", "Status", "Progress", "Speakers")
IN_FLIGHT = ("waiting", "running")        # held by the engine, not finished
FINISHED = ("done", "failed", "cancelled")
EDITABLE_STATES = ("waiting", "failed", "cancelled")
# A finished file's language or speaker count can change too: that transcribes it again with it.
LANGUAGE_STATES = EDITABLE_STATES + ("done",)
STATUS_TEXT = {"waiting": "Waiting", "running": "Transcribing",
               "done": "Done", "failed": "Failed", "cancelled": "Cancelled"}
ItemRole = Qt.ItemDataRole.UserRole + 1


@dataclass
class QueueItem:
    job_id: int
    path: str
    language: str | None = None
    context: str = ""
    speakers: str | None = None   # "off", "auto" or a count; None: the worker's Settings default
    state: str = "waiting"
    duration: float | None = None
    progress: float = 0.0
    eta: float = -1.0
    error: str | None = None
    transcript: object = None  # engine.text.types.Transcript once done

    @property
    def name(self) -> str:
        return Path(self.path).name


def has_speech(transcript) -> bool:
    """False for a finished transcript with no words in it (silence, music, noise)."""
    return transcript is None or bool((getattr(transcript, "text", "") or "").strip())


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return ""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class QueueModel(QAbstractTableModel):
    options_edited = Signal(int, object, str)  # job id, language (None = detect), context
    speakers_chosen = Signal(int, str)         # job id, "off", "auto" or a count

    def __init__(self, parent=None):
        super().__init__(parent)
        self.items: list[QueueItem] = []
        # Said instead of "Starting…" while no model is there to start files with.
        self.wait_text = ""

    def set_wait_text(self, text: str) -> None:
        if text != self.wait_text:
            self.wait_text = text
            if self.items:
                self.dataChanged.emit(self.index(0, 0), self.index(len(self.items) - 1, len(HEADERS) - 1))

    # -- Qt model API ----------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self.items)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return HEADERS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        item, col = self.items[index.row()], index.column()
        if role == ItemRole:
            return item
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(item, col)
        if role == Qt.ItemDataRole.EditRole:
            if col == COL_LANGUAGE:
                return item.language or ""
            if col == COL_CONTEXT:
                return item.context
            if col == COL_SPEAKERS:
                return item.speakers or "off"
        if role == Qt.ItemDataRole.ForegroundRole and col == COL_STATUS:
            return state_color(item.state)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_NAME:
                return item.path
            if item.error:
                return item.error
            if col in (COL_LANGUAGE, COL_CONTEXT, COL_SPEAKERS) and item.state in EDITABLE_STATES:
                return "Double-click to change before the file starts"
            if col == COL_LANGUAGE and item.state == "done":
                return "Double-click to transcribe again in another language"
            if col == COL_SPEAKERS and item.state == "done":
                return "Double-click to transcribe again with another number of speakers"
        return None

    def _display(self, item: QueueItem, col: int):
        if col == COL_NAME:
            return item.name
        if col == COL_DURATION:
            return format_duration(item.duration)
        if col == COL_LANGUAGE:
            detected = getattr(item.transcript, "language", None)
            return item.language or (f"{detected} (auto)" if detected else "Auto")
        if col == COL_CONTEXT:
            return item.context
        if col == COL_SPEAKERS:
            return speaker_choice_text(item.speakers) if item.speakers else "Default"
        if col == COL_STATUS:
            if item.state == "done" and not has_speech(item.transcript):
                return "No speech"
            return STATUS_TEXT.get(item.state, item.state)
        if col == COL_PROGRESS:
            return f"{item.progress * 100:.0f}%"
        return None

    def flags(self, index):
        base = super().flags(index)
        item = self.items[index.row()] if index.isValid() else None
        if item and index.column() in (COL_LANGUAGE, COL_CONTEXT, COL_SPEAKERS) and item.state in EDITABLE_STATES:
            return base | Qt.ItemFlag.ItemIsEditable
        if item and index.column() in (COL_LANGUAGE, COL_SPEAKERS) and item.state in LANGUAGE_STATES:
            return base | Qt.ItemFlag.ItemIsEditable
        return base

    def setData(self, index, value, role=Qt.ItemDataRole.EditRole):
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        item = self.items[index.row()]
        allowed = LANGUAGE_STATES if index.column() in (COL_LANGUAGE, COL_SPEAKERS) else EDITABLE_STATES
        if item.state not in allowed:
            return False
        if index.column() == COL_LANGUAGE:
            if item.state == "done" and (str(value) or None) == item.language:
                return False   # the same language: nothing to do again
            item.language = str(value) or None
        elif index.column() == COL_CONTEXT:
            item.context = str(value)
        elif index.column() == COL_SPEAKERS:
            choice = speaker_choice(value)             # ValueError for a bad value: a caller's bug
            if item.state == "done" and choice == (item.speakers or "off"):
                return False   # the same count: nothing to do again
            item.speakers = choice
            self._row_changed(index.row())
            self.speakers_chosen.emit(item.job_id, item.speakers)
            return True
        else:
            return False
        self._row_changed(index.row())
        self.options_edited.emit(item.job_id, item.language, item.context)
        return True

    # -- queue operations ----------------------------------------------------------------
    def add(self, item: QueueItem) -> None:
        row = len(self.items)
        self.beginInsertRows(QModelIndex(), row, row)
        self.items.append(item)
        self.endInsertRows()

    def remove(self, job_id: int) -> QueueItem | None:
        row = self.row_of(job_id)
        if row < 0:
            return None
        self.beginRemoveRows(QModelIndex(), row, row)
        item = self.items.pop(row)
        self.endRemoveRows()
        return item

    def move(self, job_id: int, delta: int) -> bool:
        """Move a row up (-1) or down (+1); only waiting rows move, and only past waiting rows."""
        row = self.row_of(job_id)
        target = row + delta
        if row < 0 or not 0 <= target < len(self.items):
            return False
        if self.items[row].state != "waiting" or self.items[target].state != "waiting":
            return False
        dest = target + 1 if delta > 0 else target  # Qt's "insert before" convention
        self.beginMoveRows(QModelIndex(), row, row, QModelIndex(), dest)
        self.items.insert(target, self.items.pop(row))
        self.endMoveRows()
        return True

    def item(self, job_id: int) -> QueueItem | None:
        row = self.row_of(job_id)
        return self.items[row] if row >= 0 else None

    def row_of(self, job_id: int) -> int:
        for row, item in enumerate(self.items):
            if item.job_id == job_id:
                return row
        return -1

    def update(self, job_id: int, **changes) -> QueueItem | None:
        row = self.row_of(job_id)
        if row < 0:
            return None
        item = self.items[row]
        for name, value in changes.items():
            setattr(item, name, value)
        self._row_changed(row)
        return item

    def count(self, *states: str) -> int:
        return sum(1 for item in self.items if item.state in states)

    def _row_changed(self, row: int):
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(HEADERS) - 1))
