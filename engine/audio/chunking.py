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
    # Below a second a file becomes thousands of requests (a limit of 0 samples never moved on).
    if not 1.0 <= max_seconds < float("inf"):
        raise ValueError(f"max_seconds must be at least 1 second and finite, got {max_seconds!r}")
    n = len(audio)
    limit = int(min(max_seconds, n / SAMPLE_RATE + 1) * SAMPLE_RATE)   # 1e308 s: one chunk, no overflow
    search = min(int(search_seconds * SAMPLE_RATE), limit // 2)
    spans, start = [], 0
    while n - start > limit:
        cut = quietest_point(audio, start + limit - search, start + limit)
        spans.append((start, cut))
        start = cut
    spans.append((start, n))
    return spans
