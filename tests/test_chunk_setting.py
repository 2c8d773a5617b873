"""The "Longest chunk" setting: the dialog stores it and file jobs reach the engine with it."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")


from app import settings as S  # noqa: E402
from app.settings import Settings  # noqa: E402
from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401  (fixtures, found by name)




def _window(qtbot, client, tmp_path, chunk_seconds: int):
    return open_main_window(qtbot, client, tmp_path, MAX_CHUNK_SECONDS=chunk_seconds)


_wav = silent_wav


def _submitted_chunk_seconds(window, qtbot, client, path):
    [job_id] = window.add_paths([path])
    qtbot.waitUntil(lambda: window.queue.model.item(job_id).state == "done", timeout=5000)
    [job] = [j for j in client.worker.engine.jobs if j.source == str(path)]
    return job.max_chunk_seconds


def test_setting_reaches_submit_file(qtbot, client, tmp_path):
    window = _window(qtbot, client, tmp_path, 4)
    assert _submitted_chunk_seconds(window, qtbot, client, _wav(tmp_path, "a.wav")) == 4
    # A changed setting applies to files queued afterwards; 0 leaves it to the engine.
    window.settings.set(S.MAX_CHUNK_SECONDS, 0)
    window.apply_settings()
    assert _submitted_chunk_seconds(window, qtbot, client, _wav(tmp_path, "b.wav")) is None


def test_automatic_by_default(qtbot, client, tmp_path):
    window = _window(qtbot, client, tmp_path, 0)
    assert _submitted_chunk_seconds(window, qtbot, client, _wav(tmp_path, "a.wav")) is None


def test_settings_dialog_saves_and_shows_it(qtbot):
    from app.settings.settings_dialog import SettingsDialog

    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    assert dialog.chunk_spin.value() == 0 and dialog.chunk_spin.text() == "Automatic"
    assert (dialog.chunk_spin.minimum(), dialog.chunk_spin.maximum()) == (0, 1200)   # engine.arguments
    dialog.chunk_spin.setValue(4)
    assert dialog.chunk_spin.text() == "4 s"
    dialog.accept()
    assert Settings().get(S.MAX_CHUNK_SECONDS) == 4

    again = SettingsDialog(Settings())
    qtbot.addWidget(again)
    assert again.chunk_spin.value() == 4
    again.chunk_spin.setValue(0)
    again.accept()
    assert Settings().get(S.MAX_CHUNK_SECONDS) == 0
