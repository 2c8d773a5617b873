"""Settings > Engine "Server": an engine-shaped handle on a qwen3-asr server, so the app works the same over
the network.

``RemoteEngine`` has what ``app.backend.worker.EngineWorker`` uses of ``engine.Engine``
(``submit_file``, ``reorder_files``, ``open_stream``, ``has_work``, ``step``, ``model_dir``,
``device``, ``dtype``, ``aligner``; ``admission`` is None), and its jobs and streams the
attributes the worker reads (``state``, ``progress``, ``duration``, ``transcript``, ``error``,
``cancel``; ``feed``, ``close``, ``committed``, ``tentative``, ``lag_seconds``, ``finished``). A
live stream is a WebSocket session. The queue, transcript view, exports, history and live
window need no change.

Files: the server's bounded queue is the policy here (it answers 429 when full), so the app
keeps only a small window of uploads in flight (``UPLOADS_AT_ONCE``, whatever "Files at
once" says): a hundred queued files wait here, in queue order (``reorder_files``), not in a
hundred uploads refused with 429. A file the server still refuses as busy (other clients
filled its queue) waits its Retry-After estimate and is sent again, keeping its upload slot.
"""
from __future__ import annotations

import concurrent.futures
import re
import threading

from app.settings import Key
from engine.text.types import Segment

ENGINE_MODE = Key("engine/mode", "local")            # "local": this computer; "server": a qwen3-asr server
SERVER_URL = Key("engine/server_url", "http://127.0.0.1:8000")
SERVER_KEY = Key("engine/server_key", "")
REMOTE_PREFIX = "server+"       # a "model folder" naming a server: what the worker's loader is given
UPLOADS_AT_ONCE = 4             # files sent to the server at once: a window well under its queue's bound
BUSY_RETRY_S = (1.0, 60.0)      # a 429's wait before sending again: its Retry-After, within these bounds
STEP_WAIT_S = 0.05              # step() waits this long for news: the worker's pump never spins


def remote_model(settings) -> str | None:
    """The worker's model argument for the server in ``settings``, or None when the engine is local."""
    if settings.get(ENGINE_MODE) != "server":
        return None
    return REMOTE_PREFIX + settings.get(SERVER_URL).strip()


def engine_choice(settings) -> list:
    """What a model reload depends on, beside the local model settings."""
    return [settings.get(ENGINE_MODE), settings.get(SERVER_URL), settings.get(SERVER_KEY)]


def connect(model: str, api_key: str | None = None) -> "RemoteEngine":
    """The loader for ``server+URL``: checks the server answers, raises ValueError with the reason if not."""
    from server.client import ServerError, health

    url = model[len(REMOTE_PREFIX):] if model.startswith(REMOTE_PREFIX) else model
    if api_key is None:
        from app.settings import Settings

        api_key = Settings().get(SERVER_KEY) or None
    try:
        info = health(url, api_key)
    except ServerError as e:
        raise ValueError(f"the server at {url} does not answer: {e}") from None
    return RemoteEngine(url, api_key, info)


class RemoteEngine:
    def __init__(self, url: str, api_key: str | None, info: dict):
        self.url, self.api_key = url.rstrip("/"), api_key
        self.model_dir = f"{self.url}/{info.get('model', 'qwen3-asr')}"   # the status bar shows its last part
        self.device, self.dtype, self.quantize = "server", self.url, None
        self.aligner = True if info.get("aligner") else None
        self.default_chunk_seconds = info.get("max_chunk_seconds")   # the server model's automatic chunk length
        self._pool = concurrent.futures.ThreadPoolExecutor(UPLOADS_AT_ONCE, thread_name_prefix="upload")
        self._jobs: list[RemoteFileJob] = []
        self._queue: list[RemoteFileJob] = []    # files not sent yet, in queue order
        self._queue_lock = threading.Lock()
        self._streams: list[RemoteStream] = []
        self.news = threading.Event()

    admission = None    # no local file admission: the server's queue decides (see the module docstring)

    def submit_file(self, path, *, language=None, context: str = "", word_timestamps: bool = False,
                    max_chunk_seconds=None, priority: int = 0):
        job = RemoteFileJob(self, str(path), language=language, context=context,
                            word_timestamps=bool(word_timestamps and self.aligner))
        self._jobs.append(job)
        with self._queue_lock:
            self._queue.append(job)
        self._pool.submit(self._send_next)     # one pool task per file: each sends the first one waiting
        return job

    def reorder_files(self, jobs) -> None:
        """As Engine.reorder_files: files not sent yet are sent in this order."""
        with self._queue_lock:
            place = {id(job): i for i, job in enumerate(self._queue)}
            wanted = list({id(job): job for job in jobs if id(job) in place}.values())
            for slot, job in zip(sorted(place[id(job)] for job in wanted), wanted):
                self._queue[slot] = job

    def _send_next(self) -> None:
        with self._queue_lock:
            job = next((j for j in self._queue if not j.finished), None)
            self._queue = [j for j in self._queue if j is not job and not j.finished]
        if job is not None:
            job.run()

    def open_stream(self, *, language=None, context: str = "", **_options):
        stream = RemoteStream(self, language=language, context=context)
        self._streams.append(stream)
        return stream

    def has_work(self) -> bool:
        self._jobs = [j for j in self._jobs if not j.finished]
        self._streams = [s for s in self._streams if not s.finished]
        return bool(self._jobs or self._streams)

    def step(self) -> list:
        """Wait briefly for news from the uploads or sessions; the worker then reads their state."""
        changed = self.news.wait(STEP_WAIT_S)
        self.news.clear()
        return [True] if changed else []


