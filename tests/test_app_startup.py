"""The app always starts and says what is wrong with its own data: a damaged, locked or
partly unreadable history, hand-edited settings, an unwritable data folder; and a second
start hands its files to the running app instead of running twice."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

import fake_engine  # noqa: E402

from app.history import History  # noqa: E402
from app.main import build_app, parse_args  # noqa: E402
from engine.text.types import Segment, Transcript  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LOCK_HOLDER = ("import sqlite3, sys, time\n"
               "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
               "db.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
               "db.execute('BEGIN EXCLUSIVE')\n"
               "print('locked', flush=True)\n"
               "time.sleep(120)\n")


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(folder))
    return folder


def start(qtbot, qapp):
    """The app as ``python -m app`` builds it (fake engine): window shown, notice if any."""
    window, client = build_app(qapp, parse_args([]), loader=fake_engine.load)
    qtbot.addWidget(window)
    window.show()
    qtbot.wait(50)
    return window, client


def notice_text(qtbot, window) -> str:
    qtbot.waitUntil(lambda: getattr(window, "startup_notice", None) is not None
                    and window.startup_notice.isVisible(), timeout=10_000)
    return window.startup_notice.text()


def saved_history(path: Path, texts: list[str]) -> History:
    history = History(path)
    for text in texts:
        file_id = history.add_file(f"/audio/{text}.wav")
        history.save_transcript(file_id, Transcript(text, "English", 1.0, [Segment(0.0, 1.0, text)]))
    return history


def test_damaged_database_is_moved_aside_and_a_new_one_started(qtbot, qapp, data_dir):
    db = data_dir / "history.sqlite3"
    junk = os.urandom(64 * 1024)
    db.write_bytes(junk)
    window, client = start(qtbot, qapp)
    text = notice_text(qtbot, window)
    kept = [p for p in data_dir.iterdir() if p.name.startswith("history.sqlite3.damaged-20")]
    assert len(kept) == 1 and kept[0].read_bytes() == junk
    assert "damaged" in text and str(kept[0]) in text
    assert window.history.persistent
    window.history.add_file("/audio/new.wav")          # the new history works
    client.shutdown()


def test_unreadable_rows_are_skipped_and_reported_never_dropped(qtbot, qapp, data_dir):
    history = saved_history(data_dir / "history.sqlite3", ["alpha", "beta", "gamma"])
    history._db.execute("UPDATE transcripts SET json = substr(json, 1, 25) WHERE file_id = 2")
    history.close()
    window, client = start(qtbot, qapp)
    text = notice_text(qtbot, window)
    assert "1 saved transcript" in text and "could not be read" in text
    shown = {r.transcript.text for r in window.history.list_transcripts()}
    assert shown == {"alpha", "gamma"}
    assert window.history_panel.list.count() == 2
    rows = sqlite3.connect(data_dir / "history.sqlite3").execute("SELECT count(*) FROM transcripts").fetchone()
    assert rows == (3,)                                   # the damaged row is kept, not deleted
    client.shutdown()


def test_locked_database_waits_then_offers_read_only(qtbot, qapp, data_dir):
    saved_history(data_dir / "history.sqlite3", ["alpha"]).close()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(data_dir / "history.sqlite3")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        window, client = start(qtbot, qapp)
        text = notice_text(qtbot, window)
        buttons = {b.text() for b in window.startup_notice.buttons()}
    finally:
        holder.kill()
        holder.wait()
    assert "locked by another program" in text and "read-only" in text
    assert buttons == {"Continue read-only", "Quit"}
    assert not window.history.persistent
    window.history.add_file("/audio/queued.wav")        # queueing still works, in memory
    client.shutdown()


def test_hand_edited_settings_are_ignored_with_a_log_line(qtbot, qapp, data_dir, caplog):
    (data_dir / "settings.ini").write_text("[window]\ngeometry=garbage\nsplitter=@ByteArray(zz)\n"
                                           "[transcribe]\nparallel_files=lots\nword_timestamps=maybe\n")
    window, client = start(qtbot, qapp)
    assert window.isVisible()
    assert window.queue.parallel == 4                    # the default, not a crash
    logged = caplog.text
    assert "window/geometry='garbage'" in logged
    assert "transcribe/parallel_files='lots'" in logged
    assert "transcribe/word_timestamps='maybe'" in logged
    client.shutdown()


def _read_only_folder(folder: Path):
    """A really read-only folder (bind mount as root), else one under a regular file."""
    folder.mkdir()
    if os.geteuid() == 0 and shutil.which("mount"):
        ok = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True).returncode == 0
        if ok and subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)],
                                 capture_output=True).returncode == 0:
            return folder, lambda: subprocess.run(["umount", str(folder)], capture_output=True)
        if ok:
            subprocess.run(["umount", str(folder)], capture_output=True)
    if os.access(folder, os.W_OK) and os.geteuid() != 0:
        folder.chmod(0o555)
        return folder, lambda: folder.chmod(0o755)
    blocker = folder / "not-a-folder"
    blocker.write_text("")
    return blocker / "data", lambda: None


def test_unwritable_data_folder_names_it_and_runs_without_history(qtbot, qapp, tmp_path, monkeypatch):
    folder, undo = _read_only_folder(tmp_path / "readonly")
    try:
        monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(folder))
        window, client = start(qtbot, qapp)
        text = notice_text(qtbot, window)
        assert str(folder) in text and "cannot be written" in text
        assert not window.history.persistent
        from PySide6.QtWidgets import QLabel

        assert window.findChild(QLabel, "historyNotSaved").text() == "History not saved"
        window.history.add_file("/audio/in-memory.wav")
        client.shutdown()
    finally:
        undo()


def test_second_start_hands_its_files_to_the_running_app(qtbot, qapp, data_dir, tmp_path):
    from app.single_instance import start_or_hand_over

    guard = start_or_hand_over(data_dir, [])
    window, client = start(qtbot, qapp)
    guard.files_received.connect(window.receive_files)
    received = []
    guard.files_received.connect(received.append)
    talk = tmp_path / "talk.wav"
    shutil.copy(REPO / "tests" / "data" / "silence.wav", talk) if (REPO / "tests/data/silence.wav").exists() \
        else _tone(talk)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    second = subprocess.Popen([sys.executable, "-m", "app", str(talk)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    qtbot.waitUntil(lambda: second.poll() is not None, timeout=60_000)
    err = second.stderr.read()
    assert second.returncode == 0, err
    assert "already running" in err
    qtbot.waitUntil(lambda: received == [[str(talk)]], timeout=10_000)
    assert [item.path for item in window.queue.model.items] == [str(talk)]
    guard.close()
    client.shutdown()


def _tone(path: Path) -> None:
    import numpy as np
    import soundfile as sf

    sf.write(str(path), (0.1 * np.sin(np.arange(16000) / 10)).astype(np.float32), 16000)


def test_history_opening_notice_texts(tmp_path):
    from app.history.history_open import open_history

    db = tmp_path / "history.sqlite3"
    db.write_bytes(b"not sqlite at all" * 100)
    opening = open_history(db)
    assert opening.status == "damaged" and opening.moved_to.exists()
    assert json.dumps(opening.notices)   # plain strings, shown as they are
