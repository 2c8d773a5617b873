"""Deleting from History for real: the database rows and the recordings the app made.

A plan names what goes before anything is deleted, so the question the user answers says
exactly that: the transcripts, their versions, and the recordings of live sessions (files in
the app's recordings folder). Audio files the user added are theirs and are never deleted.
No Qt here.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

DAY = 24 * 3600


@dataclass
class DeletionPlan:
    """What deleting some History entries removes.

    Attributes:
        file_ids: the entries.
        names: their file names (or live session titles), for the question.
        transcripts: how many of them have a transcript.
        versions: how many transcript versions go with them.
        recordings: the app's own recordings of those entries that are on disk.
    """

    file_ids: list[int]
    names: list[str]
    transcripts: int = 0
    versions: int = 0
    recordings: list[Path] = field(default_factory=list)


def recordings_folder() -> Path:
    from app.paths import recordings_dir

    return recordings_dir()


def is_app_recording(path, folder: Path | None = None) -> bool:
    """Whether ``path`` is a recording the app made (inside its recordings folder)."""
    folder = (folder or recordings_folder()).resolve()
    try:
        return Path(str(path)).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def plan_deletion(history, file_ids) -> DeletionPlan:
    plan = DeletionPlan([], [])
    for file_id in dict.fromkeys(int(i) for i in file_ids):
        record = history.get_file(file_id)
        if record is None:
            continue
        plan.file_ids.append(file_id)
        plan.names.append(Path(record.path).name or record.path)
        if history.get_transcript(file_id) is not None or file_id in history.unreadable:
            plan.transcripts += 1
        plan.versions += history.versions.count(file_id)
        path = Path(record.path)
        if is_app_recording(path) and path.is_file():
            plan.recordings.append(path)
    return plan


def describe(plan: DeletionPlan, *, everything: bool = False) -> str:
    """The question: what will be deleted, and what stays."""
    n = len(plan.file_ids)
    if everything:
        head = f"Delete all {n} entr{'ies' if n != 1 else 'y'} from History?"
    elif n == 1:
        head = f"Delete “{plan.names[0]}” from History?"
    else:
        head = f"Delete {n} entries from History?"
    goes = []
    if plan.transcripts:
        goes.append(f"{plan.transcripts} transcript{'s' if plan.transcripts != 1 else ''}")
    if plan.versions:
        goes.append(f"{plan.versions} saved version{'s' if plan.versions != 1 else ''} "
                    "(the recognised text and every edit)")
    if plan.recordings:
        size = sum(_size(p) for p in plan.recordings) / 1e6
        goes.append(f"{len(plan.recordings)} recording{'s' if len(plan.recordings) != 1 else ''} "
                    f"of live captions ({size:.1f} MB)")
    lines = [head, ""]
    lines.append("This deletes " + _join(goes) + " from this computer." if goes else
                 "This deletes the entries.")
    lines.append("Audio and video files you added stay where they are. This cannot be undone.")
    return "\n".join(lines)


def delete(history, plan: DeletionPlan) -> list[str]:
    """Delete the rows (one transaction), then the recordings; returns what could not be deleted."""
    history.delete_files(plan.file_ids)
    errors = []
    for path in plan.recordings:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            errors.append(f"{path}: {exc.strerror or exc}")
    return errors


def prune_recordings(days: int, folder: Path | None = None, now: float | None = None) -> list[Path]:
    """Delete the app's recordings older than ``days`` days (0: keep them all); returns them.
    Their transcripts stay in History; playing one then says the recording was deleted."""
    if days <= 0:
        return []
    folder = folder or recordings_folder()
    if not folder.is_dir():
        return []
    cutoff = (now if now is not None else time.time()) - days * DAY
    gone = []
    for path in sorted(folder.iterdir()):
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                gone.append(path)
        except OSError as exc:
            log.warning("could not delete the old recording %s: %s", path, exc)
    if gone:
        log.info("deleted %d recording(s) older than %d days", len(gone), days)
    return gone


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
