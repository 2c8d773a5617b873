"""Voice activity detection with Silero VAD: speech regions and chunk plans for whole files.

Audio everywhere is float32 mono 16 kHz; positions are sample indices in file
(or stream) time. Silero scores 512-sample windows; its encoder has no memory,
so windows are scored in batches and only the small LSTM runs in order. Batches
are aligned to fixed groups of windows, so a file scored in one go and the same
file pushed block by block give bit-identical probabilities and identical chunks.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from engine.audio.silero import GROUP, SAMPLE_RATE, WINDOW, _ProbStream, _SileroNet

ENERGY_WIN = 1600     # 100 ms short-time energy window for forced cuts
ENERGY_HOP = 160      # 10 ms hop between candidate cut points


@dataclass(frozen=True)
class Chunk:
    """A stretch of the file to transcribe as one unit: samples ``[start, end)``.

    ``speech`` holds the ``(start, end)`` sample ranges the VAD heard as speech inside it (padded
    regions clipped to the chunk), when the chunk was cut by VAD; the pauses between them are where
    sentence times without an aligner may not go."""

    start: int
    end: int
    speech: tuple[tuple[int, int], ...] = field(default=(), compare=False)


def _as_audio(audio) -> np.ndarray:
    """Return ``audio`` as a 1-D float32 array, or raise ValueError."""
    arr = np.asarray(audio, dtype=np.float32)
    if arr.ndim != 1:
        raise ValueError(f"audio must be mono (1-D), got shape {arr.shape}")
    return arr


def _samples(seconds: float, name: str) -> int:
    """Convert a non-negative duration in seconds to samples, or raise ValueError."""
    if not seconds >= 0:
        raise ValueError(f"{name} must be >= 0 seconds, got {seconds!r}")
    return int(round(seconds * SAMPLE_RATE))


class _RegionTracker:
    """Silero's hysteresis over window probabilities, one window at a time.

    Speech starts at a window scoring >= threshold and ends once the score stays
    below ``threshold - 0.15`` for ``min_silence`` samples; regions no longer than
    ``min_speech`` are dropped. Regions are padded by up to ``pad`` samples, never
    beyond half the silence to the neighbouring region.
    """

    def __init__(self, threshold: float, min_silence: int, min_speech: int, pad: int):
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {threshold!r}")
        self.threshold, self.neg = threshold, max(threshold - 0.15, 0.01)
        self.min_silence, self.min_speech, self.pad = min_silence, min_speech, pad
        self.end_pad = min(pad, min_silence // 2)
        self.n = 0               # windows seen
        self.start = None        # raw start of the open region
        self.temp_end = None     # where a possible end of the open region began
        self.prev_end = None     # raw end of the last kept region

    @property
    def position(self) -> int:
        """Sample index just after the windows seen so far."""
        return self.n * WINDOW

    def end_bound(self) -> int:
        """Lower bound on the raw end of the open region."""
        return self.temp_end if self.temp_end is not None else self.position

    def padded_start(self) -> int:
        """The padded start of the open region."""
        if self.prev_end is None:
            return max(0, self.start - self.pad)
        return self.start - min(self.pad, (self.start - self.prev_end) // 2)

    def survives(self) -> bool:
        """True once the open region is long enough that it will be kept."""
        return self.start is not None and self.end_bound() - self.start > self.min_speech

    def step(self, prob: float):
        """Take one window's probability; return a closed padded region or None."""
        cur = self.position
        self.n += 1
        if prob >= self.threshold:
            self.temp_end = None
            if self.start is None:
                self.start = cur
        elif prob < self.neg and self.start is not None:
            if self.temp_end is None:
                self.temp_end = cur
            if cur - self.temp_end >= self.min_silence:
                return self._close(self.temp_end, self.temp_end + self.end_pad)
        return None

    def finish(self, length: int):
        """End of audio: close the open region at its pending end or at ``length``."""
        if self.start is None:
            return None
        end = self.temp_end if self.temp_end is not None else length
        return self._close(end, min(length, end + self.end_pad))

    def _close(self, end: int, padded_end: int):
        """Close the open region; return it padded, or None when too short."""
        region = (self.padded_start(), padded_end) if end - self.start > self.min_speech else None
        if region:
            self.prev_end = end
        self.start = self.temp_end = None
        return region


def _quietest(segment: np.ndarray, lo: int) -> int:
    """File-time index at the centre of the quietest 100 ms of ``segment`` (which starts at ``lo``)."""
    x = segment.astype(np.float64)
    if len(x) <= ENERGY_WIN:
        return lo + len(x) // 2
    csum = np.concatenate([[0.0], np.cumsum(x * x)])
    starts = np.arange(0, len(x) - ENERGY_WIN + 1, ENERGY_HOP)
    best = int(starts[np.argmin(csum[starts + ENERGY_WIN] - csum[starts])])
    return lo + best + ENERGY_WIN // 2


