"""What every live audio source shares: the ``AudioSource`` interface and RMS levels.

Every source hands out float32 mono 16 kHz samples through ``read()``. Levels are RMS in
dBFS: 0 for a full-scale square wave, about -3 for a full-scale sine, and ``SILENCE_DBFS``
(-100) for silence or no audio.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

SAMPLE_RATE = 16000
SILENCE_DBFS = -100.0
_LEVEL_WINDOW_S = 0.1


class CaptureError(RuntimeError):
    """A microphone could not be opened; the message names the device and the reason."""


def level_dbfs(block) -> float:
    """RMS level of ``block`` in dBFS, floored at ``SILENCE_DBFS`` (also for empty input)."""
    x = np.asarray(block, dtype=np.float32)
    if x.size == 0:
        return SILENCE_DBFS
    rms = math.sqrt(float(np.mean(np.square(x, dtype=np.float64))))
    return SILENCE_DBFS if rms <= 1e-5 else max(SILENCE_DBFS, 20.0 * math.log10(rms))


class AudioSource(ABC):
    """A live source of float32 mono 16 kHz audio.

    ``read()`` returns everything captured since the previous call (possibly
    empty) without blocking; ``level`` is the recent RMS level in dBFS;
    ``error`` is None, or a message once the source has failed.
    """

    sample_rate: int = SAMPLE_RATE

    @abstractmethod
    def start(self) -> None:
        """Begin capturing (or playing)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop capturing; samples already captured stay available to ``read()``."""

    @abstractmethod
    def read(self) -> np.ndarray:
        """Samples captured since the last read, float32 mono at 16 kHz."""

    @property
    @abstractmethod
    def level(self) -> float:
        """RMS level of the last ~100 ms in dBFS (``SILENCE_DBFS`` when silent)."""

    @property
    def error(self) -> str | None:
        """None while healthy, else why the source stopped."""
        return None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
