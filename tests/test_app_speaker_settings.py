"""The Settings choice for speaker labels (Off / Automatic / N) reaches the engine's file jobs."""
from __future__ import annotations


class _RecordingEngine:
    speaker_model = "ge2e.pt"      # prepare_speakers looks no further

    def __init__(self):
        self.calls = []

    def submit_file(self, path, **options):
        self.calls.append(options)
        return object()

    def has_work(self):
        return False


def test_the_settings_combo_reaches_the_engine(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from app.backend.worker import EngineWorker
    from app.settings import Settings
    from app.settings.settings_dialog import SettingsDialog
    from app.transcript.speaker_setup import speakers_setting

    settings = Settings(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    assert dialog.speakers_combo.currentData() == "off"
    worker = EngineWorker()
    worker.engine = _RecordingEngine()
    for choice, expected in (("3", 3), ("auto", "auto"), ("off", None)):
        dialog.speakers_combo.setCurrentIndex(dialog.speakers_combo.findData(choice))
        dialog.save()
        worker.speakers = speakers_setting(settings)      # what MainWindow.apply_settings does
        worker.add_file(len(worker.engine.calls), "talk.wav")
        assert worker.engine.calls[-1].get("speakers") == expected
        reopened = SettingsDialog(settings)
        qtbot.addWidget(reopened)
        assert reopened.speakers_combo.currentData() == choice
