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


def test_settings_show_the_loaded_models_own_length(qtbot, tmp_path):
    """Automatic means the model's own chunk length (Engine.default_chunk_seconds); Settings say which."""
    import fake_engine
    from app.backend.engine_client import EngineClient
    from app.settings.settings_dialog import SettingsDialog

    def load(model_dir, device=None, dtype=None, *, aligner=None, **_):
        eng = fake_engine.load(model_dir, device, dtype, aligner=aligner)
        eng.default_chunk_seconds = 12.0          # as the tiny test model's folder declares
        return eng

    client = EngineClient(load)
    try:
        client.load_model(str(tmp_path))
        qtbot.waitUntil(lambda: client.model_dir != "", timeout=10000)
        assert client.model_chunk_seconds == 12.0
        dialog = SettingsDialog(Settings(), model_chunk_seconds=client.model_chunk_seconds)
        qtbot.addWidget(dialog)
        assert dialog.chunk_spin.value() == 0 and dialog.chunk_spin.text() == "Automatic (this model: 12 s)"
        dialog.chunk_spin.setValue(20)             # a value the user gives wins
        assert dialog.chunk_spin.text() == "20 s"
    finally:
        client.shutdown()
