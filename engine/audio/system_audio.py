"""What the computer plays, as an input: the PulseAudio/PipeWire monitor of the default output.

Captioning a video or a call needs the sound going to the speakers, not the microphone.
PulseAudio (and PipeWire's pulse server) expose every output as a "monitor" source; ``parec``
(pulseaudio-utils) records ``@DEFAULT_MONITOR@``, which follows the default output even when
it changes. A reader thread copies its 16 kHz mono float32 stream into a buffer that ``read()``
drains on the caller's thread, like MicrophoneSource.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
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

MONITOR = "@DEFAULT_MONITOR@"
LABEL = "System audio — what you hear"


def system_audio_available() -> bool:
    """True when a pulse server answers and ``parec`` is installed (no server: no monitor)."""
    if shutil.which("parec") is None or shutil.which("pactl") is None:
        return False
    try:
        done = subprocess.run(["pactl", "info"], capture_output=True, timeout=3)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class SoundServerSource:
    """One source of the pulse server: ``name`` for parec, ``description`` for people."""

    name: str
    description: str

    @property
    def is_monitor(self) -> bool:
        """What an output plays (a "monitor"), rather than a microphone."""
        return self.name.endswith(".monitor")


def parse_sources(listing: str) -> list[SoundServerSource]:
    """Sources from ``pactl list sources`` (long form, LC_ALL=C): each Name with its Description."""
    found, name = [], None
    for line in listing.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Description" and name:
            found.append(SoundServerSource(name, value.strip() or name))
            name = None
    return found


def list_sound_server_sources() -> list[SoundServerSource]:
    """Every source the pulse server offers (monitors included); none without a server or pactl."""
    if shutil.which("pactl") is None:
        return []
    try:
        done = subprocess.run(["pactl", "list", "sources"], capture_output=True, text=True, timeout=3,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_sources(done.stdout) if done.returncode == 0 else []


class SystemAudioSource(AudioSource):
    """The default output's monitor through ``parec``; ``device`` names another pulse source."""

    def __init__(self, device: str = MONITOR, buffer_s: float = 30.0):
        if buffer_s <= 0:
            raise ValueError(f"buffer_s must be positive, got {buffer_s}")
        self.device = device
        self.buffer_s = buffer_s
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._chunks: list[np.ndarray] = []
        self._queued = 0
        self._recent = np.zeros(0, np.float32)
        self._error: str | None = None
        self._running = False
        self.dropped_s = 0.0

    @property
    def error(self) -> str | None:
        return self._error

    @property
    def level(self) -> float:
        with self._lock:
            recent = self._recent
        return level_dbfs(recent) if self._running and recent.size else SILENCE_DBFS

    def start(self) -> None:
        if self._running:
            return
        if shutil.which("parec") is None:
            raise CaptureError("System audio needs 'parec' (Debian/Ubuntu: apt install "
                               "pulseaudio-utils) and a PulseAudio or PipeWire sound server")
        try:
            self._proc = subprocess.Popen(
                ["parec", f"--device={self.device}", "--format=float32le", f"--rate={SAMPLE_RATE}",
                 "--channels=1", "--latency-msec=50", "--raw"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise CaptureError(f"Could not start system audio capture: {exc}") from exc
        self._running, self._error = True, None
        self._thread = threading.Thread(target=self._reader, name="system-audio", daemon=True)
        self._thread.start()

    def _reader(self) -> None:
        proc = self._proc
        frame_bytes = 4 * SAMPLE_RATE // 20  # 50 ms
        pending = b""
        while True:
            data = proc.stdout.read1(frame_bytes) if hasattr(proc.stdout, "read1") else \
                proc.stdout.read(frame_bytes)
            if not data:
                break
            pending += data
            usable = len(pending) - len(pending) % 4
            if not usable:
                continue
            block = np.frombuffer(pending[:usable], dtype="<f4").astype(np.float32)
            pending = pending[usable:]
            with self._lock:
                self._chunks.append(block)
                self._queued += block.size
                cap = int(self.buffer_s * SAMPLE_RATE)
                while self._queued > cap and self._chunks:  # the reader fell behind: drop oldest
                    old = self._chunks.pop(0)
                    self._queued -= old.size
                    self.dropped_s += old.size / SAMPLE_RATE
                self._recent = np.concatenate([self._recent, block])[-int(SAMPLE_RATE * _LEVEL_WINDOW_S):]
        if self._running and self._error is None:
            err = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
            self._error = ("System audio stopped: the sound server went away or refused the "
                           f"recording{': ' + err if err else ''}")

    def read(self) -> np.ndarray:
        with self._lock:
            chunks, self._chunks, self._queued = self._chunks, [], 0
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            self._recent = np.zeros(0, np.float32)
