"""The transcription history: which files were queued, and what came out.

One SQLite database in the user data folder. Every change is committed at
once with WAL and synchronous=FULL, so a finished transcript or an edit
survives the app being killed (kill -9, power loss after fsync). Files still
queued or running when the app died come back from ``unfinished()``.

No Qt here. One ``History`` object per thread: SQLite connections are not
shared between threads.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from app.history.transcript_versions import EDITED, RECOGNISED, RESTORED, TranscriptVersions
from engine.text.types import Segment, Transcript, Word

log = logging.getLogger(__name__)

STATES = ("queued", "running", "done", "failed", "cancelled")
UNFINISHED = ("queued", "running")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued',
    language TEXT,
    context TEXT NOT NULL DEFAULT '',
    added_at REAL NOT NULL,
    finished_at REAL,
    error TEXT,
    speakers TEXT
);
CREATE TABLE IF NOT EXISTS transcripts (
    file_id INTEGER PRIMARY KEY REFERENCES files(id) ON DELETE CASCADE,
    json TEXT NOT NULL,
    edited INTEGER NOT NULL DEFAULT 0,
    saved_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS files_state ON files(state);
"""


def default_history_path() -> Path:
    from app.paths import history_file

    return history_file()


@dataclass
class FileRecord:
    id: int
    path: str
    state: str
    language: str | None
    context: str
    added_at: float
    finished_at: float | None
    error: str | None
    speakers: str | None = None   # "off", "auto" or a count; None: the Settings default (older entries)


@dataclass
class TranscriptRecord:
    file: FileRecord
    transcript: Transcript
    edited: bool


