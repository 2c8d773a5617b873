"""The Settings page of the watch folder: which folder, where the exports go, in which formats."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from app.widgets import dialog_folders
from app import settings as S
from app.watch.watch_folder_service import WATCH_FORMATS, parse_formats

FORMAT_LABELS = {
    "srt": "SubRip (.srt)", "vtt": "WebVTT (.vtt)", "vtt-karaoke": "Karaoke WebVTT (.karaoke.vtt)",
    "json": "JSON (.json)", "txt": "Plain text (.txt)", "txt-timestamps": "Text with times (.timestamps.txt)",
}


class WatchFolderPage(QWidget):
    def __init__(self, settings, parent=None):
        super().__init__(parent)
        self.settings = settings
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("Off: choose a folder to watch")
        self.folder_edit.setAccessibleName("Watched folder")
        self.output_edit = QLineEdit()
        self.output_edit.setPlaceholderText("Next to each audio file")
        self.output_edit.setAccessibleName("Folder for the watch folder's exports")
        form.addRow("Watch folder:", self._folder_row(self.folder_edit, "Choose the folder to watch"))
        form.addRow("Export to:", self._folder_row(self.output_edit, "Choose where transcripts go"))
        grid, self.format_checks = QGridLayout(), {}
        for i, name in enumerate(WATCH_FORMATS):
            check = QCheckBox(FORMAT_LABELS[name])
            check.setAccessibleName(f"Export {FORMAT_LABELS[name]}")
            self.format_checks[name] = check
            grid.addWidget(check, i // 2, i % 2)
        formats = QWidget()
        formats.setLayout(grid)
        form.addRow("Formats:", formats)
        self.settle_spin = QDoubleSpinBox()
        self.settle_spin.setRange(1.0, 600.0)
        self.settle_spin.setSuffix(" s")
        self.settle_spin.setAccessibleName("Wait until a file stops changing")
        form.addRow("Wait until unchanged:", self.settle_spin)
        hint = QLabel("New audio or video files in the folder (and its subfolders) are transcribed once "
                      "they stop growing, then exported. Files already there when you choose the folder "
                      "are left alone; each file is transcribed once, also across restarts.")
        hint.setWordWrap(True)
        form.addRow("", hint)

    def _folder_row(self, edit: QLineEdit, title: str) -> QWidget:
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(edit, 1)
        browse = QPushButton("Browse…")
        browse.setAccessibleName(f"{title}…")

        def choose():
            folder = dialog_folders.choose_folder(self, title, self.settings, edit.text().strip())
            if folder:
                edit.setText(folder)

        browse.clicked.connect(choose)
        layout.addWidget(browse)
        return row

    def load(self) -> None:
        g = self.settings.get
        self.folder_edit.setText(g(S.WATCH_DIR))
        self.output_edit.setText(g(S.WATCH_OUTPUT_DIR))
        chosen = set(parse_formats(g(S.WATCH_FORMATS)))
        for name, check in self.format_checks.items():
            check.setChecked(name in chosen)
        self.settle_spin.setValue(g(S.WATCH_SETTLE_SECONDS))

    def save(self) -> None:
        s = self.settings.set
        s(S.WATCH_DIR, self.folder_edit.text().strip())
        s(S.WATCH_OUTPUT_DIR, self.output_edit.text().strip())
        s(S.WATCH_FORMATS, ",".join(n for n, c in self.format_checks.items() if c.isChecked()) or "txt")
        s(S.WATCH_SETTLE_SECONDS, self.settle_spin.value())
