"""Turn given paths (files and folders) into the audio files to transcribe, with reasons for the rest.

Shared by the app (drops, "Add files", the watch folder) and the CLI, so a folder means the
same files everywhere."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILES = 5000  # a dropped home folder should not freeze the app while walking it


@dataclass
class Collected:
    """``accepted``: resolved audio files, in order, each once; ``refused``: (path, reason)."""

    accepted: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)


def supported_extensions() -> frozenset[str]:
    from engine.audio.decode import SUPPORTED_EXTENSIONS

    return frozenset(SUPPORTED_EXTENSIONS)


def audio_files_in(folder, extensions: frozenset[str] | None = None) -> list[Path]:
    """Audio files under ``folder``, recursively and sorted; hidden files and folders are skipped
    (editors and downloaders keep their temporary files there)."""
    extensions = extensions if extensions is not None else supported_extensions()
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if Path(name).suffix.lower() in extensions and not name.startswith("."):
                found.append(Path(root) / name)
    return found


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
            found = audio_files_in(path, extensions)
            for file in found:
                accept(file)
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
