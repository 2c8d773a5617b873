"""Live sessions in History carry their own recording, and only their own.

Fast: the engine is tests/fake_engine.py; the audio is a made-up tone played as a microphone.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from app_fixtures import client, data_dir  # noqa: E402,F401  (fixtures, found by name)
from test_app_first_use import _window  # noqa: E402

WAIT_MS = 10_000


def _session(live, qtbot, record: bool):
    import numpy as np

    from engine.audio.recorder import FileSource

    live.record_check.setChecked(record)
    audio = (0.1 * np.sin(np.arange(int(3.5 * 16000)) / 5.0)).astype(np.float32)
    assert live.start_source(FileSource(audio, speed=float("inf")))
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=WAIT_MS)


def test_a_recorded_session_keeps_its_audio_and_an_unrecorded_one_after_it_has_none(
        qtbot, client, tmp_path):
    window = _window(qtbot, client, tmp_path)
    live = window.open_live_window()

    _session(live, qtbot, record=True)
    first = window.history.list_transcripts()[0].file.path
    assert first.endswith(".wav") and Path(first).is_file(), first
    assert Path(first) == live.recording_path
    assert live.status.text() == f"Stopped. Audio recorded to {first}."

    _session(live, qtbot, record=False)
    records = window.history.list_transcripts()
    assert len(records) == 2
    second = records[0].file.path
    assert second.startswith("Live captions") and not second.endswith(".wav"), \
        "the unrecorded session was saved with the first session's recording"
    assert live.status.text() == "Stopped."
    assert not live.save_audio_button.isEnabled(), "nothing of this session to save"
    live.close()
