"""The live window says "behind by N s" when the stream's text lags its audio by more than 2 s."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

import fake_engine  # noqa: E402

from app.settings import Settings  # noqa: E402
from app_fixtures import client, data_dir  # noqa: E402,F401  (fixtures, found by name)




def test_label_shows_only_when_behind(client, qtbot):
    from app.live.live_window import LiveWindow

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.show()
    live.stream_id = 3
    assert not live.lag_label.isVisible()
    live._stream_lag(3, 4.4)
    assert live.lag_label.isVisible() and live.lag_label.text() == "behind by 4 s"
    live._stream_lag(7, 9.0)                      # another stream: ignored
    assert live.lag_label.text() == "behind by 4 s"
    live._stream_lag(3, 1.5)                      # caught up
    assert not live.lag_label.isVisible()
    live._stream_lag(3, 3.0)
    live._stream_finished(3)
    assert not live.lag_label.isVisible()


def test_worker_forwards_the_stream_lag(client, qtbot, tmp_path, monkeypatch):
    import numpy as np

    from app.live.live_window import LiveWindow
    from engine.audio.recorder import FileSource

    monkeypatch.setattr(fake_engine.FakeStream, "LAG_SECONDS", 5.0)
    client.load_model(str(tmp_path))
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=5000)
    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    shown = []
    set_text = live.lag_label.setText
    live.lag_label.setText = lambda text: (shown.append(text), set_text(text))   # what the window showed
    audio = (0.1 * np.sin(np.arange(int(2.5 * 16000)) / 5.0)).astype(np.float32)
    with qtbot.waitSignal(client.worker.stream_lag, timeout=5000) as blocker:
        assert live.start_source(FileSource(audio, speed=float("inf")))
    assert blocker.args[1] == 5.0
    qtbot.waitUntil(lambda: live.stream_id is None, timeout=5000)
    assert "behind by 5 s" in shown
    assert not live.lag_label.isVisible()
