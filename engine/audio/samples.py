"""Turning what callers pass (a path or an array) into float32 mono 16 kHz samples."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def as_samples(audio) -> np.ndarray:
    """A file path is decoded; an array is taken as float32 mono 16 kHz samples."""
    if isinstance(audio, (str, Path)):
        from engine.audio.decode import load_audio

        return load_audio(audio)
    samples = np.asarray(audio)
    if samples.ndim != 1:
        raise ValueError(f"expected mono samples as a 1-D array, got shape {samples.shape}")
    if samples.dtype != np.float32:
        samples = samples.astype(np.float32)
    if not np.all(np.isfinite(samples)):
        raise ValueError("audio contains NaN or infinite samples")
    return samples
