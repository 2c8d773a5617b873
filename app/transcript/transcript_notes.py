"""What the transcript view tells the user about a transcript's times and audio.

Estimated times (placed on the speech the voice detector found, not aligned word by word)
carry a "~" in the time column and a tooltip; the transcript's notes (a stretch whose word
times could not be aligned, the audio track used, ...) show above the segments; Play says why
it is off when there is no audio to play.
"""
from __future__ import annotations

from pathlib import Path

ESTIMATED_MARK = "~"
ESTIMATED_TIP = ("Estimated time (~): placed on the speech the voice detector found, not aligned "
                 "word by word, so it can be off by a second or so. Load a word aligner "
                 "(Settings ▸ Model) for exact times. Click to play from here.")
ALIGNED_TIP = "Click to play from here"
ESTIMATED_SUMMARY = "Times marked ~ are estimated, not aligned word by word."
LIVE_PREFIX = "Live captions "   # the History name of a live session that was not recorded


def is_estimated(segment) -> bool:
    return getattr(segment, "timing", "aligned") == "estimated"


def notes_text(transcript) -> str:
    """The lines shown above the segments: the transcript's notes, then, when some times are
    estimated, a line that says what the ~ means."""
    if transcript is None:
        return ""
    lines = list(getattr(transcript, "notes", None) or [])
    estimated = sum(1 for seg in transcript.segments if is_estimated(seg))
    if estimated:
        lines.append(ESTIMATED_SUMMARY)
    return "\n".join(lines)


def audio_missing_reason(source_path: str) -> str:
    """Why a transcript has nothing to play: a live session not recorded, or a recording the app
    deleted ("" otherwise)."""
    if not source_path:
        return "There is no audio for this transcript."
    path = Path(source_path)
    try:
        if path.is_file():
            return ""
    except OSError:
        pass
    if source_path.startswith(LIVE_PREFIX) and not path.is_absolute():
        return ("No audio to play: this live session was not recorded (“Record audio” was off "
                "in the live captions window).")
    from app.history.history_delete import is_app_recording

    if is_app_recording(path):
        return "No audio to play: this session's recording was deleted."
    return ""   # a file the user moved: the player says it is not found when Play is pressed
