"""Turning what callers pass (a path or an array) into float32 mono 16 kHz samples.

Integer PCM is scaled to [-1, 1) the way soundfile reads it (int16 / 32768, ...),
so an ``int16`` array from a WAV reader or a sound card transcribes the same as
its float form instead of as full-scale noise. Float samples far outside [-1, 1]
are kept but warned about: they usually mean integer PCM that was cast to float.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

# Float peaks above this are almost surely unscaled integer PCM (an int16 cast to float
# peaks in the hundreds or thousands); a little clipping overshoot is normal.
FLOAT_PEAK_WARNING = 4.0


def as_samples(audio) -> np.ndarray:
    """A file path (str, Path or bytes) is decoded; an array is taken as mono 16 kHz samples,
    integer PCM scaled to float as soundfile does."""
    if isinstance(audio, bytes):
        audio = os.fsdecode(audio)   # a bytes path, as os functions accept them
    if isinstance(audio, (str, Path)):
        from engine.audio.decode import load_audio

        return load_audio(audio)
    return pcm_to_float(audio)


def pcm_to_float(pcm, *, copy: bool = False) -> np.ndarray:
    """float32 1-D samples from an array of float or integer PCM.

    Raises:
        ValueError: not 1-D, not numbers (strings, objects, complex, bool), or NaN/inf.
    """
    if pcm is None:
        raise ValueError("expected audio samples (a 1-D array of numbers), got None")
    try:
        samples = np.asarray(pcm)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"expected audio samples (a 1-D array of numbers), got {type(pcm).__name__}: {exc}") \
            from None
    if samples.ndim != 1:
        raise ValueError(f"expected mono samples as a 1-D array, got shape {samples.shape}")
    kind = samples.dtype.kind
    if kind in "iu":
        samples = _scale_integers(samples)
    elif kind == "f":
        samples = samples.astype(np.float32, copy=copy)
        if samples.size and not np.all(np.isfinite(samples)):
            raise ValueError("audio contains NaN or infinite samples")
        peak = float(np.max(np.abs(samples))) if samples.size else 0.0
        if peak > FLOAT_PEAK_WARNING:
            warnings.warn(f"float audio peaks at {peak:.4g}, far outside [-1, 1]: is it integer PCM cast to "
                          f"float? Pass the integer array (it is scaled) or divide by 32768 for 16-bit audio.",
                          stacklevel=3)
    else:
        raise ValueError(f"expected audio samples as numbers (float or integer PCM), got dtype {samples.dtype}")
    return samples


def _scale_integers(samples: np.ndarray) -> np.ndarray:
    """Integer PCM to float32 in [-1, 1): signed by 2**(bits-1), unsigned around its midpoint
    (8-bit WAV is unsigned), as soundfile and the WAV format define them."""
    bits = samples.dtype.itemsize * 8
    full_scale = float(2 ** (bits - 1))
    if samples.dtype.kind == "u":
        return ((samples.astype(np.float64) - full_scale) / full_scale).astype(np.float32)
    return (samples.astype(np.float64) / full_scale).astype(np.float32)
