"""Export…: tick several formats at once, then export the selected files, all finished
files, or one file under a name and folder of your choice (Save As)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
)

from app.widgets import dialog_folders
from app import settings as S
from app.export.export_actions import CHOICES, chosen_formats, remember_formats


class ExportDialog(QDialog):
    def __init__(self, settings, selected: int, finished: int, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export")
        self.settings = settings
        self.scope = ""          # "selected", "all" or "save_as" once a button is pressed
        ticked = {c.key for c in chosen_formats(settings)}
        formats = QGroupBox("Formats")
        box = QVBoxLayout(formats)
        self.checks: list[tuple[QCheckBox, object]] = []
        for choice in CHOICES:
            check = QCheckBox(choice.label)
            check.setChecked(choice.key in ticked)
            check.toggled.connect(self._update)
            box.addWidget(check)
            self.checks.append((check, choice))
        where = QGroupBox("Where")
        place = QVBoxLayout(where)
        configured = settings.get(S.EXPORT_DIR)
        self.beside = QRadioButton(f"In the export folder from Settings ({configured})" if configured
                                   else "Next to each audio file (recordings: in Documents)")
        self.elsewhere = QRadioButton("In this folder:")
        self.folder = QLineEdit(dialog_folders.start_folder(settings))
        self.folder.setAccessibleName("Export folder")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.beside.setChecked(True)
        row = QHBoxLayout()
        row.addWidget(self.elsewhere)
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        place.addWidget(self.beside)
        place.addLayout(row)
        self.selected_button = QPushButton(f"Export selected ({selected})")
        self.all_button = QPushButton(f"Export all finished ({finished})")
        self.save_as_button = QPushButton("Save As…")
        self.save_as_button.setToolTip("Choose the name and folder for the selected file")
        self.selected_button.setEnabled(selected > 0)
        self.all_button.setEnabled(finished > 0)
        self.save_as_button.setEnabled(selected == 1)
        self.selected_button.setDefault(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        for button, scope in ((self.selected_button, "selected"), (self.all_button, "all"),
                              (self.save_as_button, "save_as")):
            buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
            button.clicked.connect(lambda _=False, s=scope: self.choose(s))
        buttons.rejected.connect(self.reject)
        self.hint = QLabel("")
        layout = QVBoxLayout(self)
        layout.addWidget(formats)
        layout.addWidget(where)
        layout.addWidget(self.hint)
        layout.addWidget(buttons)
        self._update()

    def choices(self) -> list:
        return [choice for check, choice in self.checks if check.isChecked()]

    def target_folder(self) -> Path | None:
        """None: each file's own export folder."""
        return Path(self.folder.text()) if self.elsewhere.isChecked() and self.folder.text() else None

    def choose(self, scope: str) -> None:
        if not self.choices():
            return
        remember_formats(self.settings, self.choices())
        self.scope = scope
        self.accept()

    def _update(self, *_):
        none = not self.choices()
        self.hint.setText("Tick at least one format." if none else "")
        for button in (self.selected_button, self.all_button, self.save_as_button):
            button.setProperty("formats_ok", not none)

    def _browse(self):
        folder = dialog_folders.choose_folder(self, "Export into", self.settings, self.folder.text())
        if folder:
            self.folder.setText(folder)
            self.elsewhere.setChecked(True)
