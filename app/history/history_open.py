"""Opening the history so that the app always starts, and saying what was wrong.

- a damaged database (not SQLite, malformed) is moved aside, kept and named with the
  date, and a new one is started;
- a database another program holds locked is waited for briefly, then opened as a
  read-only copy in memory (the user may quit instead);
- an unwritable data folder gives a history in memory only (what is there is shown;
  nothing new is saved).
Rows that cannot be read are skipped by ``History`` itself and listed in ``unreadable``.
No Qt here: the window shows ``HistoryOpening.message``.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from app.history import History

log = logging.getLogger(__name__)

OK, DAMAGED, LOCKED, UNWRITABLE = "ok", "damaged", "locked", "unwritable"


@dataclass
class HistoryOpening:
    history: History
    status: str = OK          # OK, DAMAGED, LOCKED or UNWRITABLE
    message: str = ""         # for the user; empty when all is well
    moved_to: Path | None = None

    @property
    def notices(self) -> list[str]:
        """Everything the user should be told about the history, in order."""
        out = [self.message] if self.message else []
        if self.history.unreadable:
            out.append(unreadable_message(self.history.unreadable))
        return out


def unreadable_message(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:10]) + (" …" if len(ids) > 10 else "")
    return (f"{len(ids)} saved transcript{'s' if len(ids) != 1 else ''} in the history could not be read "
            f"(damaged data; entry {shown}) and {'are' if len(ids) != 1 else 'is'} not shown. "
            f"The other entries are shown; nothing was deleted.")


def open_history(path, *, lock_wait: float = 2.0) -> HistoryOpening:
    """A working History for ``path`` whatever state it is in; see the module doc."""
    path = Path(path)
    folder = path.parent
    problem = _unwritable(folder)
    if problem:
        log.warning("history: data folder %s is not writable (%s); running without history", folder, problem)
        return HistoryOpening(_memory_copy(path, immutable=True), UNWRITABLE,
                              f"The data folder {folder} cannot be written ({problem}). The app runs without "
                              f"saving history: transcripts are kept until you quit. Make the folder writable "
                              f"or set QWEN3_ASR_DATA_DIR to another folder.")
    try:
        return HistoryOpening(History(path, busy_timeout=lock_wait))
    except sqlite3.OperationalError as exc:
        if _is_locked(exc):
            log.warning("history: %s is locked by another program (%s); opening a read-only copy", path, exc)
            return HistoryOpening(_memory_copy(path), LOCKED,
                                  f"The history database {path} is locked by another program (waited "
                                  f"{lock_wait:g} s). It is open read-only: new transcripts are not saved "
                                  f"in the history. Close the other program and restart to save again.")
        if not _is_damaged(exc):
            raise
        damage = exc
    except sqlite3.DatabaseError as exc:
        damage = exc
    moved = move_aside(path)
    log.warning("history: %s is damaged (%s); moved to %s and started a new one", path, damage, moved)
    return HistoryOpening(History(path, busy_timeout=lock_wait), DAMAGED,
                          f"The history database was damaged ({damage}). It was moved aside and kept as "
                          f"{moved}; a new, empty history was started.", moved)


def move_aside(path: Path) -> Path:
    """Rename ``path`` (and its -wal/-shm files) to ``<name>.damaged-YYYY-MM-DD-HHMMSS``; returns the new path."""
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm", "-journal"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target


def _unwritable(folder: Path) -> str:
    """Why ``folder`` cannot hold the history (created if missing), or '' when it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _is_locked(exc: sqlite3.Error) -> bool:
    return "locked" in str(exc).lower() or "busy" in str(exc).lower()


def _is_damaged(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def _memory_copy(path: Path, *, immutable: bool = False) -> History:
    """An in-memory History holding what can still be read from ``path`` (nothing when it
    cannot be read: locked hard, damaged or missing)."""
    memory = sqlite3.connect(":memory:", isolation_level=None)
    if path.exists():
        mode = "immutable=1" if immutable else "mode=ro"
        try:
            source = sqlite3.connect(f"{path.resolve().as_uri()}?{mode}", uri=True, timeout=0.5)
            try:
                # a plain read first: it fails after the busy timeout, where backup() would retry forever
                source.execute("SELECT count(*) FROM sqlite_master").fetchone()
                source.backup(memory)
            finally:
                source.close()
        except sqlite3.Error as exc:
            log.warning("history: cannot read %s (%s); showing an empty history", path, exc)
            memory.close()
            memory = sqlite3.connect(":memory:", isolation_level=None)
    return History(path, connection=memory)