def busy_wait_seconds(message: str) -> float:
    """How long to wait after a 429: the server's estimate ("retry in N s", its Retry-After),
    within BUSY_RETRY_S; the shortest wait when it gave none."""
    found = re.search(r"retry in (\d+(?:\.\d+)?) s", message or "")
    low, high = BUSY_RETRY_S
    return min(high, max(low, float(found.group(1)))) if found else low


class RemoteFileJob:
    def __init__(self, engine: RemoteEngine, source: str, **options):
        from server.client import FileRequest

        self.engine, self.source = engine, source
        self.state, self.progress, self.duration = "queued", 0.0, None
        self.transcript, self.error = None, None
        self._cancelled = threading.Event()
        self._request = FileRequest(engine.url, source, api_key=engine.api_key, **options)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    def run(self) -> None:
        from server.client import ServerError

        while not self.finished:
            self.state = "running"
            self.engine.news.set()
            try:
                transcript = self._request.run()
            except ServerError as e:
                if e.status == 429 and not self.finished:    # the server's queue is full: wait, send again
                    self.state = "queued"
                    self.engine.news.set()
                    self._cancelled.wait(busy_wait_seconds(e.message))
                    continue
                self._fail(e)
            except (OSError, ValueError) as e:
                self._fail(e)
            else:
                if not self._cancelled.is_set():
                    self.transcript, self.duration, self.progress = transcript, transcript.duration, 1.0
                    self.state = "done"
            break
        self.engine.news.set()

    def _fail(self, error: Exception) -> None:
        if self._cancelled.is_set():
            self.state = "cancelled"
        else:
            self.error, self.state = f"{self.source}: {error}", "failed"

    def cancel(self) -> None:
        if not self.finished:
            self.state = "cancelled"
            self._cancelled.set()
            self._request.cancel()


class RemoteStream:
    """A live session on the server; committed segments arrive as ``completed`` events."""

    def __init__(self, engine: RemoteEngine, *, language=None, context: str = ""):
        from server.client import LiveConnection

        self.engine = engine
        self.committed: list[Segment] = []
        self.tentative, self.state, self.error, self.lag_seconds = "", "listening", None, 0.0
        self._open_items: set[str] = set()
        self._closing = False
        self._lock = threading.Lock()
        self._conn = LiveConnection(engine.url, self._on_event, api_key=engine.api_key, language=language,
                                    context=context)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    def feed(self, pcm) -> None:
        if self._closing or self.finished:
            raise RuntimeError("feed() on a closed stream")
        self._conn.send(pcm)

    def close(self) -> None:
        """End of audio: the open utterance ends now; finished once every utterance is completed."""
        if self._closing or self.finished:
            return
        self._closing = True
        self._conn.commit()
        self._maybe_done()

    def cancel(self) -> None:
        self.state = "cancelled"
        self._conn.close()

    def _on_event(self, event: dict) -> None:   # the connection's reader thread
        kind = event.get("type", "")
        with self._lock:
            if kind == "input_audio_buffer.speech_started":
                self._open_items.add(event["item_id"])
            elif kind.endswith(".completed"):
                self._open_items.discard(event.get("item_id"))
                if event.get("transcript"):
                    language = event.get("language")
                    self.committed.append(Segment(start=event["start"], end=event["end"], text=event["transcript"],
                                                  language=language.capitalize() if language else None))
            elif kind.endswith(".tentative"):
                self.tentative, self.lag_seconds = event.get("text", ""), float(event.get("lag_seconds", 0.0))
            elif kind == "error" and "broke" in event.get("error", {}).get("message", "") and not self.finished:
                self.error, self.state = event["error"]["message"], "failed"
            elif kind == "session.closed" and not self.finished:
                self.state = "done" if self._closing else "failed"
                self.error = None if self._closing else "the server closed the live session"
        self._maybe_done()
        self.engine.news.set()

    def _maybe_done(self) -> None:
        # After close(): the commit's utterance shows up as speech_started/completed; a short grace
        # lets a commit with no speech pass without waiting for anything.
        if self._closing and not self._open_items and not self.finished:
            threading.Timer(1.0, self._finish_if_quiet).start()

    def _finish_if_quiet(self) -> None:
        with self._lock:
            if self._closing and not self._open_items and not self.finished:
                self.state = "done"
        if self.state == "done":
            self._conn.close()
            self.engine.news.set()
