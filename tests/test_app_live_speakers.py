"""The live window's Speakers toggle opens streams with speaker labels and shows each line's speaker."""
from __future__ import annotations

from app_fixtures import client, data_dir  # noqa: F401 (fixtures: data_dir keeps settings in tmp_path)


def test_live_window_shows_speaker_labels(client, qtbot, tmp_path):  # noqa: F811
    import numpy as np

    from app.live.live_window import LiveWindow
    from app.settings import Settings
    from engine.audio.recorder import FileSource

    client.load_model(str(tmp_path))
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=5000)
    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.times_check.setChecked(False)
    live.speakers_check.setChecked(True)
    assert client.worker.live_speakers
    audio = (0.1 * np.sin(np.arange(int(3.5 * 16000)) / 5.0)).astype(np.float32)
    assert live.start_source(FileSource(audio, speed=float("inf")))
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=5000)
    lines = live.captions.toPlainText().splitlines()
    assert lines[:3] == ["S1: second 1", "S2: second 2", "S1: second 3"]
    live.speakers_check.setChecked(False)
    assert not client.worker.live_speakers
