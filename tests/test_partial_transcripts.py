"""Issue 35, while it works: a running file's lines appear as its chunks finish, in the
engine (FileJob.partial_segments) and in the transcript view, read-only until the end."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401

REPO = Path(__file__).resolve().parent.parent
TRAINED = REPO / "tests" / "models" / "qwen3-asr-tiny"


def test_file_job_reports_segments_as_chunks_finish(speech_wav):
    import soundfile as sf

    import engine

    speech, rate = sf.read(str(speech_wav), dtype="float32")
    assert rate == 16000
    gap = np.zeros(int(0.8 * rate), np.float32)
    audio = np.concatenate([speech, gap, speech, gap, speech])
    eng = engine.load(TRAINED, device="cpu", dtype="float32")
    # Chunks no longer than one sentence: three chunks, finishing one after another.
    job = eng.submit_file(audio, max_chunk_seconds=max(2, int(np.ceil(len(speech) / rate + 0.5))))
    seen = []
    for _ in range(10_000):
        if job.finished:
            break
        eng.step()
        if job.segments_done != (seen[-1] if seen else 0):
            seen.append(job.segments_done)
            lines = job.partial_segments()
            assert [s.start for s in lines] == sorted(s.start for s in lines)
    assert job.state == "done"
    assert len(seen) >= 2 and seen[0] < seen[-1], f"segments arrived only at the end: {seen}"
    # The lines so far are the chunks' texts; the finished transcript says the same words
    # (cut into sentences).
    so_far = " ".join(s.text for s in job.partial_segments())
    assert so_far.split() == job.transcript.text.split()


def test_transcript_view_shows_lines_so_far(qtbot, client, tmp_path):
    import threading

    w = open_main_window(qtbot, client, tmp_path)
    engine = client.worker.engine
    engine.progress_per_step = 0.05
    step, release = engine.step, threading.Event()

    def step_then_hold():   # the engine's thread waits half way until the test has looked
        out = step()
        if any(0.6 <= j.progress < 1.0 for j in engine.jobs):
            release.wait(10)
        return out

    engine.step = step_then_hold
    (job,) = w.add_paths([silent_wav(tmp_path, "talk.wav")])
    w.queue_panel.table.selectRow(0)
    view = w.transcript_view
    from PySide6.QtCore import Qt

    try:
        qtbot.waitUntil(lambda: view.model.rowCount() == 1, timeout=5000)
        assert w.queue.model.item(job).state == "running"
        assert view.model.segments[0].text == "Partly talk."
        assert "so far" in view.details.text()
        assert not view.model.flags(view.model.index(0, 1)) & Qt.ItemFlag.ItemIsEditable, \
            "read-only so far"
    finally:
        release.set()
    qtbot.waitUntil(lambda: w.queue.model.item(job).state == "done", timeout=10_000)
    qtbot.waitUntil(lambda: view.model.file_id == job, timeout=2000)
    assert [s.text for s in view.model.segments] == ["Fake talk.", "Second segment."]


def test_status_counts_only_files_really_running(client, qtbot, tmp_path):
    from app.backend.worker import _Request

    worker = client.worker

    class Job:
        def __init__(self, state):
            self.state = state

    worker._requests = {1: _Request("/a", None, "", False, job=Job("running")),
                        2: _Request("/b", None, "", False, job=Job("queued")),
                        3: _Request("/c", None, "", False, job=Job("queued")),
                        4: _Request("/d", None, "", False)}
    assert worker._busy_text() == "Transcribing 1 file · 2 waiting"   # not started by the engine yet
    worker._requests = {}
