"""A watch folder without Qt: which new audio files in a folder are ready to transcribe.

A file is ready when it is new (not there when the folder was chosen, not handed out before)
and its size and modification time have not changed for ``settle_seconds``: a recorder or a
copy still writing it keeps changing both. What was handed out is kept in a small JSON file,
so a restart neither loses a queued file nor transcribes one twice. A file that changes after
it was handed out (a new recording under the same name) counts as new once it settles again.

The Qt side (app/watch_folder_service.py) polls this on a timer; tests drive it with a fake clock.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

EXISTING = "existing"   # there when the folder was chosen: not transcribed
QUEUED = "queued"       # handed to the queue; waiting for its transcript
DONE = "done"           # exported
FAILED = "failed"       # transcription or export failed (not retried automatically)


@dataclass(frozen=True)
class Signature:
    size: int
    mtime_ns: int


def _signature(path: Path) -> Signature | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return Signature(st.st_size, st.st_mtime_ns)


class WatchState:
    """The watched folder's handed-out files, kept in a JSON file (written atomically)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.folder = ""
        self.files: dict[str, dict] = {}   # resolved path -> {"size", "mtime_ns", "status", "job"}
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.folder = str(data.get("folder", ""))
            self.files = {str(k): dict(v) for k, v in data.get("files", {}).items() if isinstance(v, dict)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, AttributeError) as exc:   # a damaged file: start over, say so
            log.warning("watch folder: ignored the unreadable state file %s (%s)", self.path, exc)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"folder": self.folder, "files": self.files}, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)

    def record(self, path: Path, sig: Signature, status: str, job=None) -> None:
        self.files[str(path)] = {"size": sig.size, "mtime_ns": sig.mtime_ns, "status": status, "job": job}

    def known(self, path: Path, sig: Signature) -> bool:
        entry = self.files.get(str(path))
        return entry is not None and entry.get("size") == sig.size and entry.get("mtime_ns") == sig.mtime_ns

    def set_status(self, path, status: str, job=None) -> None:
        entry = self.files.get(str(path))
        if entry is not None:
            entry["status"] = status
            if job is not None:
                entry["job"] = job
            self.save()

    def path_of_job(self, job) -> str | None:
        """The watched file a queue job transcribes, until it is exported (a failed one the user
        retries in the queue is exported when it finishes)."""
        return next((p for p, e in self.files.items()
                     if e.get("job") == job and e.get("status") in (QUEUED, FAILED)), None)


class FolderWatcher:
    """Polls one folder (recursively) and returns files that are new and have stopped changing."""

    def __init__(self, folder, state: WatchState, settle_seconds: float = 5.0, clock=time.monotonic,
                 extensions: frozenset[str] | None = None):
        self.folder = Path(folder).resolve()
        self.state = state
        self.settle_seconds = float(settle_seconds)
        self.clock = clock
        self.extensions = extensions
        self._pending: dict[str, tuple[Signature, float]] = {}   # path -> (signature, since when)
        if state.folder != str(self.folder):
            self._baseline()

    def _files(self) -> list[Path]:
        from app.queue.file_collect import audio_files_in

        if not self.folder.is_dir():
            return []
        return [p.resolve() for p in audio_files_in(self.folder, self.extensions)]

    def _baseline(self) -> None:
        """A newly chosen folder: what is in it already is the user's old audio, not new audio."""
        self.state.folder = str(self.folder)
        self.state.files = {}
        for path in self._files():
            sig = _signature(path)
            if sig is not None:
                self.state.record(path, sig, EXISTING)
        self.state.save()

    def poll(self) -> list[Path]:
        """New files whose size and time stayed the same for ``settle_seconds`` (each once)."""
        now = self.clock()
        ready, present = [], set()
        for path in self._files():
            key = str(path)
            present.add(key)
            sig = _signature(path)
            if sig is None or self.state.known(path, sig):
                self._pending.pop(key, None)
                continue
            seen = self._pending.get(key)
            if seen is None or seen[0] != sig:
                self._pending[key] = (sig, now)   # new, or still growing: the settle time starts again
                continue
            if sig.size > 0 and now - seen[1] >= self.settle_seconds:
                ready.append(path)
        for key in [k for k in self._pending if k not in present]:   # deleted or moved away meanwhile
            del self._pending[key]
        for path in ready:
            self._pending.pop(str(path), None)
        return ready

    def handed_out(self, path: Path, job=None) -> None:
        """Record that ``path`` went to the queue (saved at once: a crash must not queue it again)."""
        sig = _signature(path) or Signature(-1, -1)
        self.state.record(path, sig, QUEUED, job)
        self.state.save()

    def queued(self) -> dict[str, object]:
        """Files handed out whose transcript has not been exported yet: path -> job id."""
        return {p: e.get("job") for p, e in self.state.files.items() if e.get("status") == QUEUED}
