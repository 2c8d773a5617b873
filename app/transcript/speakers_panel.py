"""The speakers of the transcript shown: colour, name and speaking time, with rename and merge.

A rename is one entry in ``Transcript.speaker_names``, so every segment, search and export
follows it; a merge moves every segment of one speaker to another. Changes go out as
``transcript_changed(file_id)``; the main window stores the transcript in the history.
"Remember this voice" keeps a named speaker's voice (``namer``, app.transcript.speaker_names),
so later files name that voice themselves; "Forget voice" drops it again.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.text.speakers import merge_speakers, rename_speaker, speaker_list

# Distinct hues that stay readable behind dark text in light and dark themes.
PALETTE = ["#8ecae6", "#ffb703", "#90be6d", "#f4978e", "#cdb4db", "#f9c74f", "#43aa8b", "#e9c46a"]


def speaker_color(label: str | None) -> QColor | None:
    """The colour of a speaker label (stable: ``S3`` always gets the third colour)."""
    if not label:
        return None
    digits = "".join(ch for ch in label if ch.isdigit())
    index = int(digits) - 1 if digits else sum(map(ord, label))
    color = QColor(PALETTE[index % len(PALETTE)])
    color.setAlpha(150)
    return color


def _minutes(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}:{s:02d}"


class SpeakersPanel(QWidget):
    transcript_changed = Signal(int)   # file id

    def __init__(self, parent=None):
        super().__init__(parent)
        self.file_id: int | None = None
        self.transcript = None
        self.namer = None      # app.transcript.speaker_names.SpeakerNamer (the main window sets it)
        self.title = QLabel("Speakers")
        self.title.setStyleSheet("font-weight: 600;")
        self.list = QListWidget()
        self.list.setMaximumHeight(110)
        self.list.itemDoubleClicked.connect(lambda _item: self.rename())
        self.list.currentRowChanged.connect(lambda _row: self._update_voice_buttons())
        self.rename_button = QPushButton("Rename…")
        self.rename_button.setToolTip("Name this speaker everywhere in the transcript and its exports")
        self.rename_button.clicked.connect(self.rename)
        self.merge_button = QPushButton("Merge into…")
        self.merge_button.setToolTip("The selected speaker's segments go to another speaker")
        self.merge_button.clicked.connect(self.merge)
        buttons = QHBoxLayout()
        buttons.addWidget(self.rename_button)
        buttons.addWidget(self.merge_button)
        self.remember_button = QPushButton("Remember this voice")
        self.remember_button.setToolTip("Later files name this voice with this speaker's name by themselves")
        self.remember_button.clicked.connect(self.remember_voice)
        self.forget_button = QPushButton("Forget voice")
        self.forget_button.setToolTip("Later files no longer name this voice")
        self.forget_button.clicked.connect(self.forget_voice)
        buttons.addStretch(1)
        voice_buttons = QHBoxLayout()      # a row of its own: the transcript pane is narrow
        voice_buttons.addWidget(self.remember_button)
        voice_buttons.addWidget(self.forget_button)
        voice_buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.list)
        layout.addLayout(buttons)
        layout.addLayout(voice_buttons)

    def set_transcript(self, file_id: int | None, transcript) -> None:
        """Show ``transcript``'s speakers (the panel edits this object)."""
        self.file_id, self.transcript = file_id, transcript
        self.refresh()

    def refresh(self) -> None:
        """Redraw the list, keeping the selected speaker selected (else the first)."""
        keep = self.selected_label()
        self.list.clear()
        speakers = speaker_list(self.transcript) if self.transcript is not None else []
        for sp in speakers:
            name = sp["name"] if sp["name"] == sp["label"] else f"{sp['name']}  ({sp['label']})"
            if sp["name"] != sp["label"] and self._remembered(sp["name"]):
                name += "  · voice remembered"
            item = QListWidgetItem(f"{name}    {_minutes(sp['speaking_time'])}")
            item.setData(Qt.ItemDataRole.UserRole, sp["label"])
            item.setBackground(speaker_color(sp["label"]))
            self.list.addItem(item)
        labels = [sp["label"] for sp in speakers]
        if speakers:
            self.list.setCurrentRow(labels.index(keep) if keep in labels else 0)
        self.setVisible(bool(speakers))
        self.merge_button.setEnabled(len(speakers) > 1)
        self._update_voice_buttons()

    def _remembered(self, name: str) -> bool:
        return self.namer is not None and self.namer.is_remembered(name)

    def _update_voice_buttons(self) -> None:
        label = self.selected_label()
        name = self.transcript.speaker_names.get(label, "") if label and self.transcript is not None else ""
        has_voice = bool(name) and label in self.transcript.voices
        self.remember_button.setVisible(self.namer is not None)
        self.forget_button.setVisible(self.namer is not None)
        self.remember_button.setEnabled(has_voice and not self._remembered(name))
        self.remember_button.setToolTip(
            "Later files name this voice with this speaker's name by themselves" if has_voice else
            "Name the speaker first (Rename…); speakers added by hand have no voice to remember")
        self.forget_button.setEnabled(self._remembered(name))

    def remember_voice(self) -> str:
        """Remember the selected speaker's voice under its name; returns the name ("" if none)."""
        label = self.selected_label()
        if label is None or self.transcript is None or self.namer is None:
            return ""
        try:
            name = self.namer.remember(self.transcript, label)
        except OSError as exc:      # the data folder is not writable: say so, lose nothing else
            QMessageBox.warning(self, "Remember this voice", f"The voice could not be saved: {exc}")
            return ""
        self.refresh()
        return name

    def forget_voice(self) -> None:
        """Forget the voice remembered under the selected speaker's name."""
        label = self.selected_label()
        if label is None or self.transcript is None or self.namer is None:
            return
        self.namer.forget(self.transcript.speaker_names.get(label, ""))
        self.refresh()

    def selected_label(self) -> str | None:
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def rename(self, name: str | None = None) -> None:
        """Rename the selected speaker (asks for the name when ``name`` is None)."""
        label = self.selected_label()
        if label is None or self.transcript is None:
            return
        if name is None:
            current = self.transcript.speaker_names.get(label, "")
            name, ok = QInputDialog.getText(self, "Rename speaker", f"Name for {label}:", text=current)
            if not ok:
                return
        rename_speaker(self.transcript, label, name)
        self._changed()

    def merge(self, into: str | None = None) -> None:
        """Give the selected speaker's segments to ``into`` (asks which when None)."""
        label = self.selected_label()
        if label is None or self.transcript is None:
            return
        others = [sp for sp in speaker_list(self.transcript) if sp["label"] != label]
        if into is None:
            names = [f"{sp['name']} ({sp['label']})" for sp in others]
            choice, ok = QInputDialog.getItem(self, "Merge speakers", f"Merge {label} into:", names, 0, False)
            if not ok:
                return
            into = others[names.index(choice)]["label"]
        merge_speakers(self.transcript, into, label)
        self._changed()

    def _changed(self) -> None:
        self.refresh()
        if self.file_id is not None:
            self.transcript_changed.emit(self.file_id)
