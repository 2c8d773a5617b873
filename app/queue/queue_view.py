"""The queue table: progress bars with ETA, a language picker, and the row buttons."""
from __future__ import annotations

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionProgressBar,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.languages import fill_language_combo
from app.queue.queue_model import (
    COL_CONTEXT,
    COL_DURATION,
    COL_LANGUAGE,
    COL_NAME,
    COL_PROGRESS,
    COL_SPEAKERS,
    COL_STATUS,
    EDITABLE_STATES,
    IN_FLIGHT,
    ItemRole,
    QueueModel,
    STATUS_TEXT,
    format_duration,
)


class ProgressDelegate(QStyledItemDelegate):
    """Draws a progress bar while a file is being transcribed; its text says how long is left.

    Other rows get no bar: the Status column already says "Waiting", "Done" or "Failed",
    and a column of full green "Done" bars reads as a column of buttons.
    """

    def __init__(self, parent=None):
        super().__init__(parent)
        # Style sheets only apply to a control drawn for a widget of its kind: this
        # never-shown bar lets the app's QProgressBar rules style the cells too.
        self._styled_bar = QProgressBar()
        self._styled_bar.setVisible(False)

    def initStyleOption(self, option, index):
        super().initStyleOption(option, index)
        option.text = ""  # the bar carries the text; finished rows show none here

    def paint(self, painter, option, index):
        item = index.data(ItemRole)
        super().paint(painter, option, index)  # background, alternate colour, selection
        if item is None or not progress_text(item, index.model().wait_text) and item.state != "running":
            return
        bar = QStyleOptionProgressBar()
        bar.rect = QRect(option.rect).adjusted(4, 4, -4, -4)
        bar.minimum, bar.maximum = 0, 1000
        bar.progress = int(round(item.progress * 1000))
        bar.textVisible = True
        bar.text = fit_progress_text(progress_text(item, index.model().wait_text),
                                     option.fontMetrics, bar.rect.width() - 8)
        bar.textAlignment = Qt.AlignmentFlag.AlignCenter
        bar.state = option.state | QStyle.StateFlag.State_Horizontal
        bar.palette = option.palette
        style = self._styled_bar.style() or QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter, self._styled_bar)


def progress_text(item, wait_text: str = "") -> str:
    """The progress cell's text: only files being transcribed have one. ``wait_text`` says why
    nothing starts ("Waiting for a model …") while there is no model."""
    if item.state == "waiting":
        return wait_text
    if item.state != "running":
        return ""
    percent = f"{item.progress * 100:.0f}%"
    if item.eta >= 1.0:  # "0:00 left" would say nothing
        return f"{percent} · {format_duration(item.eta)} left"
    return percent


def fit_progress_text(text: str, metrics, width: int) -> str:
    """The bar's text as it fits: "45% · 1:23 left", else "45%" (never spilling past the bar)."""
    if metrics.horizontalAdvance(text) <= width or " · " not in text:
        return text
    return text.split(" · ")[0]


class LanguageDelegate(QStyledItemDelegate):
    def createEditor(self, parent, option, index):
        combo = QComboBox(parent)
        fill_language_combo(combo, index.data(Qt.ItemDataRole.EditRole))
        return combo

    def setEditorData(self, editor, index):
        editor.setCurrentIndex(max(0, editor.findData(index.data(Qt.ItemDataRole.EditRole) or "")))

    def setModelData(self, editor, model, index):
        model.setData(index, editor.currentData() or "", Qt.ItemDataRole.EditRole)

    def updateEditorGeometry(self, editor, option, index):  # noqa: N802
        # As wide as its longest entry ("Detect automatically"), even where the column is narrower.
        rect = option.rect
        rect.setWidth(max(rect.width(), editor.sizeHint().width()))
        editor.setGeometry(rect)


class SpeakersDelegate(QStyledItemDelegate):
    """The Speakers cell's editor: Off / Automatic count / 1-8 speakers (as in Settings)."""

    def createEditor(self, parent, option, index):
        from app.transcript.speaker_setup import speaker_count_combo

        combo = speaker_count_combo(index.data(Qt.ItemDataRole.EditRole))
        combo.setParent(parent)
        combo.setToolTip("Label who speaks in this file: off, a count found from the voices, or a count you know")
        return combo

    def setEditorData(self, editor, index):
        from app.transcript.speaker_setup import set_speaker_choice

        set_speaker_choice(editor, index.data(Qt.ItemDataRole.EditRole))

    def setModelData(self, editor, model, index):
        model.setData(index, editor.currentData(), Qt.ItemDataRole.EditRole)

    def updateEditorGeometry(self, editor, option, index):  # noqa: N802
        rect = option.rect
        rect.setWidth(max(rect.width(), editor.sizeHint().width()))
        editor.setGeometry(rect)


