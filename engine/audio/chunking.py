"""Cutting long audio into model-sized pieces at quiet points (the fallback when VAD is off)."""
from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000


def quietest_point(audio: np.ndarray, lo: int, hi: int, window: int = 1600) -> int:
    """Sample index in [lo, hi) at the centre of the lowest-energy ``window`` (100 ms)."""
    seg = audio[lo:hi].astype(np.float64)
    if len(seg) <= window:
        return (lo + hi) // 2
    energy = np.convolve(seg * seg, np.ones(window), mode="valid")   # energy[i]: window starting at lo + i
    return lo + int(np.argmin(energy)) + window // 2


def split_at_quiet_points(audio: np.ndarray, max_seconds: float = 30.0,
                          search_seconds: float = 5.0) -> list[tuple[int, int]]:
    """(start, end) sample ranges of at most ``max_seconds``, each cut at the quietest
    100 ms within the last ``search_seconds`` before the limit, as the official package does."""
    if max_seconds <= 0:
        raise ValueError("max_seconds must be positive")
    n, limit = len(audio), int(max_seconds * SAMPLE_RATE)
    search = min(int(search_seconds * SAMPLE_RATE), limit // 2)
    spans, start = [], 0
    while n - start > limit:
        cut = quietest_point(audio, start + limit - search, start + limit)
        spans.append((start, cut))
        start = cut
    spans.append((start, n))
    return spans
