"""Every version of a transcript: the recognised one and each saved edit, in the history database.

An edit, a second transcription or a restore never overwrites what was there before: the
``transcripts`` table holds the current version and ``transcript_versions`` holds all of them,
oldest first. ``History`` owns the SQLite connection and hands it here; this module only knows
the one table. No Qt here.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from engine.text.types import Transcript

RECOGNISED, EDITED, RESTORED = "recognised", "edited", "restored"
KINDS = (RECOGNISED, EDITED, RESTORED)

SCHEMA = """
CREATE TABLE IF NOT EXISTS transcript_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    json TEXT NOT NULL,
    kind TEXT NOT NULL,
    saved_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS transcript_versions_file ON transcript_versions(file_id, id);
"""
SCHEMA_VERSION = 2   # PRAGMA user_version once versions exist; 0 (or 1) = a database from before


@dataclass
class Version:
    """One stored version of a file's transcript.

    Attributes:
        id: the version's row id (increasing: a higher id is a later version).
        file_id: the history entry it belongs to.
        kind: "recognised" (a transcription), "edited" (a saved edit) or "restored" (an older
            version made current again).
        saved_at: when it was saved (seconds since the epoch).
        transcript: the transcript as it was then.
    """

    id: int
    file_id: int
    kind: str
    saved_at: float
    transcript: Transcript


class TranscriptVersions:
    """The ``transcript_versions`` table on ``db`` (a connection History opened)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def migrate(self) -> None:
        """Create the table, and give every transcript saved before versions existed its first
        version (kind "edited" when it had been edited: the recognised text was not kept then)."""
        self.db.executescript(SCHEMA)
        if self.db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(
                "INSERT INTO transcript_versions (file_id, json, kind, saved_at) "
                "SELECT t.file_id, t.json, CASE WHEN t.edited THEN 'edited' ELSE 'recognised' END, "
                "t.saved_at FROM transcripts t WHERE NOT EXISTS "
                "(SELECT 1 FROM transcript_versions v WHERE v.file_id = t.file_id)")
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def add(self, file_id: int, data: str, kind: str, saved_at: float) -> int:
        """Store one version (``data``: the transcript's JSON); the caller holds the transaction."""
        if kind not in KINDS:
            raise ValueError(f"unknown version kind {kind!r}; expected one of {KINDS}")
        cur = self.db.execute("INSERT INTO transcript_versions (file_id, json, kind, saved_at) "
                              "VALUES (?, ?, ?, ?)", (file_id, data, kind, saved_at))
        return int(cur.lastrowid)

    def replace_latest(self, file_id: int, data: str) -> None:
        """Store ``data`` in the file's newest version instead of adding one (the caller holds the
        transaction): word times that arrive after an edit belong to that edit's version."""
        self.db.execute("UPDATE transcript_versions SET json = ? WHERE id = "
                        "(SELECT MAX(id) FROM transcript_versions WHERE file_id = ?)", (data, file_id))

    def list(self, file_id: int) -> list[Version]:
        """The file's versions, oldest first; a version that cannot be read is left out."""
        rows = self.db.execute("SELECT * FROM transcript_versions WHERE file_id = ? ORDER BY id",
                               (file_id,)).fetchall()
        out = []
        for row in rows:
            try:
                transcript = Transcript.from_dict(json.loads(row["json"]))
            except (TypeError, ValueError, KeyError, AttributeError):
                continue
            out.append(Version(row["id"], row["file_id"], row["kind"], row["saved_at"], transcript))
        return out

    def get(self, version_id: int) -> Version | None:
        row = self.db.execute("SELECT * FROM transcript_versions WHERE id = ?",
                              (version_id,)).fetchone()
        if row is None:
            return None
        return Version(row["id"], row["file_id"], row["kind"], row["saved_at"],
                       Transcript.from_dict(json.loads(row["json"])))

    def count(self, file_id: int) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM transcript_versions WHERE file_id = ?",
                                   (file_id,)).fetchone()[0])

    def has_edits(self, file_id: int) -> bool:
        """Whether any saved edit (or restore) exists for the file: re-transcribing it asks first."""
        return self.db.execute("SELECT 1 FROM transcript_versions WHERE file_id = ? AND kind != ? "
                               "LIMIT 1", (file_id, RECOGNISED)).fetchone() is not None


def describe_version(version: Version, number: int) -> str:
    """Two lines for a version list: "3. Edited" and "2026-05-01 14:03:10 · 182 words"."""
    import datetime as _dt

    when = _dt.datetime.fromtimestamp(version.saved_at).strftime("%Y-%m-%d %H:%M:%S")
    words = len((version.transcript.text or "").split())
    return f"{number}. {version.kind.capitalize()}\n{when} · {words} word{'s' if words != 1 else ''}"
