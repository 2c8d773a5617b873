"""Streaming VAD: chunk planning for block-by-block decoding and live utterance events.

Built on engine.audio.vad's region tracking and chunk planning and on the Silero
scoring in engine.audio.silero.
"""
from __future__ import annotations

import dataclasses
import weakref

import numpy as np

from engine.audio.vad import (
    Chunk,
    SpeechDetector,
    _as_audio,
    _Planner,
    _quietest,
    _RegionTracker,
    _samples,
)


class StreamingChunker:
    """``chunk_audio`` for audio decoded block by block, with a bounded buffer.

    ``push`` and ``finish`` return ``(Chunk, samples)`` pairs as soon as a chunk is
    final. Only about ``max_chunk_s`` plus a few seconds of audio is kept.
    """

    def __init__(self, detector: SpeechDetector, max_chunk_s: float = 30.0, *,
                 max_gap_s: float = 3.0, threshold: float = 0.5, min_silence_s: float = 0.3,
                 min_speech_s: float = 0.25, pad_s: float = 0.1):
        self._probs = detector._stream()
        self._tracker = _RegionTracker(threshold, _samples(min_silence_s, "min_silence_s"),
                                       _samples(min_speech_s, "min_speech_s"), _samples(pad_s, "pad_s"))
        # A weak link back to self: a bound method would make chunker and planner a
        # reference cycle, and each finished file's buffer (up to ~35 s of audio) would
        # wait for Python's rare full collection; over 1000 files RSS grew ~1 MB per file.
        slicer = weakref.WeakMethod(self._slice)
        self._planner = _Planner(max_chunk_s, max_gap_s, lambda lo, hi: slicer()(lo, hi))
        self._buf = np.zeros(0, np.float32)
        self._offset = 0          # file index of self._buf[0]
        self._sent = 0            # chunks already returned
        self.regions: list[tuple[int, int]] = []   # closed padded speech regions (for the diarizer)
        self._regions: list[tuple[int, int]] = []   # closed speech regions not yet behind every chunk

    @property
    def buffered_samples(self) -> int:
        """How many samples are held in memory now."""
        return len(self._buf)

    def _slice(self, lo: int, hi: int) -> np.ndarray:
        """Samples ``[lo, hi)`` in file time from the buffer."""
        if lo < self._offset:
            raise RuntimeError("StreamingChunker dropped audio it still needed")  # pragma: no cover
        return self._buf[lo - self._offset:hi - self._offset]

    def push(self, block) -> list[tuple[Chunk, np.ndarray]]:
        """Add a block of samples; return the chunks that became final."""
        arr = _as_audio(block)
        self._buf = np.concatenate([self._buf, arr])
        for p in self._probs.push(arr):
            region = self._tracker.step(float(p))
            if region:
                self.regions.append(region)
                self._regions.append(region)
                self._planner.region(*region)
        self._advance()
        return self._collect(trim=True)

    def finish(self) -> list[tuple[Chunk, np.ndarray]]:
        """End of the audio: return the remaining chunks."""
        length = self._offset + len(self._buf)
        for p in self._probs.flush():
            region = self._tracker.step(float(p))
            if region:
                self.regions.append(region)
                self._regions.append(region)
                self._planner.region(*region)
        region = self._tracker.finish(length)
        if region:
            self.regions.append(region)
            self._regions.append(region)
            self._planner.region(*region)
        self._planner.finish()
        out = self._collect(trim=False)
        self._buf = np.zeros(0, np.float32)   # every chunk is out: the audio is not needed
        self._offset = length
        return out

    def _advance(self):
        """Let the planner act on what the open region and the silence already prove."""
        tr = self._tracker
        if tr.survives():
            self._planner.open_region(tr.padded_start(), tr.end_bound())
        self._planner.horizon((tr.start if tr.start is not None else tr.position) - tr.pad)

    def _with_speech(self, chunk: Chunk) -> Chunk:
        """``chunk`` with the speech regions inside it (a region still open counts up to now)."""
        regions = list(self._regions)
        tr = self._tracker
        if tr.start is not None:
            regions.append((tr.padded_start(), tr.position))
        speech = tuple((max(a, chunk.start), min(b, chunk.end)) for a, b in regions
                       if a < chunk.end and b > chunk.start)
        return dataclasses.replace(chunk, speech=speech or ((chunk.start, chunk.end),))

    def _collect(self, trim: bool) -> list[tuple[Chunk, np.ndarray]]:
        """Pair new chunks with their samples and drop audio no longer needed."""
        new = self._planner.done[self._sent:]
        self._sent = len(self._planner.done)
        out = [(self._with_speech(c), self._slice(c.start, c.end).copy()) for c in new]
        if new:   # regions wholly before the last chunk's end belong to no later chunk
            self._regions = [r for r in self._regions if r[1] > new[-1].end]
        if trim:
            tr, cur = self._tracker, self._planner.cur
            keep = (tr.start if tr.start is not None else tr.position) - tr.pad
            if cur:
                keep = cur[0] if self._planner.attached else min(keep, cur[0])
            keep = max(self._offset, keep)
            self._buf, self._offset = self._buf[keep - self._offset:], keep
        return out