LOADING_MODEL_TEXT = "Loading the model…"   # the bar's wait text while the model loads
LANGUAGE_WIDEST = "Portuguese (auto)"   # the longest detected-language cell of the common languages
PROGRESS_WIDEST = "100% · 59:59 left"   # a running file's bar text; longer waits are rare
# Every text the bar shows often: a waiting file's wait texts as well as progress.
PROGRESS_TEXTS = (PROGRESS_WIDEST, LOADING_MODEL_TEXT)


class QueueTable(QTableView):
    delete_pressed = Signal()

    def __init__(self, model: QueueModel, parent=None):
        super().__init__(parent)
        self.setObjectName("queueTable")
        self.setModel(model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                             | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.setAlternatingRowColors(True)
        self.setShowGrid(False)
        self.setWordWrap(False)
        # "lecture-2024-…-part2.wav" tells files apart; "lecture…" for every row did not.
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(30)
        self._progress_delegate = ProgressDelegate(self)
        self._language_delegate = LanguageDelegate(self)
        self.setItemDelegateForColumn(COL_PROGRESS, self._progress_delegate)
        self.setItemDelegateForColumn(COL_LANGUAGE, self._language_delegate)
        self._speakers_delegate = SpeakersDelegate(self)
        self.setItemDelegateForColumn(COL_SPEAKERS, self._speakers_delegate)
        header = self.horizontalHeader()
        header.setSectionResizeMode(COL_NAME, QHeaderView.ResizeMode.Stretch)
        metrics = self.fontMetrics()
        # A cell's text gets its width less the style sheet's 8 px padding a side and Qt's own
        # ~3 px text margins, plus 8 px to spare for hinting: "Transcribing" fit offscreen, not under X.
        cell = 2 * 8 + 2 * 3 + 8
        # Language fits "Portuguese (auto)" whole: at 100 px every row read "Engli…auto)".
        language = max(100, metrics.horizontalAdvance(LANGUAGE_WIDEST) + cell)
        # Progress: the bar (inset 4 px a side) and its "45% · 1:23 left", no more. At 150 px,
        # with an empty Context column beside it, "weekly-team-meeting-2026.wav" read "weekly…26.wav".
        progress = max(metrics.horizontalAdvance(text) for text in PROGRESS_TEXTS) + 20
        # Status fits its longest word: at 90 px every running row read "Tran…bing".
        status = max(metrics.horizontalAdvance(text) for text in STATUS_TEXT.values()) + cell
        speakers = metrics.horizontalAdvance("Speakers") + cell   # the header; cells say "Auto", "3"
        for col, width in ((COL_DURATION, 60), (COL_LANGUAGE, language), (COL_CONTEXT, 70),
                           (COL_STATUS, status), (COL_PROGRESS, progress), (COL_SPEAKERS, speakers)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            self.setColumnWidth(col, width)
        header.moveSection(header.visualIndex(COL_SPEAKERS), header.visualIndex(COL_LANGUAGE) + 1)
        # Context is usually empty: its column shows only once a row has one (set with the
        # row menu's "Context…", or Settings' default context), so the file names get the room.
        # Speakers likewise: shown once a file labels speakers (Settings' default, or the row menu's
        # "Speakers…").
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset, model.dataChanged):
            signal.connect(self._show_columns_when_used)
        self._show_columns_when_used()

    def _show_columns_when_used(self, *args):
        items = self.model().items
        for col, used in ((COL_CONTEXT, any(item.context for item in items)),
                          (COL_SPEAKERS, any(item.speakers not in (None, "off") for item in items))):
            if self.isColumnHidden(col) == used:
                self.setColumnHidden(col, not used)

    def keyPressEvent(self, event):
        if event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace) and self.state() != \
                QAbstractItemView.State.EditingState:
            self.delete_pressed.emit()
            return
        super().keyPressEvent(event)

    def selected_job_ids(self) -> list[int]:
        rows = sorted({index.row() for index in self.selectionModel().selectedRows()})
        model = self.model()
        return [model.items[row].job_id for row in rows if row < len(model.items)]


