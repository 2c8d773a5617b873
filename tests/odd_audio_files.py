"""Odd audio files for issue 16 (shared by tests/test_odd_audio.py and tests/bench/bad_inputs_table.py)."""
from __future__ import annotations

import os
from pathlib import Path

import av
import numpy as np
import soundfile as sf

RATE = 16000


def two_track(path: Path, speech: np.ndarray, fmt: str, codec: str, default_second: bool = True) -> Path:
    """A container with two mono audio tracks: the first silent, the second the speech;
    the second is flagged default when ``default_second``, else neither is."""
    out = av.open(str(path), "w", format=fmt)
    silent, spoken = (out.add_stream(codec, rate=RATE, layout="mono") for _ in range(2))
    silent.disposition = 0
    spoken.disposition = av.stream.Disposition.default if default_second else 0
    pcm = codec.startswith("pcm_s16")
    for start in range(0, len(speech), 1024):
        for stream, data in ((silent, np.zeros(len(speech), np.float32)), (spoken, speech)):
            piece = data[None, start:start + 1024]
            frame = av.AudioFrame.from_ndarray((piece * 32767).astype(np.int16) if pcm else piece.astype(np.float32),
                                               format="s16" if pcm else "fltp", layout="mono")
            frame.sample_rate, frame.pts = RATE, start
            for packet in stream.encode(frame):
                out.mux(packet)
    for stream in (silent, spoken):
        for packet in stream.encode(None):
            out.mux(packet)
    out.close()
    return path


def surround(path: Path, speech: np.ndarray, channels: int, tracks: int = 1, codec: str = "pcm_f32le") -> Path:
    """A Matroska file with ``channels`` channels per track (8 is 7.1): channel c holds
    ``speech * (c + 1) / channels``. With two tracks the first is silent; none is flagged.
    ``codec``: float32 PCM (decoded to packed samples) or "aac" (decoded to planar ones, as
    film tracks are)."""
    out = av.open(str(path), "w", format="matroska")
    layout = {6: "5.1", 8: "7.1"}.get(channels, f"{channels}c")
    streams = [out.add_stream(codec, rate=RATE, layout=layout) for _ in range(tracks)]
    gains = (np.arange(channels, dtype=np.float32) + 1) / channels
    for stream in streams:
        stream.disposition = 0
    for start in range(0, len(speech), 1024):
        piece = speech[start:start + 1024]
        for i, stream in enumerate(streams):
            data = np.zeros_like(piece) if i < tracks - 1 else piece
            interleaved = (data[:, None] * gains[None, :]).astype(np.float32).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(interleaved, format="flt", layout=layout)
            frame.sample_rate, frame.pts = RATE, start
            for packet in stream.encode(frame):
                out.mux(packet)
    for stream in streams:
        for packet in stream.encode(None):
            out.mux(packet)
    out.close()
    return path


def absurd_level_wav(path: Path, speech: np.ndarray, factor: float = 1e30) -> Path:
    """A float WAV of finite samples far outside [-1, 1]."""
    sf.write(str(path), speech.astype(np.float32) * np.float32(factor), RATE, subtype="FLOAT")
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def symlink(path: Path, target: str) -> Path:
    os.symlink(target, path)
    return path


def long_name(folder: Path, speech_wav: Path, stem_char: str = "x", tail: str = "") -> Path:
    """A copy of ``speech_wav`` whose name is 255 bytes (the most a file name may have)."""
    suffix = tail + ".wav"
    room = 255 - len(suffix.encode())
    stem = (stem_char * room).encode()[:room].decode("utf-8", "ignore")
    stem += "x" * (room - len(stem.encode()))
    path = folder / (stem + suffix)
    assert len(path.name.encode()) == 255
    path.write_bytes(Path(speech_wav).read_bytes())
    return path
