"""One engine, driven by its own thread: requests in through a command queue, results pushed out.

Request handlers never touch the engine and never poll it. They post a command
(``submit_file``, ``open_session``, ``feed``, ``cancel``...) which the engine
thread runs between steps; the thread steps while there is work and sleeps on an
event otherwise, and after every step it hands results to the waiting side:
file jobs resolve a ``concurrent.futures.Future`` (await it with
``asyncio.wrap_future``) and call ``on_segment`` as chunks finish; live sessions
get ``poll()`` called so they can push their events.
"""
from __future__ import annotations

import collections
import concurrent.futures
import itertools
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from server.metrics import Metrics

log = logging.getLogger(__name__)
_task_ids = itertools.count(1)
IDLE_WAIT_S = 1.0     # how long the idle thread sleeps before looking at deadlines again


class QueueFull(Exception):
    """The bounded file queue is full; ``retry_after`` seconds is an estimate of when it has room."""

    def __init__(self, retry_after: int):
        super().__init__(f"the server is busy: {retry_after} s until the queue has room (estimate)")
        self.retry_after = retry_after


class ServerStopping(Exception):
    """The server is shutting down and takes no new work."""


class JobCancelled(Exception):
    """The file was cancelled before it finished (client gone, timeout, or shutdown)."""


@dataclass(eq=False)
class FileTask:
    """One uploaded file in the engine. ``future`` resolves to its Transcript (or an exception)."""

    path: str
    options: dict
    on_segment: Callable | None = None          # called on the engine thread with each finished Segment
    id: int = field(default_factory=lambda: next(_task_ids))
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    job: object = None
    cancel_reason: str = ""
    submitted_at: float = field(default_factory=time.monotonic)
    _segments_sent: int = 0


