"""Edits are never lost and deleting is real: transcript versions, migration, deletion on disk."""
from __future__ import annotations

import os
import sqlite3
import time

from app.history import History
from app.history.history_delete import delete, describe, plan_deletion, prune_recordings
from engine.text.types import Segment, Transcript, Word


def _transcript(text="Hello world.") -> Transcript:
    return Transcript(text=text, language="English", duration=2.0, segments=[
        Segment(0.0, 1.0, text, [Word("Hello", 0.0, 0.4), Word("world.", 0.5, 1.0)], "English",
                timing="aligned")])


def _rows(db, table, file_id) -> int:
    con = sqlite3.connect(str(db))
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table} WHERE "
                           f"{'id' if table == 'files' else 'file_id'} = ?", (file_id,)).fetchone()[0]
    finally:
        con.close()


def test_every_edit_and_the_recognised_text_are_kept_as_versions(tmp_path):
    h = History(tmp_path / "h.db")
    fid = h.add_file("/a.wav")
    h.save_transcript(fid, _transcript())
    h.update_segment_text(fid, 0, "Hello there world.")
    h.update_segment_text(fid, 0, "Hi there world.")
    versions = h.versions.list(fid)
    assert [v.kind for v in versions] == ["recognised", "edited", "edited"]
    assert [v.transcript.text for v in versions] == ["Hello world.", "Hello there world.",
                                                     "Hi there world."]
    # transcribing again keeps the edited version: it is still there after the new text
    h.save_transcript(fid, _transcript("Hello word."))
    assert h.get_transcript(fid).text == "Hello word." and not h.is_edited(fid)
    assert "Hi there world." in [v.transcript.text for v in h.versions.list(fid)]
    # restoring makes the old text current and adds a version instead of dropping one
    edited = h.versions.list(fid)[2]
    h.restore_version(fid, edited.id)
    assert h.get_transcript(fid).text == "Hi there world." and h.is_edited(fid)
    assert [v.kind for v in h.versions.list(fid)][-1] == "restored"
    assert len(h.versions.list(fid)) == 5
    h.close()
    assert len(History(tmp_path / "h.db").versions.list(fid)) == 5


def test_a_database_from_before_versions_is_migrated_in_place(tmp_path):
    db = tmp_path / "old.db"
    con = sqlite3.connect(str(db))
    con.executescript("""
        CREATE TABLE files (id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'queued', language TEXT, context TEXT NOT NULL DEFAULT '',
            added_at REAL NOT NULL, finished_at REAL, error TEXT);
        CREATE TABLE transcripts (file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
            json TEXT NOT NULL, edited INTEGER NOT NULL DEFAULT 0, saved_at REAL NOT NULL);
    """)
    import json
    for fid, edited in ((1, 0), (2, 1)):
        con.execute("INSERT INTO files VALUES (?, ?, 'done', NULL, '', 1.0, 2.0, NULL)",
                    (fid, f"/{fid}.wav"))
        con.execute("INSERT INTO transcripts VALUES (?, ?, ?, 2.0)",
                    (fid, json.dumps(_transcript(f"Text {fid}.").to_dict()), edited))
    con.commit()
    con.close()
    h = History(db)
    assert [(v.kind, v.transcript.text) for v in h.versions.list(1)] == [("recognised", "Text 1.")]
    assert [(v.kind, v.transcript.text) for v in h.versions.list(2)] == [("edited", "Text 2.")]
    h.close()
    h = History(db)   # a second open does not migrate twice
    assert len(h.versions.list(1)) == 1
    assert h._db.execute("PRAGMA user_version").fetchone()[0] == 2


def test_deleting_entries_removes_rows_versions_and_recordings_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(tmp_path / "data"))
    from app.paths import recordings_dir

    recordings_dir().mkdir(parents=True)
    recording = recordings_dir() / "live-20260101-120000.wav"
    recording.write_bytes(b"RIFF" + bytes(2000))
    users_file = tmp_path / "talk.wav"
    users_file.write_bytes(b"RIFF" + bytes(100))
    db = tmp_path / "h.db"
    h = History(db)
    live, talk, kept = h.add_file(recording), h.add_file(users_file), h.add_file("/other.wav")
    for fid in (live, talk, kept):
        h.save_transcript(fid, _transcript())
    h.update_segment_text(talk, 0, "Hello again world.")
    plan = plan_deletion(h, [live, talk])
    assert (plan.transcripts, plan.versions, plan.recordings) == (2, 3, [recording])
    question = describe(plan)
    assert "2 transcripts" in question and "3 saved versions" in question
    assert "1 recording" in question and "stay where they are" in question
    assert delete(h, plan) == []
    h.close()
    for fid in (live, talk):
        for table in ("files", "transcripts", "transcript_versions"):
            assert _rows(db, table, fid) == 0, f"{table} still holds file {fid}"
    assert _rows(db, "transcript_versions", kept) == 1
    assert not recording.exists(), "the live recording is still on disk"
    on_disk = b"".join(f.read_bytes() for f in tmp_path.glob("h.db*"))
    assert b"Hello again world" not in on_disk, "the deleted text can still be read in the files"
    assert b"Hello world" in on_disk   # the entry that was kept
    assert users_file.exists(), "a file the user added was deleted"


def test_recordings_older_than_n_days_are_deleted(tmp_path):
    old, new = tmp_path / "live-old.wav", tmp_path / "live-new.wav"
    for path in (old, new):
        path.write_bytes(b"x")
    ten_days_ago = time.time() - 10 * 24 * 3600
    os.utime(old, (ten_days_ago, ten_days_ago))
    assert prune_recordings(0, tmp_path) == [] and old.exists()
    assert prune_recordings(7, tmp_path) == [old]
    assert not old.exists() and new.exists()


def test_transcribed_as_finds_the_same_file_only_when_it_has_a_transcript(tmp_path):
    h = History(tmp_path / "h.db")
    audio = tmp_path / "talk.wav"
    audio.write_bytes(b"x")
    queued = h.add_file(audio)
    assert h.transcribed_as(audio) == []
    h.save_transcript(queued, _transcript())
    assert [r.id for r in h.transcribed_as(str(tmp_path / "." / "talk.wav"))] == [queued]
