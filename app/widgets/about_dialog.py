"""Help > About: version, model, and a way to find the log file."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
)

from app import APP_NAME, __version__
from app.paths import log_file


class AboutDialog(QDialog):
    def __init__(self, model: str = "", device: str = "", parent=None, hardware: str = ""):
        super().__init__(parent)
        self.setWindowTitle(f"About {APP_NAME}")
        text = QLabel(
            f"<h2>{APP_NAME}</h2><p>Version {__version__}</p>"
            "<p>Speech to text on your own computer with Qwen3-ASR.<br>"
            "Audio never leaves this machine.</p>"
            f"<p>Model: {model or 'none loaded'}{f' on {device}' if device else ''}</p>"
            + (f"<p>Hardware: {html.escape(hardware)}</p>" if hardware else "") +
            f"<p>Log file: <code>{log_file()}</code></p>")
        text.setWordWrap(True)
        text.setTextInteractionFlags(text.textInteractionFlags()
                                     | text.textInteractionFlags().TextSelectableByMouse)
        open_log = QPushButton("Open log file")
        open_log.clicked.connect(self.open_log)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.addButton(open_log, QDialogButtonBox.ButtonRole.ActionRole)
        self.setMinimumWidth(480)
        row = QHBoxLayout()
        try:
            from resources import app_icon

            icon = QLabel()
            icon.setPixmap(app_icon().pixmap(64, 64))
            icon.setAlignment(Qt.AlignmentFlag.AlignTop)
            row.addWidget(icon)
            row.addSpacing(12)
        except Exception:  # resources are optional: the box still says what it must
            pass
        row.addWidget(text, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(buttons)

    def open_log(self) -> bool:
        path = log_file()
        target = path if path.exists() else path.parent
        return QDesktopServices.openUrl(QUrl.fromLocalFile(str(target)))
