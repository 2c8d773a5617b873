"""Fixtures shared by the app's tests against tests/fake_engine.py: import them into a test module.

    from app_fixtures import client, data_dir  # noqa: F401  (pytest finds them by name)
"""
from __future__ import annotations

import contextlib

import pytest

import fake_engine
from app.backend.engine_client import EngineClient


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """Settings, history and logs of every test go to a fresh folder."""
    folder = tmp_path / "data"
    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(folder))
    return folder


@pytest.fixture
def client(qtbot):
    """The app's engine client driving the fake engine on its worker thread."""
    c = EngineClient(fake_engine.load)
    yield c
    c.shutdown()


def open_main_window(qtbot, client, tmp_path, **settings_values):
    """The main window with tmp_path as its model (the fake engine takes any folder), shown and
    started, once the model is loaded. ``settings_values``: Settings keys by their name in
    app.settings (e.g. MAX_CHUNK_SECONDS=4), set before the window reads them."""
    from app import settings as S
    from app.history import History
    from app.main_window import MainWindow
    from app.settings import Settings

    settings = Settings()
    settings.set(S.MODEL, str(tmp_path))
    for name, value in settings_values.items():
        settings.set(getattr(S, name), value)
    w = MainWindow(client, History(tmp_path / "h.db"), settings)
    qtbot.addWidget(w)
    w.show()
    w.start()
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=5000)
    return w


@contextlib.contextmanager
def real_engine_window(qtbot, settings: dict, *, wait_ms: int = 60_000):
    """The main window on the real engine (its own EngineClient), its history in the data folder,
    shown and started, once its engine is ready; the client is shut down after.
    ``settings``: values by their Settings key (e.g. {S.MODEL: "...", S.PARALLEL_FILES: 1})."""
    from app.history import History
    from app.main_window import MainWindow
    from app.paths import history_file
    from app.settings import Settings

    client = EngineClient()
    values = Settings()
    for key, value in settings.items():
        values.set(key, value)
    try:
        w = MainWindow(client, History(history_file()), values)
        qtbot.addWidget(w)
        w.show()
        w.start()
        qtbot.waitUntil(lambda: client.model_dir != "", timeout=wait_ms)
        yield w
    finally:
        client.shutdown()


def silent_wav(folder, name):
    """Half a second of silence as a 16 kHz WAV: enough for the fake engine."""
    import numpy as np
    import soundfile as sf

    path = folder / name
    sf.write(str(path), np.zeros(8000, np.float32), 16000)
    return path
