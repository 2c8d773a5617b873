"""Audio sources and recording backed by files: FileSource playback and SessionRecorder.

Audio is float32 mono 16 kHz, as from every ``AudioSource``.
"""
from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np

from engine.audio.sources import _LEVEL_WINDOW_S, SAMPLE_RATE, AudioSource, level_dbfs

_SFC_UPDATE_HEADER_NOW = 0x1060  # libsndfile command: rewrite the WAV header sizes now


def _load_file_16k(path) -> np.ndarray:
    """Decode ``path`` to float32 mono 16 kHz, via engine.audio.decode when available."""
    try:
        from engine.audio.decode import load_audio
    except ImportError:
        load_audio = None
    if load_audio is not None:
        return np.asarray(load_audio(path), dtype=np.float32)
    import soundfile as sf
    import soxr

    from engine.errors import AudioLoadError
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:
        raise AudioLoadError(path, str(exc)) from exc
    mono = data.mean(axis=1, dtype=np.float32)
    return mono if rate == SAMPLE_RATE else soxr.resample(mono, rate, SAMPLE_RATE).astype(np.float32)


class FileSource(AudioSource):
    """A file or 16 kHz array played back as if it were a microphone.

    ``read()`` releases the samples whose time has come on a clock running at
    ``speed`` x real time from ``start()`` (``float('inf')``: everything at
    once). With ``manual=True`` the clock moves only through ``advance()``.
    """

    def __init__(self, source, speed: float = 1.0, *, manual: bool = False):
        if not speed > 0:
            raise ValueError(f"speed must be positive (or inf), got {speed}")
        if isinstance(source, np.ndarray):
            if source.ndim != 1:
                raise ValueError(f"FileSource needs a 1-D mono 16 kHz array, got shape {source.shape}")
            self._audio = np.ascontiguousarray(source, dtype=np.float32)
        else:
            self._audio = _load_file_16k(Path(source))
        self.speed, self.manual = float(speed), manual
        self._clock_s = 0.0     # audio seconds released before the current run
        self._t0: float | None = None
        self._returned = 0

    @property
    def duration(self) -> float:
        return len(self._audio) / SAMPLE_RATE

    @property
    def position(self) -> float:
        """Seconds of audio handed out by ``read()`` so far."""
        return self._returned / SAMPLE_RATE

    @property
    def finished(self) -> bool:
        return self._returned >= len(self._audio)

    @property
    def level(self) -> float:
        start = max(0, self._returned - int(SAMPLE_RATE * _LEVEL_WINDOW_S))
        return level_dbfs(self._audio[start:self._returned])

    def _audio_time(self) -> float:
        if self._t0 is None:
            return self._clock_s
        if math.isinf(self.speed):
            return math.inf
        return self._clock_s + (time.monotonic() - self._t0) * self.speed

    def start(self) -> None:
        if not self.manual and self._t0 is None:
            self._t0 = time.monotonic()

    def stop(self) -> None:
        if self._t0 is not None:
            self._clock_s, self._t0 = self._audio_time(), None

    def advance(self, seconds: float) -> None:
        """Manual mode: release the next ``seconds`` of audio."""
        if not self.manual:
            raise ValueError("advance() needs FileSource(..., manual=True)")
        if seconds < 0:
            raise ValueError(f"cannot advance by a negative time ({seconds})")
        self._clock_s += seconds

    def read(self) -> np.ndarray:
        t = self._audio_time()
        due = len(self._audio) if math.isinf(t) else min(len(self._audio),
                                                          int(round(t * SAMPLE_RATE)))
        out = self._audio[self._returned:max(due, self._returned)].copy()
        self._returned = max(due, self._returned)
        return out


class SessionRecorder:
    """Append captured 16 kHz blocks to a 16-bit WAV as they arrive.

    Every ``flush_interval_s`` the data is synced and the WAV header rewritten,
    so a crash loses at most that much and leaves a readable file; ``close()``
    finalizes. (WAV caps at 4 GiB: about 37 hours of 16 kHz mono.)
    """

    def __init__(self, path, flush_interval_s: float = 1.0, sample_rate: int = SAMPLE_RATE):
        if flush_interval_s < 0:
            raise ValueError(f"flush_interval_s must be >= 0, got {flush_interval_s}")
        import soundfile as sf

        self._sf = sf
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sample_rate, self.flush_interval_s = sample_rate, flush_interval_s
        self._file = sf.SoundFile(str(self.path), "w", samplerate=sample_rate, channels=1,
                                  subtype="PCM_16", format="WAV")
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.frames = 0

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate

    @property
    def closed(self) -> bool:
        return self._file.closed

    def write(self, block) -> None:
        """Append float32 mono samples (clipped to [-1, 1])."""
        x = np.clip(np.asarray(block, dtype=np.float32).reshape(-1), -1.0, 1.0)
        with self._lock:
            if self._file.closed:
                raise ValueError(f"SessionRecorder for {self.path} is closed")
            if x.size:
                self._file.write(x)
                self.frames += x.size
            if time.monotonic() - self._last_flush >= self.flush_interval_s:
                self._flush_locked()

    def _flush_locked(self) -> None:
        try:  # soundfile has no public call for this; libsndfile's own sync leaves size 0
            self._sf._snd.sf_command(self._file._file, _SFC_UPDATE_HEADER_NOW, self._sf._ffi.NULL, 0)
        except AttributeError:
            pass
        self._file.flush()
        self._last_flush = time.monotonic()

    def flush(self) -> None:
        """Sync the samples and header to disk now."""
        with self._lock:
            if not self._file.closed:
                self._flush_locked()

    def close(self) -> None:
        """Finalize the WAV; safe to call twice."""
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
