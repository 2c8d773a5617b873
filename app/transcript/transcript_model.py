"""One transcript's segments as a Qt table: time and text, with word positions.

Knows which word is playing (``set_playhead``) and what the search box
matches, so the delegate can paint both. Edits go out as ``segment_edited``;
the main window stores them in the history at once.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal

from app.transcript.transcript_notes import ALIGNED_TIP, ESTIMATED_MARK, ESTIMATED_TIP, is_estimated
from app.transcript.speaker_cells import set_speaker_by_name, speaker_data
from engine.text.speakers import display_name

COL_TIME, COL_TEXT = 0, 1
COL_SPEAKER = 2   # shown between time and text (the view moves it); hidden without speakers
WordSpansRole = Qt.ItemDataRole.UserRole + 10
PlayingWordRole = Qt.ItemDataRole.UserRole + 11   # word index playing in this row, -1 none, -2 whole row
SearchRole = Qt.ItemDataRole.UserRole + 12


@dataclass(frozen=True)
class WordSpan:
    start: int   # character offsets in the segment text
    end: int
    index: int   # index into Segment.words


def word_spans(text: str, words) -> list[WordSpan]:
    """Where each word sits in ``text``, searched left to right; words not found are left out."""
    spans, cursor, lowered = [], 0, text.lower()
    for index, word in enumerate(words):
        needle = word.text.strip()
        if not needle:
            continue
        at = text.find(needle, cursor)
        if at < 0:
            at = lowered.find(needle.lower(), cursor)
        if at < 0:
            continue
        spans.append(WordSpan(at, at + len(needle), index))
        cursor = at + len(needle)
    return spans


def format_time(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(int(minutes), 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:04.1f}"
    return f"{minutes:02d}:{secs:04.1f}"


def clock(seconds: float) -> str:
    """Whole seconds as a reader writes them: 0:07, 12:34, 1:02:03."""
    seconds = int(max(0.0, float(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_span(start: float, end: float) -> str:
    """A segment's time cell on one line, ``0:07–0:11``: stacked start over end, each row's end
    sat above the same time starting the next row and the column read as duplicates."""
    return f"{clock(start)}–{clock(end)}"


class TranscriptModel(QAbstractTableModel):
    segment_edited = Signal(int, int, str)  # file id, segment index, new text
    speakers_edited = Signal(int)           # file id: a segment's speaker changed

    def __init__(self, parent=None):
        super().__init__(parent)
        self.file_id: int | None = None
        self.transcript = None
        self._spans: dict[int, list[WordSpan]] = {}
        self.playing: tuple[int, int] = (-1, -1)  # (row, word index)
        self.search = ""

    def set_transcript(self, file_id: int | None, transcript) -> None:
        self.beginResetModel()
        self.file_id = file_id
        # A private copy: edits here must not change the object the queue holds until saved.
        self.transcript = copy.deepcopy(transcript) if transcript is not None else None
        self._spans.clear()
        self.playing = (-1, -1)
        self.endResetModel()

    @property
    def segments(self):
        return self.transcript.segments if self.transcript is not None else []

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self.segments)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else 3

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return ("Time", "Text", "Speaker")[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, seg = index.row(), self.segments[index.row()]
        if index.column() == COL_SPEAKER:
            return speaker_data(self.transcript, seg, role)
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            if index.column() != COL_TIME:
                return seg.text
            mark = ESTIMATED_MARK if is_estimated(seg) else ""   # "~0:07–0:11": an estimate
            return mark + format_span(seg.start, seg.end)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() == COL_TIME:
            return int(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        if role == Qt.ItemDataRole.ToolTipRole and index.column() == COL_TIME:
            times = f"{format_time(seg.start)} to {format_time(seg.end)}. "
            return times + (ESTIMATED_TIP if is_estimated(seg) else ALIGNED_TIP)
        if role == WordSpansRole:
            return self.spans(row)
        if role == PlayingWordRole:
            return self.playing[1] if self.playing[0] == row else -1
        if role == SearchRole:
            return self.search
        return None

    def flags(self, index):
        flags = super().flags(index)
        # No file id: a running file's lines so far, with no stored transcript to save to.
        if index.isValid() and index.column() in (COL_TEXT, COL_SPEAKER) and self.file_id is not None:
            flags |= Qt.ItemFlag.ItemIsEditable
        return flags

    def setData(self, index, value, role=Qt.ItemDataRole.EditRole):
        if role == Qt.ItemDataRole.EditRole and index.column() == COL_SPEAKER:
            if not set_speaker_by_name(self.transcript, index.row(), str(value)):
                return False
            self.dataChanged.emit(index, index)
            if self.file_id is not None:
                self.speakers_edited.emit(self.file_id)
            return True
        if role != Qt.ItemDataRole.EditRole or index.column() != COL_TEXT:
            return False
        text = str(value).strip()
        seg = self.segments[index.row()]
        if text == seg.text:
            return False
        seg.text = text
        self._spans.pop(index.row(), None)
        self.dataChanged.emit(index, index)
        if self.file_id is not None:
            self.segment_edited.emit(self.file_id, index.row(), text)
        return True

    def replace_segment(self, row: int, segment) -> None:
        """Take the stored version of an edited segment (its words may have changed)."""
        if 0 <= row < self.rowCount():
            self.transcript.segments[row] = copy.deepcopy(segment)
            self._spans.pop(row, None)
            self.dataChanged.emit(self.index(row, 0), self.index(row, 2))

    def refresh(self) -> None:
        """Repaint every row (speakers renamed or merged in the transcript shown)."""
        if self.rowCount():
            self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, 2))

    def spans(self, row: int) -> list[WordSpan]:
        if row not in self._spans:
            seg = self.segments[row]
            self._spans[row] = word_spans(seg.text, seg.words)
        return self._spans[row]

    # -- playback and search -----------------------------------------------------------
    def locate(self, seconds: float) -> tuple[int, int]:
        """(row, word index) at ``seconds``; word -2 when the row has no timed word there."""
        for row, seg in enumerate(self.segments):
            if seg.start <= seconds < seg.end or (row == len(self.segments) - 1 and seconds >= seg.start
                                                  and seconds <= seg.end + 0.25):
                for word_index, word in enumerate(seg.words):
                    if word.start <= seconds < max(word.end, word.start + 0.05):
                        return row, word_index
                return row, -2
        return -1, -1

    def set_playhead(self, seconds: float | None) -> int:
        """Highlight what plays at ``seconds`` (None clears); returns the playing row."""
        new = (-1, -1) if seconds is None else self.locate(seconds)
        if new != self.playing:
            old_row, self.playing = self.playing[0], new
            for row in {old_row, new[0]} - {-1}:
                if row < self.rowCount():
                    self.dataChanged.emit(self.index(row, 0), self.index(row, 1))
        return new[0]

    def set_search(self, text: str) -> list[int]:
        """Rows whose text contains ``text`` (case-insensitive); repaints the matches."""
        self.search = text.strip()
        if self.rowCount():
            self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, 1))
        return self.matching_rows()

    def match_count(self) -> int:
        """How many times the search text occurs (case-insensitive), over all segments."""
        if not self.search:
            return 0
        needle = self.search.lower()
        return sum(seg.text.lower().count(needle)
                   + bool(seg.speaker and needle in display_name(self.transcript, seg.speaker).lower())
                   for seg in self.segments)

    def occurrences(self) -> list[tuple[int, int]]:
        """(row, character offset) of every occurrence of the search text, in reading order."""
        if not self.search:
            return []
        needle, out = self.search.lower(), []
        for row, seg in enumerate(self.segments):
            text, at = seg.text.lower(), 0
            while (at := text.find(needle, at)) >= 0:
                out.append((row, at))
                at += len(needle)
        return out

    def matching_rows(self) -> list[int]:
        if not self.search:
            return []
        needle = self.search.lower()
        return [row for row, seg in enumerate(self.segments) if needle in seg.text.lower()
                or (seg.speaker and needle in display_name(self.transcript, seg.speaker).lower())]
