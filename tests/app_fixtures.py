"""Fixtures shared by the app's tests against tests/fake_engine.py: import them into a test module.

    from app_fixtures import client, data_dir  # noqa: F401  (pytest finds them by name)
"""
from __future__ import annotations

import pytest

import fake_engine
from app.engine_client import EngineClient


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
