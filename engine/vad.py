"""Voice activity detection with Silero VAD: speech regions, chunk plans, live utterances.

Audio everywhere is float32 mono 16 kHz; positions are sample indices in file
(or stream) time. Silero scores 512-sample windows; its encoder has no memory,
so windows are scored in batches and only the small LSTM runs in order. Batches
are aligned to fixed groups of windows, so a file scored in one go and the same
file pushed block by block give bit-identical probabilities and identical chunks.
"""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 16000
WINDOW = 512          # samples per Silero window at 16 kHz
CONTEXT = 64          # samples of the previous window Silero prepends
GROUP = 64            # windows per scoring batch in file mode (~2 s)
ENERGY_WIN = 1600     # 100 ms short-time energy window for forced cuts
ENERGY_HOP = 160      # 10 ms hop between candidate cut points


@dataclass(frozen=True)
class Chunk:
    """A stretch of the file to transcribe as one unit: samples ``[start, end)``."""

    start: int
    end: int


def _load_silero():
    """Import silero-vad and load its bundled TorchScript model (offline)."""
    import torch

    # Importing silero_vad.model calls torch.set_num_threads(1) for the whole process, which
    # would leave the engine on one core after the first file: keep the caller's count.
    threads = torch.get_num_threads()
    try:
        try:
            from silero_vad import load_silero_vad
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("voice activity detection needs the 'silero-vad' package "
                              "(pip install silero-vad)") from exc
        with warnings.catch_warnings():   # silero and torch.jit warn about their own deprecations
            warnings.simplefilter("ignore", DeprecationWarning)
            return load_silero_vad()
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


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


class _SileroNet:
    """Stateless scoring with the Silero model: the caller holds the LSTM state.

    Uses the model's parts directly (batched STFT/encoder, LSTM over the
    sequence). If that path is missing or disagrees with the packaged model,
    falls back to one private model copy per stream, scored window by window.
    """

    def __init__(self):
        import torch
        self._torch = torch
        self._model = _load_silero().eval()
        try:
            inner = self._model._model
            rnn = inner.decoder.rnn
            self._lstm = torch.nn.LSTM(rnn.weight_ih.shape[1], rnn.weight_hh.shape[1],
                                       batch_first=True)
            with torch.no_grad():
                for ours, theirs in (("weight_ih_l0", rnn.weight_ih), ("weight_hh_l0", rnn.weight_hh),
                                     ("bias_ih_l0", rnn.bias_ih), ("bias_hh_l0", rnn.bias_hh)):
                    getattr(self._lstm, ours).copy_(theirs)
            self._inner = inner
            self.batched = self._self_check()
        except Exception:  # noqa: BLE001 - any mismatch in internals means: use the safe path
            self.batched = False

    def _self_check(self) -> bool:
        """Compare the batched path with the packaged model on a short test signal."""
        rng = np.random.default_rng(0)
        t = np.arange(WINDOW * 12) / SAMPLE_RATE
        sig = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
        ours, _ = self.score(sig.reshape(-1, WINDOW), None)
        ref = self.reference_model()
        with self._torch.inference_mode():
            theirs = [ref(self._torch.from_numpy(w.copy()), SAMPLE_RATE).item()
                      for w in sig.reshape(-1, WINDOW)]
        return bool(np.max(np.abs(ours - np.asarray(theirs))) < 1e-3)

    def reference_model(self):
        """A fresh copy of the packaged model with its own internal state."""
        return _load_silero().eval()

    def score(self, frames: np.ndarray, state):
        """Score windows ``frames`` [N, 512] continuing from ``state``; return (probs, state)."""
        torch = self._torch
        with torch.inference_mode():
            if state is None:
                zeros = torch.zeros(1, 1, self._lstm.hidden_size)
                state = (torch.zeros(CONTEXT), zeros, zeros)
            ctx, h, c = state
            flat = torch.cat([ctx, torch.from_numpy(np.ascontiguousarray(frames).reshape(-1))])
            x = flat.unfold(0, WINDOW + CONTEXT, WINDOW)
            feats = self._inner.encoder(self._inner.run_extractors(x)).squeeze(-1)
            y, (h, c) = self._lstm(feats.unsqueeze(0), (h, c))
            out = self._inner.decoder.decoder(y[0].unsqueeze(-1)).squeeze(1).mean(1)
            return out.numpy().astype(np.float32), (flat[-CONTEXT:].clone(), h, c)


class _ProbStream:
    """Speech probability per 512-sample window for audio arriving in blocks."""

    def __init__(self, net: _SileroNet, group: int | None):
        self._net = net
        self._group = group
        self._pending = np.zeros(0, np.float32)
        self._state = None
        self._ref = None if net.batched else net.reference_model()

    def _score(self, frames: np.ndarray) -> np.ndarray:
        """Score whole windows with whichever path the net supports."""
        if len(frames) == 0:
            return np.zeros(0, np.float32)
        if self._ref is None:
            probs, self._state = self._net.score(frames, self._state)
            return probs
        torch = self._net._torch
        with torch.inference_mode():
            return np.array([self._ref(torch.from_numpy(f.copy()), SAMPLE_RATE).item()
                             for f in frames], np.float32)

    def push(self, block: np.ndarray) -> np.ndarray:
        """Add samples; return the probabilities of the windows completed so far."""
        self._pending = np.concatenate([self._pending, block])
        n = len(self._pending) // WINDOW
        step = (self._group or max(n, 1)) * WINDOW
        n = n * WINDOW - (n * WINDOW) % step
        out = [self._score(self._pending[i:i + step].reshape(-1, WINDOW)) for i in range(0, n, step)]
        self._pending = self._pending[n:]
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def flush(self) -> np.ndarray:
        """Score what is left, zero-padding the last partial window (as Silero does)."""
        tail = self._pending
        self._pending = np.zeros(0, np.float32)
        if len(tail) == 0:
            return np.zeros(0, np.float32)
        pad = (-len(tail)) % WINDOW
        return self._score(np.concatenate([tail, np.zeros(pad, np.float32)]).reshape(-1, WINDOW))


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


def __getattr__(name: str):
    """Re-export ``StreamingChunker`` and ``UtteranceTracker``, which now live in engine.vad_stream.

    Resolved on first use rather than imported at the top, because engine.vad_stream
    imports from this module; either module can then be imported first.
    """
    if name in ("StreamingChunker", "UtteranceTracker"):
        from . import vad_stream
        return getattr(vad_stream, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
