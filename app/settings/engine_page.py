"""Settings > Engine: transcribe on this computer, or on a qwen3-asr server (URL and key)."""
from __future__ import annotations

from PySide6.QtWidgets import QButtonGroup, QFormLayout, QLabel, QLineEdit, QRadioButton, QWidget

from app.backend.remote_engine import ENGINE_MODE, SERVER_KEY, SERVER_URL


class EnginePage(QWidget):
    """The Engine tab; ``load(settings)`` and ``save(settings)`` as the dialog's other tabs do."""

    def __init__(self, parent=None):
        super().__init__(parent)
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self.local_radio = QRadioButton("This computer")
        self.server_radio = QRadioButton("Server")
        self.group = QButtonGroup(self)
        self.group.addButton(self.local_radio)
        self.group.addButton(self.server_radio)
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("http://127.0.0.1:8000 (started with: qwen3-asr serve --model …)")
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("The server's API key, if it has one")
        form.addRow("Transcribe on:", self.local_radio)
        form.addRow("", self.server_radio)
        form.addRow("Server address:", self.url_edit)
        form.addRow("API key:", self.key_edit)
        note = QLabel("On a server, files are uploaded to it and live audio is streamed to it; the model "
                      "settings on the Model tab then apply to the server's own command line, not here.")
        note.setWordWrap(True)
        form.addRow(note)
        self.server_radio.toggled.connect(self._enable)

    def _enable(self, on: bool) -> None:
        self.url_edit.setEnabled(on)
        self.key_edit.setEnabled(on)

    def load(self, settings) -> None:
        server = settings.get(ENGINE_MODE) == "server"
        (self.server_radio if server else self.local_radio).setChecked(True)
        self.url_edit.setText(settings.get(SERVER_URL))
        self.key_edit.setText(settings.get(SERVER_KEY))
        self._enable(server)

    def save(self, settings) -> None:
        settings.set(ENGINE_MODE, "server" if self.server_radio.isChecked() else "local")
        settings.set(SERVER_URL, self.url_edit.text().strip() or SERVER_URL.default)
        settings.set(SERVER_KEY, self.key_edit.text().strip())
