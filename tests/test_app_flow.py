"""End-to-end UI flows on the real engine with the tiny random checkpoint.

A random model writes gibberish, but real gibberish: every file goes through
decoding, VAD, the batched step loop and the exporters exactly as in use.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402

from app import settings as S  # noqa: E402
from app.backend.engine_client import EngineClient  # noqa: E402
from app.settings import Settings  # noqa: E402
from app_fixtures import data_dir  # noqa: E402,F401  (autouse fixture, found by name)
from app_fixtures import real_engine_window  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
WAIT_MS = 60_000


@pytest.fixture
def window(qtbot, tiny_model_dir, data_dir):
    with real_engine_window(qtbot, {S.MODEL: str(tiny_model_dir)}, wait_ms=WAIT_MS) as w:
        yield w


def _long_wav(path: Path, speech_wav: Path, seconds: float) -> Path:
    speech, rate = sf.read(str(speech_wav), dtype="float32")
    reps = int(np.ceil(seconds * rate / len(speech)))
    sf.write(str(path), np.tile(speech, reps)[: int(seconds * rate)], rate)
    return path


def _drop(window, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))


def test_drop_transcribe_export(window, qtbot, speech_wav, tmp_path):
    import srt
    import webvtt

    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(speech_wav, folder / "first.wav")
    shutil.copy(speech_wav, folder / "second.wav")
    (folder / "broken.wav").write_bytes(b"RIFF not really a wave file")
    _drop(window, [folder])
    model = window.queue.model
    assert sorted(i.name for i in model.items) == ["broken.wav", "first.wav", "second.wav"]
    qtbot.waitUntil(lambda: all(i.state in ("done", "failed") for i in model.items), timeout=WAIT_MS)
    states = {i.name: i.state for i in model.items}
    assert states == {"broken.wav": "failed", "first.wav": "done", "second.wav": "done"}
    broken = next(i for i in model.items if i.name == "broken.wav")
    assert "broken.wav" in broken.error

    # The finished file's transcript is in the view and in the history.
    first = next(i for i in model.items if i.name == "first.wav")
    window.queue_panel.table.selectRow(model.row_of(first.job_id))
    view = window.transcript_view
    assert view.model.file_id == first.job_id
    assert view.title.text() == "first.wav"
    assert view.model.transcript.text == first.transcript.text
    assert window.history.get_transcript(first.job_id).to_dict() == first.transcript.to_dict()

    from app.export.export_actions import CHOICES

    window.settings.set(S.EXPORT_DIR, str(tmp_path / "out"))
    written = []
    for choice in CHOICES[:5]:
        written += window.export_selected(choice)
    names = sorted(p.name for p in written)
    # Karaoke VTT has a name of its own: it no longer replaces the plain one (issue 15).
    assert names == ["first.json", "first.karaoke.vtt", "first.srt", "first.txt", "first.vtt"]
    list(srt.parse((tmp_path / "out/first.srt").read_text("utf-8")))
    webvtt.read(str(tmp_path / "out/first.vtt"))
    data = json.loads((tmp_path / "out/first.json").read_text("utf-8"))
    assert data["duration"] == pytest.approx(first.transcript.duration, abs=0.01)


def test_cancel_mid_run_leaves_others_running(window, qtbot, speech_wav, tmp_path):
    long_file = _long_wav(tmp_path / "long.wav", speech_wav, 600.0)
    short = tmp_path / "short.wav"
    shutil.copy(speech_wav, short)
    ids = window.add_paths([long_file, short])
    model = window.queue.model
    qtbot.waitUntil(lambda: model.item(ids[0]).state == "running", timeout=WAIT_MS)
    window.queue.cancel([ids[0]])
    qtbot.waitUntil(lambda: model.item(ids[0]).state == "cancelled", timeout=WAIT_MS)
    qtbot.waitUntil(lambda: model.item(ids[1]).state == "done", timeout=WAIT_MS)
    assert window.history.get_file(ids[0]).state == "cancelled"
    assert window.history.get_transcript(ids[0]) is None


def test_live_window_shows_committed_text(window, qtbot, speech_wav):
    from engine.audio.recorder import FileSource

    live = window.open_live_window()
    qtbot.addWidget(live)
    live.record_check.setChecked(False)
    assert live.start_source(FileSource(str(speech_wav), speed=8.0))
    qtbot.waitUntil(lambda: live.source is None, timeout=WAIT_MS)      # the file ran out
    qtbot.waitUntil(lambda: live.stream_id is None, timeout=WAIT_MS)   # the stream finished
    assert live.committed, "no committed segments from the stream"
    assert live.committed_text() in live.captions.toPlainText()


def _transcript_count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(str(db), timeout=1.0) as con:
            return con.execute("SELECT COUNT(*) FROM transcripts").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_killed_app_keeps_transcripts_and_requeues(qtbot, tiny_model_dir, speech_wav, tmp_path,
                                                   data_dir):
    files = [shutil.copy(speech_wav, tmp_path / "a_short.wav"),
             _long_wav(tmp_path / "b_long.wav", speech_wav, 900.0),
             shutil.copy(speech_wav, tmp_path / "c_short.wav")]
    data_dir.mkdir(parents=True)
    # One file at a time, so at least one is still unfinished when the first lands.
    (data_dir / "settings.ini").write_text("[transcribe]\nparallel_files=1\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QWEN3_ASR_DATA_DIR=str(data_dir),
               PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "app", "--model", str(tiny_model_dir),
                             *map(str, files)], cwd=str(REPO), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = data_dir / "history.sqlite3"
    try:
        deadline = time.monotonic() + 120
        while _transcript_count(db) < 1:
            assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "no transcript was stored in time"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stderr.close()

    from app.history import History
    from app.main_window import MainWindow
    from app.paths import history_file

    client = EngineClient()  # no model loaded: the restored files must wait, visibly queued
    try:
        w = MainWindow(client, History(history_file()), Settings())
        qtbot.addWidget(w)
        listed = {Path(w.history.get_file(i).path).name for i in w.history_panel.file_ids()}
        assert "a_short.wav" in listed
        queued = {item.name: item.state for item in w.queue.model.items}
        assert "b_long.wav" in queued and "a_short.wav" not in queued
        assert set(queued.values()) <= {"waiting", "queued"}
        assert {Path(r.path).name for r in w.history.unfinished()} == set(queued)
    finally:
        client.shutdown()


def test_self_test_and_version_cli(tiny_model_dir):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-m", "app", "--version"], cwd=str(REPO), env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("qwen3-asr-desktop ")
    out = subprocess.run([sys.executable, "-m", "app", "--self-test", "--model", str(tiny_model_dir)],
                         cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "self-test passed" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "app", "--self-test", "--model", "/nonexistent"],
                         cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "self-test failed" in bad.stderr
