"""Faster or slower playback at the same pitch: WSOLA (waveform-similarity overlap-add) in numpy.

Playing 16 kHz samples at 16 kHz x speed raises the voice by the same factor (2x sounds like a
cartoon). WSOLA keeps the pitch: it takes 40 ms windows of the input ``speed`` times further apart
than it lays them down in the output (20 ms, half-overlapping Hann windows that sum to one), and
nudges each window by up to 10 ms to where it best continues the previous one (the largest
cross-correlation with what naturally followed it), so the waveforms join in phase instead of
beating. Speech stays clear from 0.5x to 2x; the output lasts the input's length / speed.

It runs block by block (``read``) so the player's sound callback can stretch as it plays: nothing
is computed ahead, whatever the file's length. Pure numpy, no Qt (tests/test_time_stretch.py).
"""
from __future__ import annotations

import numpy as np

WINDOW = 640        # 40 ms at 16 kHz
HOP = WINDOW // 2   # output hop: Hann windows at half overlap sum to one
TOLERANCE = 160     # a window may move 10 ms to join its neighbour in phase


class Wsola:
    """Stretches ``samples`` (float, mono) by ``1 / speed``; pull the output with ``read(n)``."""

    def __init__(self, samples: np.ndarray, speed: float):
        if not 0.25 <= speed <= 4.0:
            raise ValueError(f"speed {speed} is outside 0.25-4")
        self.speed = float(speed)
        self._n = len(samples)
        pad = np.zeros(WINDOW + TOLERANCE, np.float32)
        self._x = np.concatenate([pad, np.asarray(samples, np.float32), pad, pad])
        self._pad = len(pad)
        self._window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / WINDOW)).astype(np.float32)
        self._frame = 0                 # windows laid down so far
        self._previous = None           # where (in _x) the last window was taken from
        self._pending = np.zeros(WINDOW, np.float32)   # output not final yet (the overlap)
        self._ready = np.zeros(0, np.float32)          # final output not read yet
        self._ended = False                            # the input is used up

    @property
    def done(self) -> bool:
        """All output has been read."""
        return self._ended and not len(self._ready)

    def read(self, count: int) -> np.ndarray:
        """Up to ``count`` output samples (fewer only at the end; empty once done)."""
        while len(self._ready) < count and not self._ended:
            self._next_window()
        out, self._ready = self._ready[:count], self._ready[count:]
        return out

    def _next_window(self) -> None:
        nominal = int(round(self._frame * HOP * self.speed))   # in input samples
        if nominal >= self._n:
            self._ended = True
            self._ready = np.concatenate([self._ready, self._pending[:HOP]])
            return
        at = self._pad + nominal
        if self._previous is not None:
            follow = self._x[self._previous + HOP:self._previous + HOP + WINDOW]
            region = self._x[at - TOLERANCE:at + TOLERANCE + WINDOW]
            scores = np.correlate(region, follow, mode="valid")     # 2 * TOLERANCE + 1 offsets
            at += int(np.argmax(scores)) - TOLERANCE
        self._previous = at
        self._pending += self._window * self._x[at:at + WINDOW]
        self._ready = np.concatenate([self._ready, self._pending[:HOP]])
        self._pending = np.concatenate([self._pending[HOP:], np.zeros(HOP, np.float32)])
        self._frame += 1


def stretch(samples: np.ndarray, speed: float) -> np.ndarray:
    """The whole of ``samples`` played at ``speed``, pitch kept (about len / speed samples)."""
    wsola = Wsola(samples, speed)
    parts = []
    while not wsola.done:
        parts.append(wsola.read(16000))
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)
