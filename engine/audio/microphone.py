"""Microphone capture without Qt: PortAudio input devices and ``MicrophoneSource``.

The microphone's PortAudio callback only copies blocks into a preallocated ring
buffer; downmixing and resampling happen in ``read()`` on the caller's thread.
"""
from __future__ import annotations

import importlib
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np

from engine.audio.sources import (
    _LEVEL_WINDOW_S,
    SAMPLE_RATE,
    SILENCE_DBFS,
    AudioSource,
    CaptureError,
    level_dbfs,
)

_STATUS_FAIL_S = 1.0        # flagged (underflow) audio in a row that counts as a failure
# Sources whose PortAudio stream is open: re-initialising PortAudio would close them under us.
_OPEN_SOURCES: weakref.WeakSet[MicrophoneSource] = weakref.WeakSet()
_last_fingerprint: str | None = None


def _sounddevice():
    """Import sounddevice lazily, turning a missing PortAudio into a CaptureError."""
    try:
        return importlib.import_module("sounddevice")
    except ImportError as exc:
        raise CaptureError("Microphone capture needs the 'sounddevice' package: "
                           "pip install sounddevice") from exc
    except OSError as exc:  # sounddevice raises OSError when libportaudio is absent
        raise CaptureError("Microphone capture needs the PortAudio library, which was not "
                           "found: install it (Debian/Ubuntu: apt install libportaudio2; "
                           f"Fedora: dnf install portaudio; macOS: brew install portaudio). ({exc})"
                           ) from exc


@dataclass(frozen=True)
class InputDevice:
    """A capture device as PortAudio lists it."""

    index: int
    name: str
    host_api: str
    default_samplerate: float
    channels: int
    is_default: bool


def list_input_devices() -> list[InputDevice]:
    """All devices with at least one input channel, in PortAudio order."""
    sd = _sounddevice()
    apis = sd.query_hostapis()
    try:
        default = sd.default.device[0]
        default = int(default) if default is not None else -1
    except (TypeError, ValueError, IndexError):
        default = -1
    if default < 0:
        default = next((a["default_input_device"] for a in apis if a["default_input_device"] >= 0), -1)
    return [InputDevice(index=d["index"], name=d["name"], host_api=apis[d["hostapi"]]["name"],
                        default_samplerate=float(d["default_samplerate"]),
                        channels=int(d["max_input_channels"]), is_default=d["index"] == default)
            for d in sd.query_devices() if d["max_input_channels"] > 0]


def _linux_sound_fingerprint() -> str | None:
    """What the kernel lists as sound devices, or None where there is no such cheap view.

    Re-initialising PortAudio probes every ALSA card (tens to hundreds of ms); when the
    kernel's list is unchanged PortAudio's would be too, so a poll can skip that cost.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/asound/cards", encoding="utf-8", errors="replace") as f:
            cards = f.read()
        nodes = ",".join(sorted(os.listdir("/dev/snd")))
    except OSError:
        return None
    return cards + "|" + nodes


def rescan_devices() -> bool:
    """Make PortAudio list the devices again (it enumerates them once, when initialised).

    Skipped, returning False, while a stream is open: PortAudio's re-initialisation closes
    every stream, so a running microphone or a sound playing through ``sounddevice.play``
    would die. Returns True when the next ``list_input_devices()`` is fresh.
    """
    global _last_fingerprint
    sd = _sounddevice()
    if any(source._stream is not None for source in list(_OPEN_SOURCES)):
        return False
    try:
        playing = sd.get_stream()      # the stream of sd.play(), used by the app's player
    except RuntimeError:               # play() never called
        playing = None
    if playing is not None and not playing.closed:
        if playing.active:
            return False
        sd.stop()   # close the finished one: re-initialising would leave it dangling
    fingerprint = _linux_sound_fingerprint()
    if fingerprint is not None and fingerprint == _last_fingerprint:
        return True
    sd._terminate()
    sd._initialize()
    _last_fingerprint = fingerprint
    return True


def default_input_device() -> InputDevice | None:
    """The system's default microphone, or the first input when none is marked, or None."""
    devices = list_input_devices()
    return next((d for d in devices if d.is_default), devices[0] if devices else None)


