"""How long a file has left: nothing while there is too little to go on, then a steady estimate.

The old estimate, elapsed * (1 - p) / p from the moment the job started, charged the
start-up (decoding the file, the first encoder pass) to every later chunk: a file that
took one minute first said "5:00 left". Here the rate is measured from the first visible
progress on, smoothed over the last several seconds (so it follows the engine slowing down
when other files join the batch), and the shown time may only grow slowly: an estimate
that jumps up between two updates reads as a broken one.

Pure Python and no Qt, so it is tested on made-up progress sequences (tests/test_eta.py).
"""
from __future__ import annotations

import math

MIN_SECONDS = 3.0      # no estimate before this much processing...
MIN_PROGRESS = 0.10    # ...unless the file is this far along already
SMOOTHING_S = 8.0      # the rate forgets what happened this many seconds ago (1/e)
MAX_RISE_PER_S = 0.5   # the shown time may grow at most this many seconds per second


class EtaEstimator:
    """Feed ``update(now, progress)`` (seconds, 0..1) from the moment processing starts."""

    def __init__(self, min_seconds: float = MIN_SECONDS, min_progress: float = MIN_PROGRESS,
                 smoothing_s: float = SMOOTHING_S, max_rise_per_s: float = MAX_RISE_PER_S):
        self.min_seconds, self.min_progress = min_seconds, min_progress
        self.smoothing_s, self.max_rise_per_s = smoothing_s, max_rise_per_s
        self.reset()

    def reset(self) -> None:
        self._start: float | None = None   # first update: processing began
        self._base: tuple[float, float] | None = None   # first visible progress (time, progress)
        self._last: tuple[float, float] | None = None   # last progress that moved
        self._rate: float | None = None    # smoothed progress per second
        self._shown: tuple[float, float] | None = None  # last estimate returned (time, seconds)

    def update(self, now: float, progress: float) -> float:
        """Seconds left, or -1.0 while unknown."""
        progress = min(1.0, max(0.0, float(progress)))
        if self._last is not None and progress < self._last[1] - 1e-9:
            self.reset()   # the job started over (a new model took it): so does the estimate
        if self._start is None:
            self._start = now
        if progress <= 0.0:
            return -1.0
        if self._base is None:
            # Start-up ends with the first progress: the rate is measured from here on.
            self._base = self._last = (now, progress)
            return -1.0
        self._advance(now, progress)
        if self._rate is None or self._rate <= 0.0:
            return -1.0
        if now - self._start < self.min_seconds and progress < self.min_progress:
            return -1.0
        estimate = (1.0 - progress) / self._rate
        if self._shown is not None:
            shown_at, shown = self._shown
            estimate = min(estimate, shown + self.max_rise_per_s * max(0.0, now - shown_at))
        self._shown = (now, estimate)
        return estimate

    def _advance(self, now: float, progress: float) -> None:
        last_t, last_p = self._last
        dt, dp = now - last_t, progress - last_p
        if dt <= 0.0 or dp <= 0.0:
            return   # a repeat, or no work done: the last rate still stands
        if self._rate is None:
            base_t, base_p = self._base
            self._rate = (progress - base_p) / (now - base_t)
        else:
            # Weighted by the time each step took, so many quick reports count no more
            # than one slow one covering the same seconds.
            weight = 1.0 - math.exp(-dt / self.smoothing_s)
            self._rate += weight * (dp / dt - self._rate)
        self._last = (now, progress)


# -- this machine's measured speed, and the bound it sets --------------------------------------
SPEED_SMOOTHING = 0.5        # weight of the newest finished file in the machine's speed
UNKNOWN_SLOWEST = 0.1        # with nothing measured: 10x slower than real time is the most it says
BOUND_FACTOR = 4.0           # an estimate may say at most this much slower than measured
BOUND_SLACK_S = 60.0         # plus start-up


class MachineSpeed:
    """Audio seconds transcribed per wall second on this machine, from finished files (the
    app keeps it between runs). It bounds what an estimate may say: the queue once showed
    "10% · 22324:41:02 left" for a file of a few minutes."""

    def __init__(self, value: float | None = None):
        self.value = value if value and value > 0 and math.isfinite(value) else None

    def record(self, audio_s: float, wall_s: float) -> None:
        if audio_s <= 0 or wall_s <= 0 or not math.isfinite(audio_s / wall_s):
            return
        speed = audio_s / wall_s
        self.value = speed if self.value is None else \
            self.value + SPEED_SMOOTHING * (speed - self.value)

    def bound(self, remaining_audio_s: float) -> float:
        """The most seconds a file with this much audio left can sensibly take."""
        slowest = self.value / BOUND_FACTOR if self.value else UNKNOWN_SLOWEST
        return max(0.0, remaining_audio_s) / slowest + BOUND_SLACK_S


def bounded(estimate: float, duration: float | None, progress: float, speed: MachineSpeed) -> float:
    """``estimate`` (seconds, -1 unknown) no higher than the machine's bound for the audio left."""
    if estimate < 0 or not duration or duration <= 0:
        return estimate
    return min(estimate, speed.bound(duration * (1.0 - min(1.0, max(0.0, progress)))))
