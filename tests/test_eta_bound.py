"""Issue 35: the queue's time left is bounded by this machine's measured speed, kept between
runs, and never spills out of its progress bar."""
from __future__ import annotations

import pytest

from app.queue.eta import MachineSpeed, bounded

pytest.importorskip("pytestqt")

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401


def test_an_absurd_estimate_is_bounded_by_the_audio_left():
    raw = [22324 * 3600.0]   # what the queue once said for a file of a few minutes
    unknown = MachineSpeed()
    assert bounded(raw[-1], 240.0, 0.1, unknown) == pytest.approx(0.9 * 240 / 0.1 + 60)   # 37 min
    measured = MachineSpeed()
    measured.record(240.0, 240.0)   # this machine: real time
    assert measured.value == 1.0
    assert bounded(raw[-1], 240.0, 0.1, measured) == pytest.approx(0.9 * 240 * 4 + 60)
    assert bounded(-1.0, 240.0, 0.1, measured) == -1.0, "unknown stays unknown"
    assert bounded(30.0, 240.0, 0.1, measured) == 30.0, "a sane estimate is left alone"


def test_the_machine_speed_is_measured_and_kept(qtbot, client, tmp_path):
    from app.settings import Settings
    from app.settings.view_prefs import MACHINE_SPEED

    w = open_main_window(qtbot, client, tmp_path)
    (job,) = w.add_paths([silent_wav(tmp_path, "talk.wav")])
    qtbot.waitUntil(lambda: w.queue.model.item(job).state == "done", timeout=5000)
    qtbot.waitUntil(lambda: Settings().get(MACHINE_SPEED) > 0, timeout=2000)
    assert client.worker.speed.value == pytest.approx(Settings().get(MACHINE_SPEED))


def test_time_left_never_overflows_the_bar(qtbot):
    from PySide6.QtWidgets import QWidget

    from app.queue.queue_model import QueueItem
    from app.queue.queue_view import fit_progress_text, progress_text

    metrics = QWidget().fontMetrics()
    item = QueueItem(1, "/a.wav", state="running", progress=0.1, eta=2 * 3600 + 41 * 60)
    text = progress_text(item)
    assert text == "10% · 2:41:00 left"
    wide = metrics.horizontalAdvance(text) + 4
    assert fit_progress_text(text, metrics, wide) == text
    assert fit_progress_text(text, metrics, wide - 20) == "10%"
