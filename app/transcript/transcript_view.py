"""The selected file's transcript: segments with times, search, editing, playback."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSlider,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.widgets.elided_label import ElidedLabel
from app.transcript.player import Player
from app.queue.queue_model import format_duration
from app.transcript.search_bar import SearchBar
from app.transcript.transcript_delegate import SegmentTextDelegate
from app.transcript.speakers_panel import SpeakersPanel
from app.transcript.transcript_model import COL_SPEAKER, COL_TEXT, COL_TIME, TranscriptModel, format_time
from app.transcript.transcript_notes import audio_missing_reason, notes_text
from app.settings.view_prefs import SPEEDS, clamp_font, speed_text


class SegmentTable(QTableView):
    """Rows grow to fit wrapped text; heights are recomputed after a resize settles."""

    def __init__(self, model, parent=None):
        super().__init__(parent)
        self.setObjectName("transcriptView")
        self.setModel(model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                             | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setShowGrid(False)
        self.setWordWrap(True)
        self.verticalHeader().hide()
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        header = self.horizontalHeader()
        header.setSectionResizeMode(COL_TIME, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COL_TEXT, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(COL_SPEAKER, QHeaderView.ResizeMode.ResizeToContents)
        header.moveSection(COL_SPEAKER, 1)     # time, speaker, text
        self.text_delegate = SegmentTextDelegate(self)
        self.setItemDelegateForColumn(COL_TEXT, self.text_delegate)
        self._relayout = QTimer(self, singleShot=True, interval=60)
        self._relayout.timeout.connect(self.resizeRowsToContents)
        model.modelReset.connect(self._relayout.start)
        model.dataChanged.connect(lambda *a: self._relayout.start())

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._relayout.start()


NO_SELECTION = "Select a file in the queue or in History to see its transcript here."
NOT_YET = "The transcript appears here when the file is done."


NO_SPEECH = ("No speech found in this file. If there is speech, try another language in the "
             "queue's Language column, or a larger model.")


class TranscriptView(QWidget):
    segment_edited = Signal(int, int, str)  # file id, segment index, text
    rate_changed = Signal(float)            # playback speed chosen
    models_requested = Signal()             # the "Choose a model…" button
    speakers_edited = Signal(int)           # file id: speakers renamed, merged or reassigned

    def __init__(self, player: Player | None = None, parent=None):
        super().__init__(parent)
        self.model = TranscriptModel(self)
        self.model.segment_edited.connect(self.segment_edited)
        self.player = player or Player(self)
        self.source_path = ""
        self.title = ElidedLabel("Transcript")
        self.title.setObjectName("transcriptTitle")
        self.title.setStyleSheet("font-size: 13pt; font-weight: 600;")
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setStyleSheet("color: palette(placeholder-text);")
        self.models_button = QPushButton("Choose a model…")
        self.models_button.clicked.connect(self.models_requested)
        self.models_button.hide()
        self.search_bar = SearchBar()
        self.search = self.search_bar.field
        self.search.textChanged.connect(self._search)
        self.search.returnPressed.connect(self.next_match)
        self.search_bar.next_button.clicked.connect(self.next_match)
        self.search_bar.previous_button.clicked.connect(self.previous_match)
        self.match_label = self.search_bar.count_label   # "3 matches", beside or under the field
        self.play_button = QPushButton("Play")
        self.play_tip = "Play from the selected segment; click a word to play from it"
        self.play_button.setToolTip(self.play_tip)
        self.audio_missing = ""   # why there is nothing to play (an unrecorded live session)
        # The transcript's notes (e.g. a stretch whose word times could not be aligned) and
        # what the "~" of estimated times means: above the segments, where they are read.
        self.notes_label = QLabel("")
        self.notes_label.setObjectName("transcriptNotes")
        self.notes_label.setWordWrap(True)
        self.notes_label.setStyleSheet("background-color: rgba(253, 224, 71, 0.25); "
                                       "border: 1px solid rgba(202, 138, 4, 0.6); "
                                       "border-radius: 4px; padding: 4px 6px;")
        self.notes_label.hide()
        self.play_button.clicked.connect(self.toggle_play)
        self.position_label = QLabel("")
        # Where playback is in the file shown, and a way to go elsewhere in it.
        self.seek = QSlider(Qt.Orientation.Horizontal)
        self.seek.setObjectName("seekBar")
        self.seek.setToolTip("Drag to play from another point")
        self.seek.setRange(0, 0)
        self.seek.sliderReleased.connect(lambda: self.play_from(self.seek.value() / 1000.0))
        self.seek.setAccessibleName("Playback position")
        self.play_button.setAccessibleName("Play or pause (Space)")
        self.speed = QComboBox()
        self.speed.setObjectName("playbackSpeed")
        self.speed.setAccessibleName("Playback speed")
        self.speed.setToolTip("Playback speed")
        for rate in SPEEDS:
            self.speed.addItem(speed_text(rate), rate)
        self.speed.setCurrentIndex(SPEEDS.index(1.0))
        self.speed.currentIndexChanged.connect(lambda _i: self.set_rate(self.speed.currentData()))
        self.table = SegmentTable(self.model)
        self.table.text_delegate.word_clicked.connect(self._word_clicked)
        self.table.clicked.connect(self._cell_clicked)
        self.table.setAccessibleName("Transcript segments")
        self.table.setTabKeyNavigation(False)   # Tab leaves the table: arrows move inside it
        self.models_button.setAccessibleName("Choose a model")
        # Shown instead of an empty table while there is no transcript to show.
        self.placeholder = QLabel(NO_SELECTION)
        self.placeholder.setObjectName("transcriptPlaceholder")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setMargin(24)
        self.placeholder.setStyleSheet("color: palette(placeholder-text); font-size: 12pt;"
                                       "background-color: palette(base);"
                                       "border: 1px solid palette(mid); border-radius: 6px;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.table)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: palette(placeholder-text);")

        playback = QHBoxLayout()
        playback.addWidget(self.play_button)
        playback.addWidget(self.seek, 1)
        playback.addWidget(self.position_label)
        playback.addWidget(self.speed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.details)
        layout.addWidget(self.models_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.search_bar)
        layout.addLayout(playback)
        layout.addWidget(self.notes_label)
        layout.addWidget(self.stack, 1)
        self.speakers = SpeakersPanel()
        self.speakers.transcript_changed.connect(self._speakers_changed)
        self.model.speakers_edited.connect(self._speakers_changed)
        layout.addWidget(self.speakers)
        layout.addWidget(self.message)
        QShortcut(QKeySequence.StandardKey.Find, self, activated=self.search.setFocus)

        self.player.position_changed.connect(self._position)
        self.player.playing_changed.connect(
            lambda playing: self.play_button.setText("Pause" if playing else "Play"))
        self.player.failed.connect(self.message.setText)
        # No sound output now: the view looks again every few seconds and on Play (a sound
        # server started later is found without restarting the app).
        self._recheck_timer = QTimer(self, interval=5000)
        self._recheck_timer.timeout.connect(self.recheck_playback)
        if not self.player.available:
            self.play_button.setToolTip(self.player.unavailable_reason)
            self._recheck_timer.start()
        self._resume_at: float | None = None   # where Play goes on (after a pause or a seek)
        self.table.pressed.connect(self._forget_resume)
        self._matches: list[tuple[int, int]] = []
        self._match_at = -1
        self._duration = 0.0
        self.show_transcript(None, None, "")

    # -- content -----------------------------------------------------------------
    def show_transcript(self, file_id, transcript, source_path: str, title: str = "",
                        status: str = "", placeholder: str = "") -> None:
        """Show ``transcript`` (None: show ``status`` instead, e.g. 'Transcribing… 40%', and
        ``placeholder`` where the segments would be)."""
        if self.player.playing:
            self.player.stop()
        same_file = source_path == self.source_path and file_id == self.model.file_id
        self.source_path = source_path
        if not same_file:
            self._resume_at = None
        self.model.set_transcript(file_id, transcript)
        duration = float(getattr(transcript, "duration", 0.0) or 0.0)
        self.seek.setRange(0, int(duration * 1000))
        self.seek.setValue(0)
        self.audio_missing = audio_missing_reason(source_path) if transcript is not None else ""
        self.seek.setEnabled(transcript is not None and duration > 0 and not self.audio_missing)
        notes = notes_text(transcript)
        self.notes_label.setText(notes)
        self.notes_label.setVisible(bool(notes))
        self._duration = duration
        self.position_label.setText(self._time_text(0.0) if transcript is not None else "")
        self.title.setText(title or "Transcript")
        if transcript is None:
            self.details.setText(status)
            self.message.setText("")
            self.placeholder.setText(placeholder or (NOT_YET if title else NO_SELECTION))
        else:
            count = len(transcript.segments)
            parts = [transcript.language or "Language not detected", format_duration(transcript.duration),
                     f"{count} segment{'s' if count != 1 else ''}"]
            self.details.setText(" · ".join(p for p in parts if p))
            notes = [transcript.words_note] if transcript.words_note else []
            # the transcript's own notes (track used, level fixed, ...) show above the segments
            if not self.player.available:
                notes.append(self.player.unavailable_reason)
            self.message.setText("\n".join(notes))
        empty = transcript is not None and not (transcript.text or "").strip()
        if empty:
            self.placeholder.setText(NO_SPEECH)
        self.stack.setCurrentWidget(self.table if transcript is not None and not empty
                                    else self.placeholder)
        self.search.setEnabled(transcript is not None)
        self.play_button.setEnabled(transcript is not None and not self.audio_missing)
        self.play_button.setToolTip(self.audio_missing or self.play_tip)
        self.speakers.set_transcript(file_id, self.model.transcript)
        self.table.setColumnHidden(COL_SPEAKER, not any(s.speaker for s in self.model.segments))
        self._search(self.search.text())

    def show_notes(self, transcript) -> None:
        """The notes line again for the transcript shown, changed in place (a note added after an edit)."""
        if self.model.transcript is not None:
            self.model.transcript.notes = list(transcript.notes)
        notes = notes_text(self.model.transcript)
        self.notes_label.setText(notes)
        self.notes_label.setVisible(bool(notes))

    def _speakers_changed(self, file_id: int) -> None:
        self.model.refresh()
        self.speakers.refresh()
        self.speakers_edited.emit(file_id)

    def _search(self, text: str):
        self.model.set_search(text)
        # Every occurrence is a stop (F3 / Shift+F3), counted as "3 of 12".
        self._matches = self.model.occurrences()
        self._match_at = -1
        if text.strip() and not self._matches:
            self.search_bar.set_count_text("No matches")
        elif text.strip():
            self.next_match()
        else:
            self.search_bar.set_count_text("")

    def next_match(self):
        self._go_to_match(+1)

    def previous_match(self):
        self._go_to_match(-1)

    def _go_to_match(self, step: int):
        if not self._matches:
            return
        self._match_at = (self._match_at + step) % len(self._matches)
        row = self._matches[self._match_at][0]
        self.table.selectRow(row)
        self.table.scrollTo(self.model.index(row, COL_TEXT))
        self.search_bar.set_count_text(f"{self._match_at + 1} of {len(self._matches)}",
                                       can_move=len(self._matches) > 1)

    # -- playback -------------------------------------------------------------------
    def recheck_playback(self) -> bool:
        """Look for a sound output again; True (and the notes cleared) once one is there."""
        recheck = getattr(self.player, "recheck", None)
        if self.player.available or recheck is None or not recheck():
            if not self.player.available:
                self.play_button.setToolTip(self.player.unavailable_reason)
            return self.player.available
        self._recheck_timer.stop()
        self.play_button.setToolTip("Play from the selected segment; click a word to play from it")
        self.seek.setEnabled(self.model.transcript is not None and self._duration > 0)
        if self.player.unavailable_reason == "" and self.model.transcript is not None:
            notes = [n for n in self.message.text().split("\n") if not n.startswith("Playback is off")]
            self.message.setText("\n".join(notes))
        return True

    def set_rate(self, rate: float) -> None:
        """Playback speed, 0.5-2x; a playing file goes on at the new speed from where it is."""
        set_rate = getattr(self.player, "set_rate", None)
        if set_rate is None:
            return
        was_playing = self.player.playing
        at = self.player.position() if was_playing else None
        set_rate(float(rate))
        index = self.speed.findData(float(rate))
        if index >= 0 and index != self.speed.currentIndex():
            self.speed.setCurrentIndex(index)
        if was_playing and getattr(self.player, "backend", "") != "qt":
            self.play_from(at)
        self.rate_changed.emit(float(rate))

    def seek_by(self, seconds: float) -> None:
        """Left/Right: 5 s back or on; while stopped, moves where Play starts."""
        if self.model.transcript is None:
            return
        if self.player.playing and hasattr(self.player, "position"):
            here = self.player.position()
        else:
            here = self.seek.value() / 1000.0
        target = min(max(0.0, here + seconds), max(0.0, self._duration - 0.05))
        self.seek.setValue(int(target * 1000))
        self._resume_at = target
        self.position_label.setText(self._time_text(target))
        self.model.set_playhead(target)
        if self.player.playing:
            self.play_from(target)

    def set_font_points(self, points: int) -> None:
        """The transcript's text size (the time column and the editor follow)."""
        font = self.table.font()
        font.setPointSize(clamp_font(points))
        self.table.setFont(font)
        self.table._relayout.start()

    def font_points(self) -> int:
        return self.table.font().pointSize()

    def play_from(self, seconds: float):
        if self.audio_missing:   # nothing to play: say why instead of "file not found"
            self.message.setText(self.audio_missing)
            return
        if not self.player.available:
            self.recheck_playback()
        if self.source_path and self.player.play(self.source_path, seconds):
            self.message.setText(self.model.transcript.words_note if self.model.transcript else "")

    def toggle_play(self):
        if self.player.playing:
            self.player.stop()
            return
        rows = self.table.selectionModel().selectedRows()
        segments = self.model.segments
        start = segments[rows[0].row()].start if rows and segments else 0.0
        if self._resume_at is not None:   # paused, or Left/Right chose where to go on
            start = self._resume_at
        self.play_from(start)

    def _word_clicked(self, row: int, word_index: int):
        segments = self.model.segments
        if not 0 <= row < len(segments) or not self.player.available or self.audio_missing:
            return
        seg = segments[row]
        self.play_from(seg.words[word_index].start if 0 <= word_index < len(seg.words) else seg.start)

    def _cell_clicked(self, index):
        if index.column() == COL_TIME:
            self._word_clicked(index.row(), -1)

    def _forget_resume(self, *_):
        """A row picked by hand: Play starts at that row again."""
        self._resume_at = None

    def show_models_button(self, visible: bool) -> None:
        self.models_button.setVisible(visible)

    def _time_text(self, seconds: float) -> str:
        return f"{format_time(seconds)} / {format_time(self._duration)}"

    def _position(self, seconds: float):
        if getattr(self.player, "path", self.source_path) != self.source_path:
            return  # another file's playback: the label belongs to the file shown
        self.position_label.setText(self._time_text(seconds))
        self._resume_at = seconds
        if not self.seek.isSliderDown():
            self.seek.setValue(int(seconds * 1000))
        row = self.model.set_playhead(seconds)
        if row >= 0 and self.player.playing:
            self.table.scrollTo(self.model.index(row, COL_TEXT))
