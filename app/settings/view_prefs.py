"""The transcript view's own preferences: text size and playback speed (remembered).

Kept apart from app/settings.py's shared list of keys; they use its Key and Settings.
"""
from __future__ import annotations

from app.settings import Key

TRANSCRIPT_FONT_PT = Key("ui/transcript_font_pt", 0)    # 0 = the system's size
PLAYBACK_RATE = Key("ui/playback_rate", 1.0)
MACHINE_SPEED = Key("eta/audio_seconds_per_second", 0.0)   # measured (app.queue.eta.MachineSpeed); 0 = not yet
EXPORT_FORMATS = Key("export/formats", "srt")           # the export dialog's ticked choices (keys)

FONT_MIN_PT, FONT_MAX_PT = 7, 32
SPEEDS = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)


def speed_text(rate: float) -> str:
    return f"{rate:g}×"


def clamp_font(points: int) -> int:
    return max(FONT_MIN_PT, min(FONT_MAX_PT, int(points)))
