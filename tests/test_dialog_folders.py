"""Every file dialog opens in the home folder at first, then where the user last chose something.

Qt's default was the process's working directory ("/" or the install folder for a desktop
launch). The dialogs are replaced by fakes that record the folder they were asked to open in.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtWidgets import QFileDialog, QPushButton  # noqa: E402

from app import settings as S  # noqa: E402
from app.settings import Settings  # noqa: E402
from app_fixtures import client, data_dir  # noqa: E402,F401  (fixtures, found by name)
from test_app_first_use import _wav  # noqa: E402

HOME = str(Path.home())


class FakeDialogs:
    """QFileDialog's static methods: each call is recorded, and answers ``self.answer``."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[str, str, str, str]] = []   # (method, title, folder, filter)
        self.answer = ""
        for name in ("getOpenFileName", "getOpenFileNames", "getSaveFileName",
                     "getExistingDirectory"):
            monkeypatch.setattr(QFileDialog, name, staticmethod(self._fake(name)))

    def _fake(self, name):
        def fake(parent=None, caption="", directory="", filter="", *args, **kwargs):
            self.calls.append((name, caption, directory, filter))
            if name == "getExistingDirectory":
                return self.answer
            if name == "getOpenFileNames":      # Qt returns no list entries when cancelled
                return ([self.answer] if self.answer else [], "")
            return (self.answer, "")
        return fake

    def folder(self) -> str:
        """The folder the last dialog opened in (a save dialog's start is a file name in it)."""
        name, _, directory, _ = self.calls[-1]
        return str(Path(directory).parent) if name == "getSaveFileName" else directory


@pytest.fixture
def dialogs(monkeypatch):
    return FakeDialogs(monkeypatch)


def _chosen_folder(tmp_path, name) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


def _live(client):
    from app.live.live_window import LiveWindow

    return LiveWindow(client, Settings())


def test_play_a_file_as_live_input_opens_at_home_then_the_last_folder_with_the_media_filter(
        qtbot, client, dialogs, tmp_path):
    from app.live.input_devices import FILE_ITEM
    from app.main_window import MainWindow
    from app.history import History

    live = _live(client)
    qtbot.addWidget(live)
    live.device_combo.setCurrentIndex(live.device_combo.findData(FILE_ITEM))
    wav = _wav(_chosen_folder(tmp_path, "talks"), "talk.wav")
    dialogs.answer = str(wav)
    live.toggle()          # no model loaded: the file is chosen, then nothing starts
    assert dialogs.calls[-1][1] == "Play a file as live input" and dialogs.folder() == HOME
    live_filter = dialogs.calls[-1][3]
    live.toggle()
    assert dialogs.folder() == str(wav.parent)

    window = MainWindow(client, History(tmp_path / "h.db"), Settings())
    qtbot.addWidget(window)
    dialogs.answer = ""
    window.add_files_dialog()
    assert live_filter == dialogs.calls[-1][3], "the same audio and video files as Add files"
    assert "*.wav" in live_filter and "*.mp4" in live_filter


@pytest.mark.parametrize("which", ["text", "audio"])
def test_live_save_dialogs_open_in_documents_then_the_last_export_folder(qtbot, client, dialogs,
                                                                        tmp_path, which):
    from app.widgets.dialog_folders import documents_folder

    live = _live(client)
    qtbot.addWidget(live)
    live.committed = ["hello there"]
    live.recording_path = _wav(tmp_path, "live-20260101-120000.wav")
    save = live.save_text_dialog if which == "text" else live.save_audio_dialog
    suggested = "live-captions.txt" if which == "text" else live.recording_path.name
    dialogs.answer = str(_chosen_folder(tmp_path, "saved") / f"out-{suggested}")
    save()
    assert dialogs.folder() == documents_folder() and Path(dialogs.calls[-1][2]).name == suggested
    assert Path(dialogs.answer).exists(), "the file was not saved where the user chose"
    save()
    assert dialogs.folder() == str(tmp_path / "saved")
    assert Path(dialogs.calls[-1][2]).name == suggested


def test_choose_a_model_folder_opens_at_home_then_the_last_folder(qtbot, dialogs, tmp_path):
    from app.models.model_manager import ModelManagerDialog

    dialog = ModelManagerDialog("")
    qtbot.addWidget(dialog)
    dialogs.answer = str(_chosen_folder(tmp_path, "models"))
    dialog.choose_folder()
    assert dialogs.calls[-1][1] == "Choose a model folder" and dialogs.folder() == HOME
    dialog.choose_folder()
    assert dialogs.folder() == str(tmp_path), "where the model folder sits, not inside it"


def test_main_window_add_dialogs_open_at_home_then_the_last_folder(qtbot, client, dialogs,
                                                                    tmp_path):
    from app.history import History
    from app.main_window import MainWindow

    window = MainWindow(client, History(tmp_path / "h.db"), Settings())
    qtbot.addWidget(window)
    wav = _wav(_chosen_folder(tmp_path, "talks"), "talk.wav")
    dialogs.answer = str(wav)
    window.add_files_dialog()
    assert dialogs.folder() == HOME and window.queue.model.items[0].path == str(wav)
    dialogs.answer = ""
    window.add_folder_dialog()
    assert dialogs.calls[-1][0] == "getExistingDirectory" and dialogs.folder() == str(wav.parent)


def test_settings_folder_fields_open_at_home_then_the_last_folder_when_empty(
        qtbot, dialogs, tmp_path):
    from app.settings.settings_dialog import SettingsDialog

    settings = Settings()
    settings.set(S.MODEL, "")
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    model_browse, aligner_browse, export_browse = [
        edit.parentWidget().findChild(QPushButton)   # each field's own "Browse…"
        for edit in (dialog.model_edit, dialog.aligner_edit, dialog.export_dir_edit)]
    dialogs.answer = str(_chosen_folder(tmp_path, "models"))
    model_browse.click()
    assert dialogs.calls[-1][1] == "Choose a model folder" and dialogs.folder() == HOME
    assert dialog.model_edit.text() == dialogs.answer
    dialogs.answer = ""   # the user cancels: nothing changes
    aligner_browse.click()
    assert dialogs.folder() == str(tmp_path), "where the model folder sits, not inside it"
    dialog.export_dir_edit.setText(str(tmp_path))
    export_browse.click()
    assert dialogs.folder() == str(tmp_path), "a filled field opens where it points"


def test_choosing_a_model_folder_remembers_where_it_sits_not_the_folder_itself(qtbot, tmp_path, monkeypatch):
    """Else the next "Add files" opened among the model's weight files."""
    from app.widgets import dialog_folders
    from app.settings import Settings

    models = tmp_path / "models"
    (models / "qwen3-asr").mkdir(parents=True)
    settings = Settings()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        staticmethod(lambda *a, **k: str(models / "qwen3-asr")))
    assert dialog_folders.choose_folder(None, "Choose a model folder", settings, remember_parent=True) \
        == str(models / "qwen3-asr")
    assert dialog_folders.start_folder(settings) == str(models)


def test_add_files_opens_the_media_folder_not_the_models_folder(qtbot, client, dialogs, tmp_path):
    """Choosing a model folder in Models must not move where "Add files" opens."""
    from app.widgets import dialog_folders
    from app.models.model_manager import ModelManagerDialog

    media = _chosen_folder(tmp_path, "recordings")
    dialog_folders.remember(str(media / "talk.wav"))
    models = ModelManagerDialog("")
    qtbot.addWidget(models)
    dialogs.answer = str(_chosen_folder(tmp_path, "models"))
    models.choose_folder()
    assert dialog_folders.start_folder() == str(media)