class UtteranceTracker:
    """Live utterance detection for captions, fed with blocks of any size.

    ``feed`` returns events in sample order: ``("start", s)`` once speech has
    lasted ``min_speech_s``; ``("end", s, e)`` after ``min_silence_s`` of silence;
    ``("cut", s, c)`` when an utterance runs past ``max_utterance_s``: it is cut
    at its quietest 100 ms in the last third and continues from ``c``.
    """

    def __init__(self, detector: SpeechDetector, *, threshold: float = 0.5,
                 min_silence_s: float = 0.5, min_speech_s: float = 0.25,
                 max_utterance_s: float = 20.0, pad_s: float = 0.1):
        if not max_utterance_s >= 1.0:
            raise ValueError(f"max_utterance_s must be at least 1 second, got {max_utterance_s!r}")
        self._detector = detector
        self._opts = (threshold, _samples(min_silence_s, "min_silence_s"),
                      _samples(min_speech_s, "min_speech_s"), _samples(pad_s, "pad_s"))
        self._max = _samples(max_utterance_s, "max_utterance_s")
        self.reset()

    def reset(self):
        """Forget all audio and model state; positions restart at 0."""
        self._probs = self._detector._stream(group=None)
        self._tracker = _RegionTracker(*self._opts)
        self._buf = np.zeros(0, np.float32)
        self._offset = 0
        self._open = None

    @property
    def pad(self) -> int:
        """Samples of padding before a start and after an end (at most half the silence between)."""
        return self._opts[3]

    @property
    def min_silence(self) -> int:
        """Samples of silence that end an utterance."""
        return self._opts[1]

    @property
    def open_start(self) -> int | None:
        """Start sample of the utterance in progress, or None."""
        return self._open

    @property
    def position(self) -> int:
        """Samples fed so far."""
        return self._offset + len(self._buf)

    @property
    def pause(self) -> tuple[int, int] | None:
        """``(end, silent)`` while the open utterance is in a pause: the end its ``("end", s, e)``
        event will give if the pause lasts ``min_silence_s``, and the samples of silence so far;
        None while speech goes on (or no utterance is open)."""
        tr = self._tracker
        if self._open is None or tr.temp_end is None:
            return None
        return tr.temp_end + tr.end_pad, tr.position - tr.temp_end

    def feed(self, block) -> list[tuple]:
        """Add samples; return the events they caused."""
        arr = _as_audio(block)
        self._buf = np.concatenate([self._buf, arr])
        events: list[tuple] = []
        for p in self._probs.push(arr):
            self._step(float(p), events)
        tr = self._tracker
        keep = (tr.start if tr.start is not None else tr.position) - tr.pad
        keep = max(self._offset, self._open if self._open is not None else keep)
        self._buf, self._offset = self._buf[keep - self._offset:], keep
        return events

    def finish(self) -> list[tuple]:
        """End of the stream: score the last partial window and close any open utterance."""
        events: list[tuple] = []
        for p in self._probs.flush():
            self._step(float(p), events)
        region = self._tracker.finish(self.position)
        if self._open is not None:
            events.append(("end", self._open, max(self._open, region[1] if region else self.position)))
        self._open = None
        return events

    def _step(self, prob: float, events: list):
        """Advance one window and append the events it causes."""
        tr = self._tracker
        region = tr.step(prob)
        if region:
            if self._open is None:
                events.append(("start", region[0]))
                self._open = region[0]
            events.append(("end", self._open, region[1]))
            self._open = None
        elif self._open is None and tr.survives():
            self._open = tr.padded_start()
            events.append(("start", self._open))
        if self._open is not None and tr.end_bound() - self._open > self._max:
            lo, hi = self._open + (2 * self._max) // 3, self._open + self._max
            cut = _quietest(self._buf[lo - self._offset:hi - self._offset], lo)
            events.append(("cut", self._open, cut))
            self._open = cut
