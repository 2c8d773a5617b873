"""A live stream's audio on the engine thread: what the caller fed and the stream has not taken in
yet (taken a bounded slice per step), and the samples it keeps (the open utterance, or a short
pre-roll between utterances), addressed in stream samples."""
from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["take_front", "KeptSamples"]


def take_front(inbox: deque, limit: int) -> list[np.ndarray]:
    """Up to ``limit`` samples from the front of ``inbox`` (the rest waits for later steps)."""
    taken, count = [], 0
    while inbox and count < limit:
        block = inbox[0]
        if count + len(block) <= limit:
            taken.append(inbox.popleft())
            count += len(block)
        else:
            taken.append(block[:limit - count])
            inbox[0] = block[limit - count:]
            count = limit
    return taken


class KeptSamples:
    """Samples [start, position) of the stream: ``position`` counts every sample heard so far."""

    def __init__(self):
        self.samples = np.zeros(0, np.float32)
        self.start = 0
        self.position = 0

    def append(self, piece: np.ndarray) -> None:
        self.samples = np.concatenate([self.samples, piece])
        self.position += len(piece)

    def slice(self, start: int, end: int) -> np.ndarray:
        """A copy of stream samples [start, end), which must still be kept."""
        return self.samples[start - self.start:end - self.start].copy()

    def keep_from(self, keep: int) -> None:
        """Drop the samples before stream sample ``keep``."""
        if keep > self.start:
            self.samples = self.samples[keep - self.start:]
            self.start = keep

    def clear(self) -> None:
        self.samples = np.zeros(0, np.float32)
        self.start = self.position