class History:
    """The history database; ``path`` defaults to ``<data dir>/history.sqlite3``.

    ``app.history.history_open.open_history`` is how the app opens it: a damaged, locked or
    unwritable database there gives a working History and a message instead of an error.
    ``persistent`` is False for a history kept in memory only (nothing is saved), and
    ``unreadable`` lists the ids of stored transcripts that could not be read.
    """

    def __init__(self, path=None, *, busy_timeout: float = 10.0, connection: sqlite3.Connection | None = None):
        self.unreadable: list[int] = []
        self.persistent = connection is None
        if connection is not None:   # an in-memory history (see app.history.history_open)
            self.path = Path(path) if path is not None else Path(":memory:")
            self._db = connection
        else:
            self.path = Path(path) if path is not None else default_history_path()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: autocommit, every statement is its own durable transaction.
            self._db = sqlite3.connect(str(self.path), isolation_level=None, timeout=busy_timeout)
        try:
            self._db.row_factory = sqlite3.Row
            if connection is None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            # deleted rows are overwritten, not left readable in free pages (recordings are private)
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.executescript(_SCHEMA)
            columns = {r["name"] for r in self._db.execute("PRAGMA table_info(files)")}
            if "speakers" not in columns:     # a database from before per-file speaker counts
                self._db.execute("ALTER TABLE files ADD COLUMN speakers TEXT")
            # every transcript's versions; a database from before them is migrated in place
            self.versions = TranscriptVersions(self._db)
            self.versions.migrate()
            if connection is None:   # another program's lock shows here, at open, not at the first save
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("ROLLBACK")
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        self._db.close()

    # -- files ---------------------------------------------------------------
    def add_file(self, path, language: str | None = None, context: str = "", speakers: str | None = None) -> int:
        cur = self._db.execute(
            "INSERT INTO files (path, state, language, context, added_at, speakers) "
            "VALUES (?, 'queued', ?, ?, ?, ?)", (str(path), language or None, context or "", time.time(), speakers))
        return int(cur.lastrowid)

    def get_file(self, file_id: int) -> FileRecord | None:
        row = self._db.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
        return _file(row) if row else None

    def set_state(self, file_id: int, state: str, error: str | None = None) -> None:
        if state not in STATES:
            raise ValueError(f"unknown file state {state!r}; expected one of {STATES}")
        finished = time.time() if state not in UNFINISHED else None
        self._db.execute("UPDATE files SET state = ?, error = ?, finished_at = ? WHERE id = ?",
                         (state, error, finished, file_id))

    def set_options(self, file_id: int, language: str | None, context: str) -> None:
        self._db.execute("UPDATE files SET language = ?, context = ? WHERE id = ?",
                         (language or None, context or "", file_id))

    def set_speakers(self, file_id: int, speakers: str | None) -> None:
        """The file's speaker count: "off", "auto" or a count (app.transcript.speaker_setup)."""
        self._db.execute("UPDATE files SET speakers = ? WHERE id = ?", (speakers, file_id))

    def unfinished(self) -> list[FileRecord]:
        """Files that were queued or running when the app last stopped, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM files WHERE state IN ('queued', 'running') ORDER BY id").fetchall()
        return [_file(r) for r in rows]

    def delete_file(self, file_id: int) -> None:
        self._db.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def delete_files(self, file_ids) -> None:
        """Delete entries with their transcripts and versions, in one durable transaction; the
        text is gone from the database file and its log, not only unlisted."""
        with self._transaction():
            for file_id in file_ids:
                self._db.execute("DELETE FROM files WHERE id = ?", (int(file_id),))
        if self.persistent:   # the write-ahead log still holds the old pages until a checkpoint
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def finished_files(self) -> list[FileRecord]:
        """Every entry that is not queued or running (what "Clear history" deletes)."""
        rows = self._db.execute(
            "SELECT * FROM files WHERE state NOT IN ('queued', 'running') ORDER BY id").fetchall()
        return [_file(r) for r in rows]

    def transcribed_as(self, path) -> list[FileRecord]:
        """Entries of ``path`` (the same file, compared resolved) that have a transcript,
        newest first: re-adding such a file offers that transcript instead of a duplicate."""
        wanted = resolved_path(path)
        return [r for r in self._transcribed() if resolved_path(r.path) == wanted]

    def transcribed_index(self) -> dict[str, FileRecord]:
        """Resolved path -> its newest entry with a transcript (one query for many added files)."""
        index: dict[str, FileRecord] = {}
        for record in self._transcribed():
            index.setdefault(resolved_path(record.path), record)
        return index

    def _transcribed(self) -> list[FileRecord]:
        rows = self._db.execute(
            "SELECT f.* FROM files f JOIN transcripts t ON t.file_id = f.id "
            "ORDER BY f.finished_at DESC, f.id DESC").fetchall()
        return [_file(r) for r in rows]

    # -- transcripts -----------------------------------------------------------
    def save_transcript(self, file_id: int, transcript: Transcript, *, edited: bool = False,
                        kind: str | None = None) -> None:
        """Store the transcript as the current one and as a new version (``kind``: by default
        "edited" or "recognised" after ``edited``), and mark the file done, in one durable
        transaction. Earlier versions stay: see ``versions``."""
        data = json.dumps(transcript.to_dict(), ensure_ascii=False)
        now = time.time()
        with self._transaction():
            self.versions.add(file_id, data, kind or (EDITED if edited else RECOGNISED), now)
            self._db.execute(
                "INSERT INTO transcripts (file_id, json, edited, saved_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(file_id) DO UPDATE SET json = excluded.json, "
                "edited = excluded.edited, saved_at = excluded.saved_at",
                (file_id, data, int(edited), now))
            self._db.execute("UPDATE files SET state = 'done', error = NULL, finished_at = ? "
                             "WHERE id = ?", (now, file_id))

    def get_transcript(self, file_id: int) -> Transcript | None:
        """The stored transcript, or None when there is none or it cannot be read."""
        row = self._db.execute("SELECT json FROM transcripts WHERE file_id = ?",
                               (file_id,)).fetchone()
        return self._parse(file_id, row["json"]) if row else None

    def update_segment_text(self, file_id: int, index: int, text: str) -> Transcript:
        """Replace segment ``index``'s text, rebuild the full text, mark it edited; returns it."""
        transcript = self.get_transcript(file_id)
        if transcript is None:
            raise KeyError(f"no transcript for file {file_id}")
        if not 0 <= index < len(transcript.segments):
            raise IndexError(f"segment {index} out of range (0..{len(transcript.segments) - 1})")
        segment = transcript.segments[index]
        words = words_after_edit(segment.words, text, segment.start, segment.end)
        if segment.words and len(words) != len(segment.words):
            segment.timing = "estimated"   # the word times were spread, not aligned
        segment.words = words
        segment.text = text
        transcript.text = join_segment_texts(transcript)
        self.save_transcript(file_id, transcript, edited=True)
        return transcript

    def set_segment(self, file_id: int, index: int, segment: Segment) -> Transcript:
        """Put a whole segment back (undo and redo of an edit), saved as an edited version."""
        transcript = self.get_transcript(file_id)
        if transcript is None:
            raise KeyError(f"no transcript for file {file_id}")
        if not 0 <= index < len(transcript.segments):
            raise IndexError(f"segment {index} out of range (0..{len(transcript.segments) - 1})")
        transcript.segments[index] = segment
        transcript.text = join_segment_texts(transcript)
        self.save_transcript(file_id, transcript, edited=True)
        return transcript

    def replace_current(self, file_id: int, transcript: Transcript) -> None:
        """Store ``transcript`` as the current one and in its newest version, adding no version: for
        what completes the last saved change (an edited segment's re-aligned word times)."""
        data = json.dumps(transcript.to_dict(), ensure_ascii=False)
        with self._transaction():
            self.versions.replace_latest(file_id, data)
            self._db.execute("UPDATE transcripts SET json = ?, saved_at = ? WHERE file_id = ?",
                             (data, time.time(), file_id))

    def restore_version(self, file_id: int, version_id: int) -> Transcript:
        """Make an earlier version current again; it is saved as a new "restored" version, so
        the one it replaces stays in the list."""
        version = self.versions.get(version_id)
        if version is None or version.file_id != file_id:
            raise KeyError(f"no version {version_id} of file {file_id}")
        self.save_transcript(file_id, version.transcript, edited=True, kind=RESTORED)
        return version.transcript

    def is_edited(self, file_id: int) -> bool:
        row = self._db.execute("SELECT edited FROM transcripts WHERE file_id = ?", (file_id,)).fetchone()
        return bool(row and row["edited"])

    def list_transcripts(self) -> list[TranscriptRecord]:
        """Every stored transcript with its file, newest first."""
        rows = self._db.execute(
            "SELECT f.*, t.json AS tjson, t.edited AS tedited FROM files f "
            "JOIN transcripts t ON t.file_id = f.id ORDER BY f.finished_at DESC, f.id DESC"
        ).fetchall()
        out = []
        for r in rows:   # an unreadable row is skipped and reported; it never hides the readable ones
            transcript = self._parse(r["id"], r["tjson"])
            if transcript is not None:
                out.append(TranscriptRecord(_file(r), transcript, bool(r["tedited"])))
        return out

    def _parse(self, file_id: int, data) -> Transcript | None:
        try:
            return Transcript.from_dict(json.loads(data))
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            if file_id not in self.unreadable:
                self.unreadable.append(file_id)
                log.warning("history: the transcript of file %s cannot be read (%s); it is kept in the "
                            "database but not shown", file_id, exc)
            return None

    def _transaction(self):
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb):
        self.db.execute("COMMIT" if exc_type is None else "ROLLBACK")
        return False