class QueuePanel(QWidget):
    """The table (or a drop hint while it is empty) and the row buttons under it."""

    cancel_clicked = Signal()
    retry_clicked = Signal()
    again_clicked = Signal()
    remove_clicked = Signal()
    move_clicked = Signal(int)  # -1 up, +1 down

    def __init__(self, model: QueueModel, parent=None):
        super().__init__(parent)
        self.model = model
        self.table = QueueTable(model)
        self.table.delete_pressed.connect(self.remove_clicked)
        hint = QLabel("Drop audio or video files or folders here\n\nor press Ctrl+O to add files")
        hint.setObjectName("dropHint")
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # On palette(base), like the table it stands in for: on the tab page's own grey the
        # dashed border all but vanished in the dark scheme.
        hint.setStyleSheet("color: palette(placeholder-text); font-size: 14pt;"
                           "background-color: palette(base);"
                           "border: 2px dashed palette(mid); border-radius: 12px;")
        self.stack = QStackedWidget()
        self.stack.addWidget(hint)
        self.stack.addWidget(self.table)
        buttons = QHBoxLayout()
        self.cancel_button = self._button("Cancel", self.cancel_clicked, "Stop the selected files")
        self.retry_button = self._button("Retry", self._retry_or_again,
                                         "Queue failed or cancelled files again")
        self.remove_button = self._button("Remove", self.remove_clicked, "Remove from the list (Delete)")
        self.up_button = self._button("Move up", lambda: self.move_clicked.emit(-1), "Process earlier")
        self.down_button = self._button("Move down", lambda: self.move_clicked.emit(1), "Process later")
        for button in (self.cancel_button, self.retry_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.up_button)
        buttons.addWidget(self.down_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.stack, 1)
        layout.addLayout(buttons)
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset, model.dataChanged):
            signal.connect(self.refresh)
        self.table.selectionModel().selectionChanged.connect(self.refresh)
        self.refresh()

    def edit_context(self) -> bool:
        """Ask for the context of the selected files that have not started (the row menu's
        "Context…": the Context column is hidden while no file has one)."""
        def ask(item):
            text, ok = self.ask_context(item.context)
            return text.strip(), ok
        return self._set_for_selected(EDITABLE_STATES, COL_CONTEXT, ask)

    def _set_for_selected(self, states, column: int, ask) -> bool:
        """Set ``column`` of the selected files in ``states`` to what ``ask(first item)`` returns as
        (value, accepted?); False when no such file is selected or the question was declined."""
        rows = [self.model.row_of(j) for j in self.table.selected_job_ids()]
        rows = [r for r in rows if self.model.items[r].state in states]
        if not rows:
            return False
        value, ok = ask(self.model.items[rows[0]])
        if not ok:
            return False
        for row in rows:
            self.model.setData(self.model.index(row, column), value)
        return True

    def ask_context(self, current: str) -> tuple[str, bool]:
        """(text, accepted?) from a one-line dialog (tests replace this)."""
        return QInputDialog.getText(self, "Context", "Names, terms or a topic that help "
                                    "recognition of the selected files:", text=current)

    def edit_speakers(self) -> bool:
        """Ask how many speakers the selected files have (the row menu's "Speakers…": the Speakers
        column is hidden while no file labels speakers); a finished file is transcribed again."""
        from app.queue.queue_model import LANGUAGE_STATES

        return self._set_for_selected(LANGUAGE_STATES, COL_SPEAKERS,
                                      lambda item: self.ask_speakers(item.speakers))

    def ask_speakers(self, current) -> tuple[str, bool]:
        """(stored choice, accepted?) from a list of Off / Automatic count / 1-8 (tests replace this)."""
        from app.transcript.speaker_setup import SPEAKER_CHOICES, speaker_choice

        names = [text for text, _ in SPEAKER_CHOICES]
        values = [value for _, value in SPEAKER_CHOICES]
        current = speaker_choice(current) if current else "off"
        text, ok = QInputDialog.getItem(self, "Speakers", "Speaker labels for the selected files:", names,
                                        values.index(current) if current in values else 0, False)
        return (values[names.index(text)] if ok else current), ok

    def _retry_or_again(self):
        if self.retry_button.text() == "Transcribe again":
            self.again_clicked.emit()
        else:
            self.retry_clicked.emit()

    def _button(self, text, slot, tip):
        button = QPushButton(text)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    def refresh(self, *args):
        self.stack.setCurrentIndex(1 if self.model.items else 0)
        selected = [self.model.item(j) for j in self.table.selected_job_ids()]
        states = {item.state for item in selected if item}
        self.cancel_button.setEnabled(bool(states & {"waiting", *IN_FLIGHT}))
        # One button, named for what it does: Retry (failed, cancelled) or Transcribe again (done).
        again = bool(states) and states <= {"done"}
        self.retry_button.setText("Transcribe again" if again else "Retry")
        self.retry_button.setToolTip("Transcribe the selected files once more" if again
                                     else "Queue failed or cancelled files again")
        self.retry_button.setEnabled(again or bool(states & {"failed", "cancelled"}))
        self.remove_button.setEnabled(bool(selected))
        self.up_button.setEnabled(states == {"waiting"})
        self.down_button.setEnabled(states == {"waiting"})
