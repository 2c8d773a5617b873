"""Play a file from a given time, reporting the position for word highlighting.

Backends, best first: QtMultimedia's QMediaPlayer (in PySide6-Addons, not in
PySide6-Essentials); sounddevice (already a dependency for the microphone) on
audio decoded by engine.audio.decode; else none, and ``unavailable_reason`` says why
so the UI can tell the user instead of failing silently.
"""
from __future__ import annotations

import logging
import threading
import time

from PySide6.QtCore import QObject, QTimer, QUrl, Signal

log = logging.getLogger(__name__)



def _qt_multimedia():
    try:
        from PySide6.QtMultimedia import QAudioOutput, QMediaPlayer

        return QMediaPlayer, QAudioOutput
    except ImportError:
        return None


def _sounddevice_output(rescan: bool = False):
    try:
        import sounddevice as sd

        if rescan:   # PortAudio lists devices once, at its start: a sound server started
            sd._terminate()   # since then is seen only after a restart of the library
            sd._initialize()
        sd.query_devices(kind="output")  # raises when there is no output device
        return sd
    except Exception as exc:
        log.info("no sounddevice output: %s", exc)
        return None


def portaudio_installed() -> bool:
    """Whether the PortAudio library (Debian's libportaudio2) can be found at all."""
    import ctypes.util

    try:
        import sounddevice  # noqa: F401  (it loads the library; an OSError when it is missing)
    except (ImportError, OSError):
        return ctypes.util.find_library("portaudio") is not None
    return True


def unavailable_reason() -> str:
    """Why nothing plays, naming the missing library only when it is really missing."""
    if portaudio_installed():
        return ("Playback is off: no sound output device was found (is the sound server, such as "
                "PulseAudio or PipeWire, running?). Play checks again.")
    return ("Playback is off: the PortAudio library is missing "
            "(sudo apt-get install libportaudio2). Play checks again.")


class _Plain:
    """``samples`` as they are, block by block (speed 1: nothing to stretch)."""

    def __init__(self, samples):
        self._samples, self._at = samples, 0

    def read(self, count: int):
        block = self._samples[self._at:self._at + count]
        self._at += len(block)
        return block


def output_stream(sd, samples, speed: float):
    """A started sounddevice output stream playing ``samples`` at ``speed`` with their pitch kept."""
    import numpy as np

    from app.transcript.time_stretch import Wsola

    wsola = _Plain(samples) if speed == 1.0 else Wsola(samples, speed)
    silence = [int(0.3 * 16000)]   # after the end: the sound server drops a stream's last buffer

    def callback(out, frames, _time, _status):   # PortAudio's thread: a few windows per call
        block = wsola.read(frames)
        out[:len(block), 0] = block
        out[len(block):, 0] = 0.0
        if len(block) < frames:
            silence[0] -= frames - len(block)
            if silence[0] <= 0:
                raise sd.CallbackStop

    # blocks of 64 ms with a generous buffer: a busy machine must not starve the sound card
    stream = sd.OutputStream(samplerate=16000, channels=1, dtype=np.float32, callback=callback,
                             blocksize=1024)
    stream.start()
    return stream


