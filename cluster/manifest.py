"""The archive job's manifest: one JSON line per finished file, so a rerun skips what is done.

The file (``qwen3-asr-manifest.jsonl`` in the output folder) is written only by the driver,
appended and synced line by line: a job killed at any point leaves every earlier line intact,
and a torn last line is ignored when read. A source counts as done when its newest line says
"done", the source still has the size and modification time it had then, the line covers the
formats asked for, and its output files still exist. Failed files are tried again on a rerun.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

MANIFEST_NAME = "qwen3-asr-manifest.jsonl"


def source_key(path) -> str:
    """The manifest's key for an input: its absolute, normalised path."""
    return os.path.normcase(os.path.abspath(os.fsdecode(path)))


def _signature(path) -> dict:
    try:
        st = os.stat(path)
    except OSError:
        return {"size": None, "mtime_ns": None}
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


class Manifest:
    """Reads the records of earlier runs and appends this run's."""

    def __init__(self, out_dir):
        self.path = Path(out_dir) / MANIFEST_NAME
        self.latest: dict[str, dict] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                    self.latest[record["source"]] = record
                except (ValueError, KeyError, TypeError):
                    continue   # a line torn by a crash, or not ours

    def is_done(self, source, formats) -> bool:
        """Whether an earlier run finished ``source`` in all of ``formats`` and its outputs are still there."""
        record = self.latest.get(source_key(source))
        if not record or record.get("state") != "done":
            return False
        sig = _signature(source)
        if sig["size"] is None or (record.get("size"), record.get("mtime_ns")) != (sig["size"], sig["mtime_ns"]):
            return False
        if not set(formats) <= set(record.get("formats") or ()):
            return False
        return all(Path(p).is_file() for p in record.get("outputs") or ())

    def record(self, source, state: str, *, formats=(), outputs=(), error: str = "", worker: str = "",
               seconds: float | None = None) -> dict:
        """Append one line for ``source`` and sync it to disk."""
        entry = {"source": source_key(source), **_signature(source), "state": state, "formats": list(formats),
                 "outputs": [str(p) for p in outputs], "error": error, "worker": worker,
                 "seconds": None if seconds is None else round(seconds, 3),
                 "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.latest[entry["source"]] = entry
        return entry
