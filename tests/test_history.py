"""app.history: durable queue and transcript storage."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from app.history import History, join_segment_texts
from engine.text.types import Segment, Transcript, Word


def _transcript(text="Hello world. Second part.") -> Transcript:
    return Transcript(text=text, language="English", duration=2.0, model="tiny", segments=[
        Segment(0.0, 1.0, "Hello world.", [Word("Hello", 0.0, 0.4), Word("world.", 0.5, 1.0)], "English"),
        Segment(1.0, 2.0, "Second part.", [], "English"),
    ])


def test_queue_states_and_unfinished(tmp_path):
    h = History(tmp_path / "h.db")
    a = h.add_file("/a.wav", "English", "names: Ada")
    b = h.add_file("/b.wav")
    c = h.add_file("/c.wav")
    h.set_state(b, "running")
    h.set_state(c, "failed", "c.wav: not audio")
    assert [f.id for f in h.unfinished()] == [a, b]
    rec = h.get_file(a)
    assert (rec.language, rec.context, rec.state) == ("English", "names: Ada", "queued")
    failed = h.get_file(c)
    assert failed.error == "c.wav: not audio" and failed.finished_at is not None
    with pytest.raises(ValueError):
        h.set_state(a, "exploded")


def test_transcripts_roundtrip_and_edit(tmp_path):
    h = History(tmp_path / "h.db")
    fid = h.add_file("/a.wav")
    h.save_transcript(fid, _transcript())
    assert h.get_file(fid).state == "done"
    assert h.unfinished() == []
    [rec] = h.list_transcripts()
    assert rec.transcript == _transcript() and not rec.edited
    edited = h.update_segment_text(fid, 1, "Changed text.")
    assert edited.text == "Hello world. Changed text."
    h.close()
    again = History(tmp_path / "h.db")
    [rec] = again.list_transcripts()
    assert rec.edited and rec.transcript.segments[1].text == "Changed text."
    assert rec.transcript.segments[0].words[1] == Word("world.", 0.5, 1.0)
    with pytest.raises(IndexError):
        again.update_segment_text(fid, 5, "x")


def test_edit_keeps_word_times_and_spreads_them_when_the_word_count_changes(tmp_path):
    h = History(tmp_path / "h.db")
    fid = h.add_file("/a.wav")
    t = _transcript()
    t.segments[0].timing = "aligned"
    h.save_transcript(fid, t)
    fixed = h.update_segment_text(fid, 0, "Hullo world!")
    assert fixed.segments[0].words == [Word("Hullo", 0.0, 0.4), Word("world!", 0.5, 1.0)]
    assert fixed.segments[0].timing == "aligned"
    rewritten = h.update_segment_text(fid, 0, "Something else entirely")
    words = rewritten.segments[0].words
    assert [w.text for w in words] == ["Something", "else", "entirely"]
    assert words[0].start == 0.0 and words[-1].end <= 1.0 and words[-1].end > 0.8
    assert all(a.end <= b.start for a, b in zip(words, words[1:]))
    assert rewritten.segments[0].timing == "estimated"
    untimed = h.update_segment_text(fid, 1, "No words here, still none.")
    assert untimed.segments[1].words == []


def test_wal_and_full_sync(tmp_path):
    h = History(tmp_path / "h.db")
    assert h._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert h._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_commits_survive_kill(tmp_path):
    """A process that saves and is killed -9 before closing leaves the data readable."""
    db = tmp_path / "h.db"
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.getcwd()!r})
        from app.history import History
        from engine.text.types import Transcript
        h = History({str(db)!r})
        fid = h.add_file("/a.wav")
        h.save_transcript(fid, Transcript(text="kept", language=None, duration=1.0))
        h.update_segment_text  # keep the connection open
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    [rec] = History(db).list_transcripts()
    assert rec.transcript.text == "kept"


def test_join_segment_texts_cjk():
    t = Transcript(text="", language="Chinese", duration=1.0, segments=[
        Segment(0, 1, "你好。"), Segment(1, 2, "世界"), Segment(2, 3, "OK")])
    assert join_segment_texts(t) == "你好。世界OK"
    t.segments = [Segment(0, 1, "a"), Segment(1, 2, " "), Segment(2, 3, "b")]
    assert join_segment_texts(t) == "a b"


def test_env_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(tmp_path))
    h = History()
    assert h.path == tmp_path / "history.sqlite3"
    assert isinstance(h._db, sqlite3.Connection)
