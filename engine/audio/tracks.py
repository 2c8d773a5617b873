"""Which audio track of a file with several to transcribe (MKV/MP4 with dubs, commentary, silence).

The track flagged default is what a player plays, so it comes first; a track that is
silent is skipped for the next one with sound, because transcribing silence is never
what the user meant. The choice is cached per file version so reading the header and
decoding agree without probing twice.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass

import av
import numpy as np

from engine.audio.frames import packed_converter, packed_samples

# How much of a track is decoded to decide it holds sound, and what counts as sound
# (a peak above -60 dBFS; digital silence and dither stay below it).
PROBE_SECONDS = 60.0
SOUND_PEAK = 1e-3
_CACHE_SIZE = 256
_cache: OrderedDict[tuple, "TrackChoice"] = OrderedDict()


@dataclass(frozen=True)
class TrackChoice:
    """The audio track used: its position among the file's audio tracks and why it was chosen."""

    index: int            # 0-based among the audio tracks
    count: int            # audio tracks in the file
    note: str = ""        # for the transcript; empty when the file has one audio track

    @property
    def number(self) -> int:
        return self.index + 1


def choose_audio_track(path, container) -> TrackChoice:
    """The track to transcribe in the open PyAV ``container`` of ``path``."""
    streams = list(container.streams.audio)
    if len(streams) <= 1:
        return TrackChoice(0, len(streams))
    try:
        st = os.stat(path)
        key = (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    if key in _cache:
        _cache.move_to_end(key)
        return _cache[key]
    choice = _choose(path, streams)
    if key is not None:
        _cache[key] = choice
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return choice


def _choose(path, streams) -> TrackChoice:
    default = av.stream.Disposition.default
    flagged = [i for i, s in enumerate(streams) if s.disposition & default]
    order = flagged + [i for i in range(len(streams)) if i not in flagged]
    count = len(streams)
    for i in order:
        if _has_sound(path, streams[i].index):
            why = "flagged default" if i in flagged else (
                "the first with sound" + (f"; the default track {flagged[0] + 1} is silent" if flagged else ""))
            return TrackChoice(i, count, f"audio track {i + 1} of {count} used ({why})")
    first = order[0]
    why = "flagged default" if first in flagged else "the first"
    return TrackChoice(first, count, f"audio track {first + 1} of {count} used ({why}; no track has sound)")


def _has_sound(path, stream_index: int) -> bool:
    """Whether the first ``PROBE_SECONDS`` of a track hold anything above silence."""
    try:
        with av.open(os.fspath(path), mode="r") as container:
            stream = container.streams[stream_index]
            seen, converter, setup = 0.0, None, None
            for packet in container.demux(stream):
                for frame in packet.decode():
                    # Read through packed float32 (engine.audio.frames); a frame whose layout or
                    # rate changed gets a new converter, which would refuse it.
                    if (frame.layout.name, frame.sample_rate) != setup:
                        converter, setup = packed_converter(frame), (frame.layout.name, frame.sample_rate)
                    for out in converter.resample(frame):
                        samples = packed_samples(out)
                        if samples.size and float(np.max(np.abs(samples))) > SOUND_PEAK:
                            return True
                    seen += frame.samples / float(frame.sample_rate or 1)
                if seen >= PROBE_SECONDS:
                    return False
    except Exception:  # an undecodable track has no usable sound
        return False
    return False
