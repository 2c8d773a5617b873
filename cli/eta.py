"""The time left the CLI's progress bar shows: nothing until it means something, then a steady figure.

``elapsed / progress - elapsed`` from the start charged the model's start-up to the whole run and,
with progress that moved in 10% steps, swung by minutes between two redraws. Here the rate is
measured from the first visible progress on (after start-up), nothing is shown before
``MIN_SECONDS`` of work and ``MIN_PROGRESS`` done, and between two redraws the figure may move by at
most ``STEP_S`` seconds plus ``STEP_SHARE`` of itself away from where the clock alone would take it
(the last figure minus the time since): it follows a changed rate over a few redraws instead of
jumping to it. Figures above ``MAX_SECONDS`` are not shown.
"""
from __future__ import annotations

MIN_SECONDS = 3.0
MIN_PROGRESS = 0.02
STEP_S = 2.0
STEP_SHARE = 0.1
MAX_SECONDS = 100 * 3600.0


class CliEta:
    """Feed ``update(now, progress)`` (monotonic seconds, 0..1); returns seconds left or None."""

    def __init__(self):
        self._base: tuple[float, float] | None = None    # first visible progress: (time, progress)
        self._shown: tuple[float, float] | None = None   # last figure returned: (time, seconds)

    def update(self, now: float, progress: float) -> float | None:
        progress = min(1.0, max(0.0, progress))
        if progress >= 1.0:
            self._shown = (now, 0.0)
            return 0.0
        if progress <= 0.0:
            return None
        if self._base is None:
            self._base = (now, progress)
            return None
        base_t, base_p = self._base
        if now - base_t < MIN_SECONDS or progress < MIN_PROGRESS or progress <= base_p:
            return None
        estimate = (1.0 - progress) * (now - base_t) / (progress - base_p)
        if self._shown is not None:
            shown_t, shown = self._shown
            expected = max(0.0, shown - (now - shown_t))
            bound = STEP_S + STEP_SHARE * expected
            estimate = min(max(estimate, expected - bound), expected + bound)
        estimate = max(0.0, estimate)
        self._shown = (now, estimate)
        return estimate if estimate <= MAX_SECONDS else None


def clock(seconds: float | None) -> str:
    """``1:05`` or ``2:03:09``; ``--:--`` when unknown."""
    if seconds is None:
        return "--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
