"""Edits are safe, History is the user's, estimated times show, unrecorded sessions say so.

Against tests/fake_engine.py: every flow a user would notice, read back from the SQLite
database and the folders on disk.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401
from engine.text.types import Segment, Transcript, Word  # noqa: E402


@pytest.fixture
def window(qtbot, client, tmp_path):
    return open_main_window(qtbot, client, tmp_path)


def _done(qtbot, window, name, tmp_path) -> int:
    [job] = window.add_paths([silent_wav(tmp_path, name)])
    qtbot.waitUntil(lambda: window.queue.model.item(job).state == "done", timeout=10000)
    return job


def _count(db: Path, sql: str, *args) -> int:
    con = sqlite3.connect(str(db))
    try:
        return con.execute(sql, args).fetchone()[0]
    finally:
        con.close()


def _edit(window, row: int, text: str) -> None:
    model = window.transcript_view.model
    assert model.setData(model.index(row, 1), text, Qt.ItemDataRole.EditRole)


def test_undo_and_redo_of_an_edit_are_saved_and_shown(qtbot, window, tmp_path):
    job = _done(qtbot, window, "talk.wav", tmp_path)
    assert window.transcript_view.model.file_id == job
    assert [k.toString() for k in window.undo_action.shortcuts()] == ["Ctrl+Z"]
    assert "Ctrl+Shift+Z" in [k.toString() for k in window.redo_action.shortcuts()]
    _edit(window, 0, "Fake talk, corrected here.")
    assert window.history.get_transcript(job).segments[0].text == "Fake talk, corrected here."
    seg = window.history.get_transcript(job).segments[0]
    assert len(seg.words) == 4 and seg.timing == "estimated", "the edited segment lost its word times"
    window.undo_action.trigger()
    assert window.history.get_transcript(job).segments[0].text == "Fake talk."
    assert window.transcript_view.model.segments[0].text == "Fake talk."
    assert len(window.history.get_transcript(job).segments[0].words) == 2
    window.redo_action.trigger()
    assert window.transcript_view.model.segments[0].text == "Fake talk, corrected here."
    kinds = [v.kind for v in window.history.versions.list(job)]
    assert kinds == ["recognised", "edited", "edited", "edited"]


def test_transcribe_again_on_an_edited_transcript_asks_and_keeps_the_edit(qtbot, window, tmp_path):
    job = _done(qtbot, window, "talk.wav", tmp_path)
    _edit(window, 1, "My own words.")
    asked = []
    window.history_actions.ask_transcribe_edited = lambda names: asked.append(names) or False
    window.queue_panel.table.selectRow(window.queue.model.row_of(job))
    window.again_action.trigger()
    assert asked == [["talk.wav"]]
    assert window.queue.model.item(job).state == "done", "it was queued although the user said no"
    window.history_actions.ask_transcribe_edited = lambda names: True
    window.again_action.trigger()
    qtbot.waitUntil(lambda: window.queue.model.item(job).state == "done", timeout=10000)
    assert window.history.get_transcript(job).segments[1].text == "Second segment."
    texts = [v.transcript.segments[1].text for v in window.history.versions.list(job)]
    assert "My own words." in texts, "the edited version was lost"


def test_versions_dialog_restores_the_recognised_text(qtbot, window, tmp_path):
    job = _done(qtbot, window, "talk.wav", tmp_path)
    _edit(window, 1, "My own words.")
    dialog = window.history_actions.open_versions(job)
    qtbot.addWidget(dialog)
    assert dialog.list.count() == 2 and "(current)" in dialog.list.item(0).text()
    dialog.list.setCurrentRow(1)
    assert "Second segment." in dialog.preview.toPlainText()
    dialog.restore_button.click()
    assert window.history.get_transcript(job).segments[1].text == "Second segment."
    assert window.transcript_view.model.segments[1].text == "Second segment."
    assert dialog.list.count() == 3


def test_history_delete_asks_what_goes_and_deletes_rows_and_recording(qtbot, window, tmp_path,
                                                                     data_dir):
    from app.paths import recordings_dir

    db = Path(window.history.path)
    a = _done(qtbot, window, "a.wav", tmp_path)
    b = _done(qtbot, window, "b.wav", tmp_path)
    recordings_dir().mkdir(parents=True, exist_ok=True)
    recording = recordings_dir() / "live-20260101-120000.wav"
    recording.write_bytes(b"RIFF" + bytes(4000))
    live = window.save_live_session("hello there", [Segment(0.0, 1.0, "hello there")], recording, 1.0)
    questions = []
    window.history_actions.ask_delete = lambda q: questions.append(q) or True
    window.tabs.setCurrentWidget(window.history_panel)
    panel = window.history_panel
    panel.list.clearSelection()
    for row in range(panel.list.count()):
        if panel.list.item(row).data(Qt.ItemDataRole.UserRole + 20) in (a, live):
            panel.list.item(row).setSelected(True)
    panel.list.setFocus()
    qtbot.keyClick(panel.list, Qt.Key.Key_Delete)
    assert len(questions) == 1
    assert "2 entries" in questions[0] and "2 transcripts" in questions[0]
    assert "recording" in questions[0] and "versions" in questions[0]
    for fid in (a, live):
        assert _count(db, "SELECT COUNT(*) FROM files WHERE id = ?", fid) == 0
        assert _count(db, "SELECT COUNT(*) FROM transcript_versions WHERE file_id = ?", fid) == 0
        assert _count(db, "SELECT COUNT(*) FROM transcripts WHERE file_id = ?", fid) == 0
    assert not recording.exists()
    assert panel.file_ids() == [b] and window.queue.model.item(a) is None
    # clear all: the rest goes, after one question
    window.history_actions.clear_history()
    assert "Delete all 1 entry" in questions[-1]
    assert _count(db, "SELECT COUNT(*) FROM files") == 0 and panel.file_ids() == []


def test_readding_a_file_done_before_offers_its_transcript(qtbot, window, tmp_path):
    job = _done(qtbot, window, "talk.wav", tmp_path)
    db = Path(window.history.path)
    answers = []
    window.history_actions.ask_known_files = lambda records: answers.append(records) or "open"
    assert window.add_paths([tmp_path / "talk.wav"]) == []
    assert [r.id for r in answers[0]] == [job]
    assert window.tabs.currentWidget() is window.history_panel
    assert window.transcript_view.model.file_id == job
    window.history_actions.ask_known_files = lambda records: "again"
    assert window.add_paths([tmp_path / "talk.wav"]) == []
    qtbot.waitUntil(lambda: window.queue.model.item(job).state == "done", timeout=10000)
    assert _count(db, "SELECT COUNT(*) FROM files") == 1, "a duplicate entry was made"


def test_estimated_times_carry_a_marker_and_the_fallback_note_shows_above(qtbot, window):
    note = "word times for 3:00-3:30 could not be aligned; times there are estimated"
    transcript = Transcript(text="One. Two.", language="English", duration=4.0, notes=[note],
                            segments=[Segment(0.0, 1.0, "One.", [Word("One.", 0.1, 0.9)],
                                              timing="aligned"),
                                      Segment(1.5, 3.0, "Two.", timing="estimated")])
    view = window.transcript_view
    view.show_transcript(None, transcript, "", "x.wav")
    model = view.model
    assert model.data(model.index(0, 0)) == "0:00–0:01"
    assert model.data(model.index(1, 0)) == "~0:01–0:03"
    assert "Estimated" in model.data(model.index(1, 0), Qt.ItemDataRole.ToolTipRole)
    assert not view.notes_label.isHidden() and note in view.notes_label.text()
    assert "~" in view.notes_label.text()


def test_unrecorded_live_session_cannot_play_and_exports_to_documents(qtbot, window, tmp_path,
                                                                      monkeypatch):
    from app.widgets import dialog_folders
    from app.export.export_actions import CHOICES

    docs = tmp_path / "Documents"
    docs.mkdir()
    monkeypatch.setattr(dialog_folders, "documents_folder", lambda: str(docs))
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    live = window.save_live_session("hello there", [Segment(0.0, 1.0, "hello there")], None, 1.0)
    window.tabs.setCurrentWidget(window.history_panel)
    window.history_panel.select(live)
    view = window.transcript_view
    assert view.model.file_id == live
    assert not view.play_button.isEnabled()
    assert "not recorded" in view.audio_missing
    if view.player.available:
        assert "not recorded" in view.play_button.toolTip()
    [written] = window.export_selected(CHOICES[0])
    assert written.parent == docs and list(workdir.iterdir()) == []
    # the next save dialog opens where that export went
    assert dialog_folders.export_start_folder(window.settings) == str(docs)


def test_history_context_menu_offers_versions_delete_and_clear(qtbot, window, tmp_path):
    from PySide6.QtWidgets import QMenu

    a = _done(qtbot, window, "a.wav", tmp_path)
    _done(qtbot, window, "b.wav", tmp_path)
    panel = window.history_panel
    panel.select(a)
    menu = QMenu(panel)
    labels = [action.text() for action in panel.context_actions(menu)]
    assert labels == ["Versions…", "Delete entry…", "Clear history…"]
    panel.list.selectAll()
    menu = QMenu(panel)
    assert [action.text() for action in panel.context_actions(menu)] == \
        ["Delete 2 entries…", "Clear history…"]


def test_recordings_older_than_the_setting_are_deleted_at_start(qtbot, client, tmp_path):
    import os
    import time

    from app import settings as S
    from app.history import History
    from app.paths import recordings_dir
    from app.settings import Settings

    recordings_dir().mkdir(parents=True, exist_ok=True)
    old, new = recordings_dir() / "live-old.wav", recordings_dir() / "live-new.wav"
    for path in (old, new):
        silent_wav(recordings_dir(), path.name)
    ten_days_ago = time.time() - 10 * 24 * 3600
    os.utime(old, (ten_days_ago, ten_days_ago))
    history = History(tmp_path / "h.db")
    kept = history.add_file(old)
    history.save_transcript(kept, Transcript("hello", "English", 0.5, [Segment(0.0, 0.5, "hello")]))
    history.close()
    Settings().set(S.DELETE_RECORDINGS_AFTER_DAYS, 7)
    window = open_main_window(qtbot, client, tmp_path)
    assert not old.exists() and new.exists()
    assert window.history_panel.file_ids() == [kept], "the transcript went with the recording"
    window.tabs.setCurrentWidget(window.history_panel)
    window.history_panel.select(kept)
    assert "recording was deleted" in window.transcript_view.audio_missing
    assert not window.transcript_view.play_button.isEnabled()
