"""PyAV audio frames to numpy without touching ``frame.planes`` of planar audio.

PyAV (18.1) counts a frame's planes by walking ``extended_data`` up to a NULL pointer. A
planar frame of 8 or more channels has no NULL there: with 8, the walk runs past the
8-pointer ``data`` array into the fields after it; with more, past the end of a separately
allocated array. ``frame.to_ndarray()`` then reads garbage pointers and the process dies
with a segmentation fault. Every 7.1 track (8 channels, common in films) took the app down
this way, and so did a damaged file whose header said 8 channels.

Packed (interleaved) audio has a single plane, and ``data[1]`` is NULL, so the walk stops
where it should. Frames are therefore always converted to packed float32 by FFmpeg's
resampler first and read from there.
"""
from __future__ import annotations

import av
import numpy as np


def packed_converter(frame: av.AudioFrame) -> av.AudioResampler:
    """A resampler to packed float32 with ``frame``'s channel layout and rate."""
    return av.AudioResampler(format="flt", layout=frame.layout, rate=frame.sample_rate)


def packed_samples(frame: av.AudioFrame) -> np.ndarray:
    """A packed float32 frame (a ``packed_converter`` output) as [samples, channels]."""
    if frame.format.is_planar or frame.format.name != "flt":
        raise ValueError(f"expected packed float32 audio, got {frame.format.name}")
    channels = frame.layout.nb_channels
    return frame.to_ndarray().reshape(-1, channels)


def packed_mono(frame: av.AudioFrame) -> np.ndarray:
    """A packed float32 frame as mono samples: the mean of its channels."""
    samples = packed_samples(frame)                         # [samples, channels]
    return samples.mean(axis=1, dtype=np.float32) if samples.shape[1] > 1 else samples[:, 0].copy()