class Player(QObject):
    position_changed = Signal(float)   # seconds
    playing_changed = Signal(bool)
    failed = Signal(str)
    _decoded = Signal(str, object, float)  # path, samples, start seconds (from the decode thread)

    def __init__(self, parent=None, backend: str | None = None):
        super().__init__(parent)
        self.backend = backend or ("qt" if _qt_multimedia() else "sounddevice"
                                   if _sounddevice_output() else "none")
        self.unavailable_reason = ""
        self.playing = False
        self._path = ""
        if self.backend == "qt":
            QMediaPlayer, QAudioOutput = _qt_multimedia()
            self._qt = QMediaPlayer(self)
            self._qt_output = QAudioOutput(self)
            self._qt.setAudioOutput(self._qt_output)
            self._qt.positionChanged.connect(lambda ms: self.position_changed.emit(ms / 1000.0))
            self._qt.playbackStateChanged.connect(self._qt_state)
            self._qt.errorOccurred.connect(lambda _e, msg: self.failed.emit(f"Playback failed: {msg}"))
            self._pending_seek = None
            self._qt.mediaStatusChanged.connect(self._qt_media_status)
        elif self.backend == "sounddevice":
            self._sd = _sounddevice_output()
            self._cache: tuple[str, object] | None = None
            self._started_at = 0.0
            self._start_s = 0.0
            self._end_s = 0.0
            self._clock = QTimer(self)
            self._clock.setInterval(40)
            self._clock.timeout.connect(self._sd_tick)
            self._decoded.connect(self._sd_start)
        else:
            self.unavailable_reason = unavailable_reason()
        self.rate = 1.0          # playback speed (0.5-2x)

    @property
    def path(self) -> str:
        """The file last played (position reports are about it)."""
        return self._path

    @property
    def available(self) -> bool:
        return self.backend != "none"

    def recheck(self) -> bool:
        """Look for a sound output again (the sound server may have started since); True
        when playback is available now."""
        if self.available:
            return True
        sd = _sounddevice_output(rescan=True)
        if sd is None:
            self.unavailable_reason = unavailable_reason()
            return False
        self.backend, self._sd, self._cache = "sounddevice", sd, None
        self._started_at = self._start_s = self._end_s = 0.0
        self._clock = QTimer(self)
        self._clock.setInterval(40)
        self._clock.timeout.connect(self._sd_tick)
        self._decoded.connect(self._sd_start)
        self.unavailable_reason = ""
        return True

    def set_rate(self, rate: float) -> None:
        """Playback speed, 0.5-2x; applies from the next play (the view restarts playback)."""
        self.rate = min(2.0, max(0.5, float(rate)))
        if self.backend == "qt":
            self._qt.setPlaybackRate(self.rate)

    def position(self) -> float:
        """Seconds into the file being played (the last position when stopped)."""
        if self.backend == "qt":
            return self._qt.position() / 1000.0
        if self.backend == "sounddevice" and self.playing:
            return self._start_s + (time.monotonic() - self._started_at) * self.rate
        return getattr(self, "_last_position", 0.0)

    def play(self, path: str, start_s: float = 0.0) -> bool:
        """Play ``path`` from ``start_s``; False (and ``failed``) when playback is unavailable."""
        if not self.available:
            self.failed.emit(self.unavailable_reason)
            return False
        self.stop()
        self._path = str(path)
        if self.backend == "qt":
            if self._qt.source() != QUrl.fromLocalFile(self._path):
                self._pending_seek = start_s
                self._qt.setSource(QUrl.fromLocalFile(self._path))
            else:
                self._qt.setPosition(int(start_s * 1000))
            self._qt.play()
            return True
        cached = self._cache
        if cached and cached[0] == self._path:
            self._sd_start(self._path, cached[1], start_s)
        else:
            threading.Thread(target=self._decode, args=(self._path, start_s), daemon=True).start()
        return True

    def stop(self) -> None:
        if self.backend == "qt":
            self._qt.pause()
        elif self.backend == "sounddevice":
            self._clock.stop()
            stream, self._stream = getattr(self, "_stream", None), None
            try:
                if stream is not None:
                    stream.close()
                self._sd.stop()
            except Exception:
                log.exception("stopping playback")
        self._set_playing(False)

    # -- QtMultimedia ------------------------------------------------------------
    def _qt_media_status(self, status):
        if self._pending_seek is not None and status.name in ("LoadedMedia", "BufferedMedia"):
            self._qt.setPosition(int(self._pending_seek * 1000))
            self._pending_seek = None

    def _qt_state(self, state):
        self._set_playing(state.name == "PlayingState")

    # -- sounddevice ---------------------------------------------------------------
    def _decode(self, path: str, start_s: float):
        try:
            from engine.audio.decode import load_audio

            samples = load_audio(path)
        except Exception as exc:
            self.failed.emit(f"Cannot play {path}: {exc}")
            return
        self._decoded.emit(path, samples, start_s)

    def _sd_start(self, path: str, samples, start_s: float):
        if path != self._path:
            return  # the user picked another file meanwhile
        self._cache = (path, samples)
        first = max(0, min(len(samples), int(start_s * 16000)))
        try:
            # stretched as it plays when faster or slower, pitch kept (time_stretch.py; QtMultimedia
            # keeps it too); one kind of stream at every speed
            self._stream = output_stream(self._sd, samples[first:], self.rate)
        except Exception as exc:
            self.failed.emit(f"Playback failed: {exc}")
            return
        self._start_s, self._end_s = first / 16000, len(samples) / 16000
        self._started_at = time.monotonic()
        self._clock.start()
        self._set_playing(True)

    def _sd_tick(self):
        position = self._start_s + (time.monotonic() - self._started_at) * self.rate
        self._last_position = position
        if position >= self._end_s:
            if getattr(self, "_stream", None) is not None:   # a stretched stream ends by itself, its
                self._clock.stop()                          # last buffered blocks played (closing it
                self._set_playing(False)                    # now would cut them); closed at next play
                return
            self.stop()
            return
        self.position_changed.emit(position)

    def _set_playing(self, playing: bool):
        if playing != self.playing:
            self.playing = playing
            self.playing_changed.emit(playing)