class EngineRunner:
    """Owns ``engine`` and steps it on a thread of its own; every method here may be called from any thread."""

    def __init__(self, engine, *, max_queued_files: int = 64):
        self.engine = engine
        self.max_queued_files = max_queued_files
        self.metrics = Metrics()
        self._commands: collections.deque = collections.deque()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._queued = 0                         # file tasks accepted and not yet finished
        self._files: list[FileTask] = []         # engine thread only
        self._sessions: list = []                # engine thread only: live sessions (server.live.LiveSession)
        self._stopping = False
        self._stop_now = False
        self._thread: threading.Thread | None = None
        self.finished_on_shutdown: list[int] = []
        self.cancelled_on_shutdown: list[int] = []

    # ------------------------------------------------------------ lifecycle
    def start(self) -> "EngineRunner":
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
                self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def begin_shutdown(self) -> None:
        """Take no new files or sessions from now on (work in flight goes on); ``stop`` ends the rest."""
        with self._lock:
            self._stopping = True

    def stop(self, grace_s: float = 30.0) -> dict:
        """Take no new work; let files and sessions in flight finish for up to ``grace_s``, then cancel the
        rest. Returns ``{"finished": [task ids], "cancelled": [task ids]}`` and logs it."""
        with self._lock:
            self._stopping = True
            in_flight = self._queued
        if self._thread is None:
            return {"finished": [], "cancelled": []}
        self._post(self._close_sessions)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (self._queued or self._sessions):
            time.sleep(0.05)
        self._stop_now = True
        self._wake.set()
        self._thread.join(timeout=60)
        summary = {"finished": list(self.finished_on_shutdown), "cancelled": list(self.cancelled_on_shutdown)}
        log.warning("shutdown: %d file(s) in flight; %d finished, %d cancelled %s", in_flight,
                    len(summary["finished"]), len(summary["cancelled"]), summary["cancelled"] or "")
        return summary

    # ------------------------------------------------------------ any thread
    @property
    def queued_files(self) -> int:
        return self._queued

    @property
    def stopping(self) -> bool:
        return self._stopping

    def submit_file(self, path: str, *, on_segment: Callable | None = None, **options) -> FileTask:
        """Queue a file (options as ``Engine.submit_file`` takes them); QueueFull when the queue is full."""
        with self._lock:
            if self._stopping:
                raise ServerStopping("the server is shutting down")
            if self._queued >= self.max_queued_files:
                raise QueueFull(self._retry_after())
            self._queued += 1
        task = FileTask(path=path, options=options, on_segment=on_segment)
        self._post(lambda: self._start_file(task))
        return task

    def cancel_file(self, task: FileTask, reason: str) -> None:
        """Cancel a file (its cache blocks are freed at the engine's next step)."""
        self._post(lambda: self._cancel_file(task, reason))

    def add_session(self, session) -> None:
        """Register a live session (``server.live.LiveSession``): opened, polled after each step, dropped
        when its stream has finished."""
        with self._lock:
            if self._stopping:
                raise ServerStopping("the server is shutting down")
        self._post(lambda: self._open_session(session))

    def call(self, fn: Callable) -> None:
        """Run ``fn()`` on the engine thread between steps (feeding a stream, closing it, cancelling it)."""
        self._post(fn)

    def _post(self, fn: Callable) -> None:
        self._commands.append(fn)
        self._wake.set()

    def _retry_after(self) -> int:
        """Seconds until a queue slot frees, from the recent time per file (at least 1)."""
        per_file = self.metrics.recent_file_seconds() or 5.0
        return max(1, min(300, math.ceil(per_file)))

    # ---------------------------------------------------------- engine thread
    def _run(self) -> None:
        while not self._stop_now:
            while self._commands:
                self._run_command(self._commands.popleft())
            if self.engine.has_work():
                started = time.perf_counter()
                try:
                    outputs = self.engine.step()
                except Exception:   # the engine fails requests itself; this is a bug: keep serving
                    log.exception("engine step failed")
                    outputs = []
                self.metrics.step(time.perf_counter() - started, sum(len(o.new_token_ids) for o in outputs))
                self._after_step()
            else:
                self._after_step()
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()
        self._cancel_everything()

    def _run_command(self, fn: Callable) -> None:
        try:
            fn()
        except Exception:
            log.exception("engine command failed")

    def _start_file(self, task: FileTask) -> None:
        try:
            task.job = self.engine.submit_file(task.path, **task.options)
        except Exception as e:
            self._finish_file(task, error=e)
            return
        self._files.append(task)

    def _cancel_file(self, task: FileTask, reason: str) -> None:
        if task.job is not None and not task.job.finished:
            task.cancel_reason = reason
            task.job.cancel()
            self._wake.set()

    def _open_session(self, session) -> None:
        session.open(self.engine)
        self._sessions.append(session)
        self.metrics.live_sessions = len(self._sessions)

    def _after_step(self) -> None:
        for task in list(self._files):
            job = task.job
            if task.on_segment is not None:
                segments = job.segments
                for seg in sorted(segments[task._segments_sent:], key=lambda s: s.start):
                    self._safely(task.on_segment, seg)
                task._segments_sent = len(segments)
            if job.finished:
                self._files.remove(task)
                self._finish_file(task)
        for session in list(self._sessions):
            self._safely(session.poll)
            if session.finished:
                self._sessions.remove(session)
                self.metrics.audio_seconds += session.audio_seconds
        self.metrics.live_sessions = len(self._sessions)
        self.metrics.queued_files = self._queued

    def _finish_file(self, task: FileTask, error: Exception | None = None) -> None:
        job = task.job
        with self._lock:
            self._queued -= 1
            stopping = self._stopping
        if error is None and job.state == "done":
            self.metrics.file_done(job.duration or 0.0, time.monotonic() - task.submitted_at)
            if stopping:
                self.finished_on_shutdown.append(task.id)
            task.future.set_result(job.transcript)
            return
        if error is None and job.state == "cancelled":
            if stopping:
                self.cancelled_on_shutdown.append(task.id)
            error = JobCancelled(task.cancel_reason or "cancelled")
        elif error is None:
            error = RuntimeError(job.error or "the file failed")
        task.future.set_exception(error)

    def _close_sessions(self) -> None:
        for session in self._sessions:
            self._safely(session.close_for_shutdown)

    def _cancel_everything(self) -> None:
        """The thread's last act: cancel what is left, so no waiter hangs."""
        for task in list(self._files):
            task.cancel_reason = "the server shut down before it finished"
            task.job.cancel()
        self.engine.step() if self._files else None
        for task in list(self._files):
            self._files.remove(task)
            self._finish_file(task)
        while self._commands:              # files posted but never started
            self._run_command(self._commands.popleft())
        for task in list(self._files):
            task.job.cancel()
            self._files.remove(task)
            self._finish_file(task)
        for session in self._sessions:
            self._safely(session.cancel_now)

    @staticmethod
    def _safely(fn, *args) -> None:
        try:
            fn(*args)
        except Exception:   # one broken listener must not stop the engine thread
            log.exception("server callback failed")
