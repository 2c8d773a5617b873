"""One stretch of a recording: its samples and the speech the VAD hears in it, in file time.

Re-aligning an edited segment needs only the segment's few seconds of audio, not the file: the
file is decoded block by block up to the stretch's end and the rest is never read.
"""
from __future__ import annotations

import numpy as np

from engine.audio.decode import stream_audio
from engine.audio.vad import SAMPLE_RATE, SpeechDetector

DECODE_BLOCK_SECONDS = 30.0


def read_stretch(path, start: float, end: float) -> np.ndarray:
    """Samples of ``path`` from ``start`` to ``end`` s (16 kHz mono float32); empty past the file's end.
    Raises what decoding raises (engine.errors.AudioLoadError for a file that cannot be read)."""
    lo, hi = int(start * SAMPLE_RATE), int(end * SAMPLE_RATE)
    pieces, pos = [], 0
    for block in stream_audio(path, DECODE_BLOCK_SECONDS):
        a, b = max(lo, pos), min(hi, pos + len(block))
        if b > a:
            pieces.append(block[a - pos:b - pos])
        pos += len(block)
        if pos >= hi:
            break
    return np.concatenate(pieces) if pieces else np.zeros(0, np.float32)


def speech_islands(samples: np.ndarray, start: float) -> list[tuple[float, float]]:
    """The VAD's (start, end) speech regions of ``samples``, in seconds of file time (``samples``
    begin ``start`` s into the file); none for no samples."""
    if not len(samples):
        return []
    regions = SpeechDetector.shared().speech_regions(samples)
    return [(start + a / SAMPLE_RATE, start + b / SAMPLE_RATE) for a, b in regions]
