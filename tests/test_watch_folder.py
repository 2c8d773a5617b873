"""The watch folder: new audio is queued once it stops changing, exported in the chosen formats,
and never transcribed twice, also across restarts (a fake clock drives the Qt-free watcher)."""
from __future__ import annotations

import os

import pytest
from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: F401

from app.watch.watch_folder import DONE, EXISTING, FolderWatcher, WatchState

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def folder(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "old.wav").write_bytes(b"RIFF" + bytes(100))
    return inbox


def test_only_new_files_are_ready_once_they_stop_changing_and_only_once(folder, tmp_path):
    clock, state = Clock(), WatchState(tmp_path / "state.json")
    watcher = FolderWatcher(folder, state, settle_seconds=5, clock=clock)
    assert state.files[str((folder / "old.wav").resolve())]["status"] == EXISTING
    assert watcher.poll() == []

    new = folder / "meeting.wav"
    new.write_bytes(b"RIFF" + bytes(10))
    (folder / "notes.txt").write_text("not audio")
    (folder / ".recording.wav").write_bytes(b"hidden temp file")
    assert watcher.poll() == []                   # just seen
    clock.now += 3
    with open(new, "ab") as f:                    # still being written: the wait starts again
        f.write(bytes(1000))
    assert watcher.poll() == []
    clock.now += 4
    assert watcher.poll() == [], "4 s after its last change is not 5 s"
    clock.now += 1.5
    assert watcher.poll() == [new.resolve()]
    watcher.handed_out(new.resolve(), job=7)
    clock.now += 60
    assert watcher.poll() == [], "never handed out twice"
    assert watcher.queued() == {str(new.resolve()): 7}


def test_an_empty_file_is_not_ready(folder, tmp_path):
    clock = Clock()
    watcher = FolderWatcher(folder, WatchState(tmp_path / "state.json"), settle_seconds=1, clock=clock)
    (folder / "empty.wav").write_bytes(b"")
    watcher.poll()
    clock.now += 10
    assert watcher.poll() == []


def test_a_restart_remembers_what_was_handed_out_and_finds_what_came_meanwhile(folder, tmp_path):
    clock = Clock()
    first = FolderWatcher(folder, WatchState(tmp_path / "state.json"), settle_seconds=2, clock=clock)
    talk = folder / "talk.wav"
    talk.write_bytes(b"RIFF" + bytes(50))
    first.poll()
    clock.now += 3
    [ready] = first.poll()
    first.handed_out(ready, job=1)
    first.state.set_status(ready, DONE)

    (folder / "sub").mkdir()
    later = folder / "sub" / "while closed.flac"     # arrived while the app was closed
    later.write_bytes(b"fLaC" + bytes(50))
    again = FolderWatcher(folder, WatchState(tmp_path / "state.json"), settle_seconds=2, clock=clock)
    assert again.poll() == []
    clock.now += 3
    assert again.poll() == [later.resolve()], "old.wav stays untouched, talk.wav is not done twice"

    talk.write_bytes(b"RIFF" + bytes(80))             # a new recording under the same name
    again.poll()
    clock.now += 3
    assert talk.resolve() in again.poll()


def test_a_damaged_state_file_starts_over_without_crashing(folder, tmp_path):
    (tmp_path / "state.json").write_text("{not json")
    watcher = FolderWatcher(folder, WatchState(tmp_path / "state.json"), settle_seconds=1, clock=Clock())
    assert watcher.poll() == [] and str((folder / "old.wav").resolve()) in watcher.state.files


def test_the_app_queues_exports_and_does_not_repeat_after_a_restart(qtbot, client, tmp_path):
    from app import settings as S
    from app.settings import Settings

    inbox, out = tmp_path / "inbox", tmp_path / "exports"
    inbox.mkdir()
    silent_wav(inbox, "before.wav")
    w = open_main_window(qtbot, client, tmp_path, WATCH_DIR=str(inbox), WATCH_OUTPUT_DIR=str(out),
                         WATCH_FORMATS="srt,txt-timestamps", WATCH_SETTLE_SECONDS=0.0)
    assert w.watch_folder.timer.isActive()
    silent_wav(inbox, "new memo.wav")
    assert w.watch_folder.poll() == []            # seen once: is it still changing?
    [job] = w.watch_folder.poll()
    assert w.queue.model.item(job).name == "new memo.wav"
    qtbot.waitUntil(lambda: (out / "new memo.timestamps.txt").exists() and (out / "new memo.srt").exists(),
                    timeout=10000)
    assert len(w.queue.model.items) == 1, "the file that was there before is not transcribed"
    w.close()

    settings = Settings()
    assert settings.get(S.WATCH_DIR) == str(inbox)
    w2 = open_main_window(qtbot, client, tmp_path)
    assert w2.watch_folder.poll() == [] and w2.watch_folder.poll() == []
    assert w2.queue.model.rowCount() == 0


def test_settings_page_keeps_the_watch_folder(qtbot, tmp_path):
    from app import settings as S
    from app.settings import Settings
    from app.settings.settings_dialog import SettingsDialog

    settings = Settings()
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    page = dialog.watch_page
    page.folder_edit.setText(str(tmp_path))
    page.format_checks["srt"].setChecked(False)
    page.format_checks["vtt-karaoke"].setChecked(True)
    dialog.accept()
    assert settings.get(S.WATCH_DIR) == str(tmp_path)
    assert settings.get(S.WATCH_FORMATS) == "vtt-karaoke,txt"
