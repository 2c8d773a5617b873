"""The live window's capture thread: source -> recording -> engine stream, off the UI thread.

A microphone's PortAudio callback (or a sound server's reader thread) only fills the source's
buffer. This thread drains it every ``interval_s``, appends the samples to the session's
recording and hands them to ``feed`` (the EngineClient's queued call into the engine thread),
so neither the audio nor the WAV writes ever wait on the UI thread, and a busy UI thread (a long
layout, a modal dialog) never makes the capture fall behind. The UI thread only reads
``level``, ``error`` and ``finished`` for its meter and status line.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

import numpy as np

log = logging.getLogger(__name__)

DRAIN_INTERVAL_S = 0.05   # the source's ring buffer holds 30 s; 50 ms keeps the captions' latency low


class AudioFeeder:
    """Drains ``source`` on a thread of its own into ``recorder`` (optional) and ``feed``.

    ``start()`` starts the thread; ``stop()`` stops the source, drains what it
    still holds, closes the recorder and returns once the thread has ended, so every captured
    sample was fed and written before the caller closes the stream. The thread also ends by
    itself when the source fails (``error``) or a file source runs out (``finished``).
    """

    def __init__(self, source, feed: Callable[[np.ndarray], None], recorder=None,
                 interval_s: float = DRAIN_INTERVAL_S):
        self.source, self.recorder = source, recorder
        self._feed = feed
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self.samples = 0              # samples fed so far (the session's length)
        self.write_error: str | None = None

    @property
    def level(self) -> float:
        return self.source.level

    @property
    def error(self) -> str | None:
        """Why the input stopped (the source's own message), or None."""
        return self.source.error

    @property
    def finished(self) -> bool:
        """The thread has ended by itself: the source failed or a file source ran out."""
        return self._done.is_set()

    def start(self) -> None:
        """Start draining; the source is already started (so its errors reach the caller first)."""
        self._thread = threading.Thread(target=self._run, name="live-audio", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the source, feed and record its last samples, close the recording; waits for it."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("the live audio thread did not end within %.0f s", timeout_s)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                self._drain()
                if self.source.error or getattr(self.source, "finished", False):
                    break
        except Exception:
            log.exception("live audio thread failed")
        finally:
            self._finish()

    def _finish(self) -> None:
        try:
            self.source.stop()
        except Exception:
            log.exception("stopping the audio source")
        try:
            self._drain()             # what the source still held when it stopped
        except Exception:
            log.exception("draining the audio source")
        if self.recorder is not None:
            try:
                self.recorder.close()
            except Exception as exc:
                self.write_error = f"The recording could not be finished: {exc}"
        self._done.set()

    def _drain(self) -> None:
        pcm = self.source.read()
        if not len(pcm):
            return
        self.samples += len(pcm)
        if self.recorder is not None and self.write_error is None:
            try:
                self.recorder.write(pcm)
            except Exception as exc:   # a full disk stops the recording, not the captions
                self.write_error = f"Recording stopped: {exc}"
                log.warning("live recording write failed: %s", exc)
        self._feed(pcm)
