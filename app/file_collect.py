"""Turn dropped or chosen paths into the audio files to queue, with reasons for the rest."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILES = 5000  # a dropped home folder should not freeze the app while walking it


@dataclass
class Collected:
    accepted: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)


def supported_extensions() -> frozenset[str]:
    from engine.audio.decode import SUPPORTED_EXTENSIONS

    return frozenset(SUPPORTED_EXTENSIONS)


def collect_audio_files(paths, extensions: frozenset[str] | None = None) -> Collected:
    """Files with a supported extension, folders searched recursively (sorted, no duplicates).

    Refused: unsupported files (named with the reason) and missing paths. Files
    inside folders that are not audio are skipped silently: a folder of
    recordings usually also holds notes and pictures.
    """
    extensions = extensions if extensions is not None else supported_extensions()
    out = Collected()
    seen: set[Path] = set()

    def accept(path: Path):
        resolved = path.resolve()
        if resolved not in seen and len(out.accepted) < MAX_FILES:
            seen.add(resolved)
            out.accepted.append(resolved)

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = 0
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if Path(name).suffix.lower() in extensions and not name.startswith("."):
                        accept(Path(root) / name)
                        found += 1
            if not found:
                out.refused.append((path, "the folder holds no audio or video files"))
        elif path.is_file():
            if path.suffix.lower() in extensions:
                accept(path)
            else:
                kind = path.suffix.lower() or "files without an extension"
                out.refused.append((path, f"{kind} is not a supported audio or video format"))
        elif os.path.lexists(path):   # a FIFO, a device (a link to /dev/zero), a socket: the CLI's words
            from engine.audio.decode import path_problem

            out.refused.append((path, path_problem(path) or "cannot be read"))
        else:
            out.refused.append((path, "no such file"))
    return out


def describe_refused(refused: list[tuple[Path, str]], limit: int = 3) -> str:
    """One status-bar line: 'Skipped notes.txt (.txt is not ...), ... and 4 more'."""
    parts = [f"{p.name} ({reason})" for p, reason in refused[:limit]]
    more = len(refused) - limit
    text = "Skipped " + ", ".join(parts)
    return text + (f" and {more} more" if more > 0 else "")