def _resolve_device(spec) -> InputDevice:
    """Find the input named by ``spec`` (None, index, name, name fragment or InputDevice)."""
    devices = list_input_devices()
    names = ", ".join(repr(d.name) for d in devices) or "none"
    if spec is None:
        found = default_input_device()
        if found is None:
            raise CaptureError("No microphone found: PortAudio lists no input devices")
        return found
    if isinstance(spec, InputDevice):
        spec = spec.name
    if isinstance(spec, (int, np.integer)):
        found = [d for d in devices if d.index == int(spec)]
    else:
        text = str(spec)
        found = ([d for d in devices if d.name == text]
                 or [d for d in devices if d.name.lower() == text.lower()]
                 or [d for d in devices if text.lower() in d.name.lower()])
        if len(found) > 1:
            raise CaptureError(f"Microphone {text!r} is ambiguous: it matches "
                               + ", ".join(repr(d.name) for d in found))
    if not found:
        raise CaptureError(f"Microphone {spec!r} not found. Available inputs: {names}")
    return found[0]


class _RingBuffer:
    """Fixed-capacity frame FIFO: the audio callback writes, ``read()`` drains.

    Writes copy into preallocated memory under a lock held for two slice
    copies. When the reader falls behind, the oldest frames are overwritten;
    each such write counts one overflow and the lost frames are tallied.
    """

    def __init__(self, capacity: int, channels: int):
        self._buf = np.zeros((capacity, channels), dtype=np.float32)
        self._lock = threading.Lock()
        self._written = 0
        self._read = 0
        self.overflows = 0
        self.dropped_frames = 0

    def write(self, block) -> None:
        cap, n = len(self._buf), len(block)
        if n > cap:
            block = block[n - cap:]
        m = len(block)
        with self._lock:
            start = self._written % cap
            first = min(m, cap - start)
            self._buf[start:start + first] = block[:first]
            if first < m:
                self._buf[:m - first] = block[first:]
            self._written += n
            behind = self._written - self._read
            if behind > cap:
                self.overflows += 1
                self.dropped_frames += behind - cap
                self._read = self._written - cap

    def _copy(self, begin: int, end: int) -> np.ndarray:
        cap = len(self._buf)
        idx = np.arange(begin, end) % cap
        return self._buf[idx]

    def read(self) -> np.ndarray:
        with self._lock:
            out = self._copy(self._read, self._written)
            self._read = self._written
        return out

    def tail(self, frames: int) -> np.ndarray:
        """The newest ``frames`` frames, whether read already or not."""
        with self._lock:
            return self._copy(max(0, self._written - frames, self._written - len(self._buf)),
                              self._written)