def words_after_edit(words: list[Word], new_text: str, start: float | None = None,
                     end: float | None = None) -> list[Word]:
    """Word timings for an edited segment text.

    Exports build cues from the words when there are any, so stale words would
    undo the edit. When the edit keeps the number of words (typo fixes), each
    new word takes the old word's time. Otherwise the new words are spread over
    the time the old words covered (or ``start``..``end``), in proportion to
    their length: the segment keeps word times, and its caller marks them
    estimated. A segment that had no word times gets none.
    """
    tokens = new_text.split()
    if not words or not tokens:
        return []
    if len(tokens) == len(words):
        return [Word(tok, w.start, w.end, w.speaker) for tok, w in zip(tokens, words)]
    first = min(w.start for w in words) if start is None else min(start, words[0].start)
    last = max(w.end for w in words) if end is None else max(end, words[-1].end)
    weights = [len(tok) + 1 for tok in tokens]   # +1: the gap after each word takes time too
    total, at, out = float(sum(weights)), first, []
    speaker = words[0].speaker
    for tok, weight in zip(tokens, weights):
        step = (last - first) * weight / total
        out.append(Word(tok, round(at, 3), round(at + step * len(tok) / weight, 3), speaker))
        at += step
    return out


def join_segment_texts(transcript: Transcript) -> str:
    """The whole text from segment texts; CJK segments join without spaces."""
    out = ""
    for seg in transcript.segments:
        text = seg.text.strip()
        if not text:
            continue
        if out and not (_is_cjk(out[-1]) or _is_cjk(text[0])):
            out += " "
        out += text
    return out


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (0x3000 <= code <= 0x9FFF) or (0xAC00 <= code <= 0xD7AF) or (0xF900 <= code <= 0xFAFF)


def resolved_path(path) -> str:
    """The absolute, resolved form of a path, to tell whether two paths name one file."""
    try:
        return str(Path(str(path)).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        return str(path)


def _file(row: sqlite3.Row) -> FileRecord:
    return FileRecord(id=row["id"], path=row["path"], state=row["state"],
                      language=row["language"], context=row["context"] or "",
                      added_at=row["added_at"], finished_at=row["finished_at"], error=row["error"],
                      speakers=row["speakers"] if "speakers" in row.keys() else None)


# Modules other screens may import besides this one; the rest are this screen's own
# (tests/test_layers.py).
PUBLIC = ('history_delete', 'transcript_versions')