class _Planner:
    """Greedy chunk planning over padded speech regions (shared by file and stream)."""

    def __init__(self, max_chunk_s: float, max_gap_s: float, audio_at):
        if not max_chunk_s >= 1.0:
            raise ValueError(f"max_chunk_s must be at least 1 second, got {max_chunk_s!r}")
        self.max_len = _samples(max_chunk_s, "max_chunk_s")
        self.max_gap = _samples(max_gap_s, "max_gap_s")
        self.audio_at = audio_at     # (lo, hi) -> samples [lo, hi) in file time
        self.cur = None              # [start, end] of the chunk being built
        self.attached = False        # an open region already belongs to cur
        self.done: list[Chunk] = []

    def _emit(self, start: int, end: int):
        """Record a finished chunk."""
        if end > start:
            self.done.append(Chunk(start, end))

    def _join(self, rs: int, end_bound: int, final: bool) -> bool:
        """Put a region starting at ``rs`` into cur or a new chunk; False if undecided."""
        if self.cur is not None:
            fits = rs - self.cur[1] <= self.max_gap and end_bound - self.cur[0] <= self.max_len
            if fits and not final:
                return False
            if not fits:
                self._emit(*self.cur)
                self.cur = None
        if self.cur is None:
            self.cur = [rs, rs]
        self.attached = True
        return True

    def _cut(self, end_bound: int):
        """Cut cur at its quietest point while the speech runs past the maximum."""
        while end_bound - self.cur[0] > self.max_len:
            start = self.cur[0]
            lo, hi = start + (2 * self.max_len) // 3, start + self.max_len
            cut = _quietest(self.audio_at(lo, hi), lo) if self.audio_at else hi
            self._emit(start, cut)
            self.cur[0] = cut

    def region(self, rs: int, re: int):
        """A closed padded speech region ``[rs, re)``."""
        if not self.attached:
            self._join(rs, re, final=True)
        self.cur[1] = max(self.cur[1], re)
        self.attached = False
        self._cut(re)

    def open_region(self, rs: int, end_bound: int):
        """A region still open whose end will be at least ``end_bound``."""
        if self.attached or self._join(rs, end_bound, final=False):
            self._cut(end_bound)

    def horizon(self, earliest_start: int):
        """No future region starts before ``earliest_start``: close cur if nothing can join."""
        if self.cur is not None and not self.attached and (
                earliest_start - self.cur[1] > self.max_gap
                or earliest_start - self.cur[0] >= self.max_len):
            self._emit(*self.cur)
            self.cur = None

    def finish(self):
        """Close the last chunk."""
        if self.cur is not None:
            self._emit(*self.cur)
            self.cur = None


class SpeechDetector:
    """The Silero VAD model, loaded once; scoring keeps no state between calls."""

    _shared: SpeechDetector | None = None
    _shared_lock = threading.Lock()

    def __init__(self, *, sample_rate: int = SAMPLE_RATE):
        if sample_rate != SAMPLE_RATE:
            raise ValueError(f"SpeechDetector needs {SAMPLE_RATE} Hz audio, got {sample_rate}")
        self._net = _SileroNet()

    @classmethod
    def shared(cls) -> SpeechDetector:
        """One detector for the whole process, loaded on first use."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def _stream(self, group: int | None = GROUP) -> _ProbStream:
        """A new independent probability stream (fresh model state)."""
        return _ProbStream(self._net, group)

    def probabilities(self, audio) -> np.ndarray:
        """Speech probability of each 512-sample window of ``audio``."""
        stream = self._stream()
        arr = _as_audio(audio)
        step = GROUP * WINDOW * 64
        parts = [stream.push(arr[i:i + step]) for i in range(0, len(arr), step)]
        return np.concatenate(parts + [stream.flush()])

    def speech_regions(self, audio, *, threshold: float = 0.5, min_silence_s: float = 0.3,
                       min_speech_s: float = 0.25, pad_s: float = 0.1) -> list[tuple[int, int]]:
        """Padded ``(start, end)`` sample ranges of speech in ``audio``."""
        arr = _as_audio(audio)
        tracker = _RegionTracker(threshold, _samples(min_silence_s, "min_silence_s"),
                                 _samples(min_speech_s, "min_speech_s"), _samples(pad_s, "pad_s"))
        regions = [r for p in self.probabilities(arr) if (r := tracker.step(float(p)))]
        last = tracker.finish(len(arr))
        return regions + [last] if last else regions


def plan_chunks(regions, audio=None, *, max_chunk_s: float = 30.0,
                max_gap_s: float = 3.0) -> list[Chunk]:
    """Group speech ``regions`` into chunks of at most ``max_chunk_s``.

    Neighbouring regions share a chunk while it stays within the maximum and the
    silence between them is at most ``max_gap_s``; chunks end at region edges, so
    cuts fall inside silences and silence-only stretches get no chunk. A region
    longer than the maximum is cut at the quietest 100 ms of the last third of
    the allowed length (at exactly the maximum when ``audio`` is None).
    """
    arr = None if audio is None else _as_audio(audio)
    planner = _Planner(max_chunk_s, max_gap_s, None if arr is None else (lambda lo, hi: arr[lo:hi]))
    for start, end in sorted(regions):
        if end > start:
            planner.region(int(start), int(end))
    planner.finish()
    return planner.done


def chunk_audio(audio, detector: SpeechDetector, max_chunk_s: float = 30.0, *,
                max_gap_s: float = 3.0, **region_opts) -> list[Chunk]:
    """Detect speech in ``audio`` and plan chunks of at most ``max_chunk_s``."""
    arr = _as_audio(audio)
    regions = detector.speech_regions(arr, **region_opts)
    return plan_chunks(regions, arr, max_chunk_s=max_chunk_s, max_gap_s=max_gap_s)
