"""Turn dropped or chosen paths into the audio files to queue, with reasons for the rest.

The walk itself lives in engine.audio.collect, shared with the CLI."""
from __future__ import annotations

from pathlib import Path

from engine.audio.collect import (  # noqa: F401 (re-exported for the app)
    MAX_FILES,
    Collected,
    audio_files_in,
    collect_audio_files,
    supported_extensions,
)


def describe_refused(refused: list[tuple[Path, str]], limit: int = 3) -> str:
    """One status-bar line: 'Skipped notes.txt (.txt is not ...), ... and 4 more'."""
    parts = [f"{p.name} ({reason})" for p, reason in refused[:limit]]
    more = len(refused) - limit
    text = "Skipped " + ", ".join(parts)
    return text + (f" and {more} more" if more > 0 else "")