class MicrophoneSource(AudioSource):
    """A PortAudio input stream resampled to 16 kHz mono.

    Args:
        device: None for the default input, a PortAudio index, a device name
            (exact, case-insensitive, or a unique fragment) or an InputDevice.
        block_ms: callback block length.
        buffer_s: ring-buffer length; audio older than this is dropped when
            ``read()`` is not called often enough (see ``overflows``).
        stall_timeout_s: no callback for this long while running sets ``error``.
    """

    def __init__(self, device=None, block_ms: float = 50, buffer_s: float = 30.0,
                 stall_timeout_s: float = 8.0):
        if not 1 <= block_ms <= 1000:
            raise ValueError(f"block_ms must be between 1 and 1000, got {block_ms}")
        if buffer_s * 1000 < 2 * block_ms:
            raise ValueError(f"buffer_s={buffer_s} must hold at least two blocks of {block_ms} ms")
        if stall_timeout_s <= 0:
            raise ValueError(f"stall_timeout_s must be positive, got {stall_timeout_s}")
        self.device_spec = device
        self.block_ms, self.buffer_s, self.stall_timeout_s = block_ms, buffer_s, stall_timeout_s
        self.device: InputDevice | None = None
        self.device_rate = 0
        self.channels = 0
        self.xruns = 0
        self._name = str(device) if device is not None else "default"
        self._stream = None
        self._ring: _RingBuffer | None = None
        self._resampler = None
        self._pending = np.zeros(0, np.float32)
        self._running = False
        self._error: str | None = None
        self._flagged = 0
        self._last_callback = 0.0
        self._abort_exc = Exception
        self._lock = threading.Lock()

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def overflows(self) -> int:
        """How many times the reader fell behind and audio was dropped."""
        return self._ring.overflows if self._ring else 0

    @property
    def dropped_s(self) -> float:
        """Seconds of audio dropped because the reader fell behind."""
        return self._ring.dropped_frames / self.device_rate if self._ring else 0.0

    @property
    def level(self) -> float:
        if self._ring is None or not self._running:
            return SILENCE_DBFS
        return level_dbfs(self._ring.tail(int(self.device_rate * _LEVEL_WINDOW_S)).mean(axis=1))

    def _fail(self, reason: str) -> None:
        if self._error is None:
            self._error = f"Microphone '{self._name}' stopped: {reason}"

    def _prepare(self, rate: int, channels: int) -> None:
        """Reset the buffers for a stream of ``rate`` Hz with ``channels`` channels."""
        soxr = importlib.import_module("soxr")
        self.device_rate, self.channels = int(rate), int(channels)
        self._ring = _RingBuffer(int(self.buffer_s * rate), channels)
        self._resampler = (None if self.device_rate == SAMPLE_RATE else soxr.ResampleStream(
            self.device_rate, SAMPLE_RATE, 1, dtype="float32", quality="HQ"))
        self._pending = np.zeros(0, np.float32)
        self._error, self._flagged, self.xruns = None, 0, 0
        self._last_callback = time.monotonic()
        self._running = True

    def _choose_format(self, sd, dev: InputDevice) -> tuple[int, int]:
        for rate in dict.fromkeys((SAMPLE_RATE, int(round(dev.default_samplerate)))):
            for channels in (1, 2):
                if channels > dev.channels:
                    continue
                try:
                    sd.check_input_settings(device=dev.index, channels=channels,
                                            samplerate=rate, dtype="float32")
                    return rate, channels
                except Exception:  # unsupported combination: try the next one
                    continue
        raise CaptureError(f"Microphone '{dev.name}' accepts neither 16000 Hz nor its default "
                           f"{dev.default_samplerate:g} Hz with 1 or 2 float32 channels")

    def start(self) -> None:
        """Open and start the stream; raises CaptureError if the device is missing or busy."""
        if self._running:
            return
        sd = _sounddevice()
        dev = _resolve_device(self.device_spec)
        self.device, self._name = dev, dev.name
        rate, channels = self._choose_format(sd, dev)
        self._prepare(rate, channels)
        self._abort_exc = sd.CallbackAbort
        try:
            self._stream = sd.InputStream(
                device=dev.index, samplerate=rate, channels=channels, dtype="float32",
                blocksize=max(1, int(rate * self.block_ms / 1000)), callback=self._callback,
                finished_callback=self._finished_callback)
            self._stream.start()
            _OPEN_SOURCES.add(self)
        except Exception as exc:  # PortAudioError and friends
            self._running, self._stream = False, None
            raise CaptureError(f"Could not open microphone '{dev.name}': {exc}") from exc

    def _callback(self, indata, frames, time_info, status) -> None:
        """PortAudio thread: copy the block into the ring; nothing else heavy."""
        try:
            if status:
                if status.input_overflow:
                    self.xruns += 1
                if status.input_underflow:
                    self._flagged += frames
                    if self._flagged >= _STATUS_FAIL_S * self.device_rate:
                        self._fail(f"the device delivers no audio ({status})")
                else:
                    self._flagged = 0
            else:
                self._flagged = 0
            self._ring.write(indata)
            self._last_callback = time.monotonic()
        except Exception as exc:
            self._fail(f"audio callback failed: {exc!r}")
            raise self._abort_exc from exc

    def _finished_callback(self) -> None:
        if self._running:
            self._fail("the audio stream ended unexpectedly (device unplugged or driver error)")

    def _convert(self, frames: np.ndarray, last: bool) -> np.ndarray:
        mono = frames[:, 0] if frames.shape[1] == 1 else frames.mean(axis=1, dtype=np.float32)
        mono = np.ascontiguousarray(mono, dtype=np.float32)
        if self._resampler is None:
            return mono
        return self._resampler.resample_chunk(mono, last=last).astype(np.float32, copy=False)

    def read(self) -> np.ndarray:
        """Everything captured since the last read, as float32 mono 16 kHz."""
        with self._lock:
            out, self._pending = self._pending, np.zeros(0, np.float32)
            if not self._running or self._ring is None:
                return out
            if self._stream is not None and self._error is None:
                silent = time.monotonic() - self._last_callback
                if silent > self.stall_timeout_s:
                    self._fail(f"no audio received for {silent:.1f} s")
            new = self._convert(self._ring.read(), last=False)
            return new if out.size == 0 else np.concatenate([out, new])

    def stop(self) -> None:
        """Close the stream; the remaining samples are kept for the next ``read()``."""
        with self._lock:
            if not self._running:
                return
            self._running = False
            stream, self._stream = self._stream, None
            _OPEN_SOURCES.discard(self)
            if stream is not None:
                try:
                    stream.abort()
                    stream.close()
                except Exception as exc:  # the device may already be gone
                    self._fail(f"closing the stream failed: {exc}")
            tail = self._convert(self._ring.read(), last=True)
            self._pending = np.concatenate([self._pending, tail])
            self._resampler = None
