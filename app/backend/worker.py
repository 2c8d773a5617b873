"""The engine's thread: owns the Engine, runs its steps, reports with signals.

The UI never touches the engine. It sends commands (queued slot calls) and
receives typed signals. The worker pumps the engine with a zero-interval
QTimer, one ``Engine.step()`` per timer event, so commands sent from the UI
are handled between steps and a long queue never blocks a cancel.

Files are submitted to the engine as they come, in the UI's queue order (``reorder_jobs``
keeps that order); the engine's file admission decides which start (its ``max_decoding``:
the "Files at once" setting, ``set_parallel_files``). The worker holds files back only
while no model is loaded.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app import settings as S
from app.queue.eta import EtaEstimator, MachineSpeed, bounded

log = logging.getLogger(__name__)

FINAL_STATES = ("done", "failed", "cancelled")
IDLE_STEP_S = 0.002   # a step quicker than this, with no outputs, found nothing to do
IDLE_POLL_MS = 15     # then poll at this interval: well under live-caption latency


def _device_label(eng) -> str:
    """'cpu, float32' or 'cuda, bfloat16': what the status bar shows the engine runs on."""
    device = str(getattr(eng, "device", "cpu"))
    dtype = getattr(eng, "dtype", "")
    if dtype and getattr(eng, "quantize", None):
        dtype += f", {eng.quantize} weights"
    return f"{device}, {dtype}" if dtype else device


def _default_loader(model_dir, device=None, dtype=None, *, aligner=None, **options):
    from app.backend.remote_engine import REMOTE_PREFIX, connect

    if str(model_dir).startswith(REMOTE_PREFIX):   # Settings > Engine: Server
        return connect(str(model_dir))
    import engine  # imported here: torch takes seconds, and only this thread needs it

    return engine.load(model_dir, aligner=aligner, config=engine.EngineConfig(device=device, dtype=dtype, **options))


@dataclass
class _Request:
    """What the UI asked for, kept so a job can be re-submitted after a model change."""

    path: str
    language: str | None
    context: str
    word_timestamps: bool
    max_chunk_seconds: int | None = None   # None = the engine's default
    speakers: str = ""                     # "off", "auto" or a count; "": the worker's ``speakers``
    job: Any = None
    started_at: float | None = None
    reported_progress: float = -1.0
    eta: EtaEstimator = field(default_factory=EtaEstimator)
    duration_sent: bool = False
    segments_sent: int = 0


@dataclass(frozen=True)
class CaptionEvent:
    """What changed in a live stream's captions since the worker's last event for it.

    ``segments`` are the ones committed since then, in order; ``first`` is the index of the first
    of them in the session (so a receiver can tell it has every segment, each once);
    ``tentative`` is the whole uncommitted text now, replacing the last event's; ``relabelled``
    the session indices of segments sent before whose speaker label was corrected since (live
    speaker labels, engine.pipelines.live_speakers): the receiver redraws those lines.
    """

    first: int
    segments: tuple
    tentative: str
    relabelled: tuple = ()


@dataclass
class _StreamState:
    stream: Any
    committed_count: int = 0        # segments of stream.committed sent so far
    changes_seen: int = 0           # speaker corrections (stream.speakers.changes) looked at so far
    tentative: str = ""
    lag: int = 0                    # whole seconds the stream's text is behind its audio, as last sent
    extra: dict = field(default_factory=dict)


class EngineWorker(QObject):
    """Lives in its own QThread (see EngineClient); every slot runs there."""

    model_loading = Signal(str)            # model folder
    model_loaded = Signal(str, str)        # model folder, device
    model_failed = Signal(str)             # plain error message
    job_started = Signal(int)              # job id
    job_duration = Signal(int, float)      # job id, seconds of audio
    job_progress = Signal(int, float, float)  # job id, progress 0..1, ETA seconds (-1: unknown)
    job_finished = Signal(int, object)     # job id, engine.text.types.Transcript
    job_partial = Signal(int, object)      # job id, the Segments transcribed so far (FileJob.partial_segments)
    job_failed = Signal(int, str)          # job id, error naming the file
    job_cancelled = Signal(int)
    stream_captions = Signal(int, object)  # stream id, CaptionEvent: new committed Segments, tentative text
    stream_finished = Signal(int)
    stream_failed = Signal(int, str)
    stream_lag = Signal(int, float)        # stream id, seconds its text is behind the audio (Stream.lag_seconds)
    activity = Signal(str)                 # short status-bar text
    speed_measured = Signal(float)         # this machine's audio seconds per second (app.queue.eta.MachineSpeed)
    segment_aligned = Signal(object)       # app.backend.segment_align.SegmentAlignResult of an edited segment
    stopped = Signal()

    def __init__(self, loader: Callable | None = None):
        super().__init__()
        self._loader = loader or _default_loader
        self.engine = None
        self._requests: dict[int, _Request] = {}   # in the UI's queue order
        self.parallel_files: int | None = None    # the engine's files at once (None: its own default)
        self.speakers = None     # None, "auto" or a count: files submitted from now on get speaker labels
        self.live_speakers = False   # live streams opened from now on label speakers (engine.pipelines.live_speakers)
        self._streams: dict[int, _StreamState] = {}
        self._alignments: list = []   # app.backend.segment_align.PendingSegmentAlignment, not answered yet
        self._activity = ""
        self.speed = MachineSpeed()   # the UI gives it the value kept from earlier runs
        self.hardware = ""            # the loaded engine's platform line (Help > About)
        self.model_chunk_seconds = None   # the loaded model's automatic chunk length (Settings shows it)
        self._pump_timer = QTimer(self)  # moved to the worker thread along with self
        self._pump_timer.setInterval(0)
        self._pump_timer.timeout.connect(self._pump)

    # -- commands ---------------------------------------------------------------
    @Slot(str, str, str, str, int, str)
    def load_model(self, model_dir: str, device: str = "", dtype: str = "", aligner: str = "",
                   kv_cache_mb: int = 0, quantize: str = ""):
        self._set_activity(f"Loading model {Path(model_dir).name}…")
        self.model_loading.emit(model_dir)
        try:
            # the budget only when one is set: loaders given by tests take no options
            options = {"kv_cache_bytes": int(kv_cache_mb) << 20} if kv_cache_mb else {}
            if quantize:
                options["quantize"] = quantize
            new_engine = self._loader(model_dir, device or None, dtype or None,
                                      aligner=aligner or None, **options)
        except Exception as exc:  # any failure must reach the user, not kill the thread
            log.exception("loading model %s failed", model_dir)
            message = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            message = " ".join(message.split())   # one line, as the CLI prints it
            if message.startswith(model_dir):     # engine errors already name the folder
                message = message[len(model_dir):].lstrip(":/ ")
            self.model_failed.emit(f"Could not load the model in {model_dir}: {message}")
            self._set_activity("No model loaded")
            return
        old, self.engine = self.engine, new_engine
        for pending in self._alignments:   # the old engine's aligner will not step them: answered now
            pending.cancel("the model was reloaded before its words were aligned")
        for request in self._requests.values():  # the old engine's jobs move to the new one
            if request.job is not None and old is not None:
                _quietly(request.job.cancel)
            request.job = None
        self._apply_parallel_files()
        self._submit_pending()
        self.hardware = str(getattr(new_engine, "hardware", "") or "")
        # Engine.default_chunk_seconds; a server (Settings > Engine) or a test's stand-in may not say
        self.model_chunk_seconds = getattr(new_engine, "default_chunk_seconds", None)
        self.model_loaded.emit(str(getattr(new_engine, "model_dir", model_dir)),
                               _device_label(new_engine))
        self._kick()

    @Slot(int, str, str, str, bool, int, str)
    def add_file(self, job_id: int, path: str, language: str = "", context: str = "",
                 word_timestamps: bool = False, max_chunk_seconds: int = 0, speakers: str = ""):
        """Submit a file to the engine at the end of its queue (the engine decides when it starts).
        A ``job_id`` the worker holds already is replaced in its place (new options)."""
        old = self._requests.get(job_id)
        if old is not None and old.job is not None:
            _quietly(old.job.cancel)
        self._requests[job_id] = _Request(path, language or None, context or "", word_timestamps,
                                          max_chunk_seconds or None, speakers or "")
        self._submit_pending()
        if old is not None:
            self._sync_order()
        self._kick()

    @Slot(object)
    def reorder_jobs(self, job_ids):
        """The UI's queue order: these jobs take the places they hold now, in this order, here and in
        the engine's queue (waiting files start in that order)."""
        wanted = [j for j in dict.fromkeys(job_ids) if j in self._requests]
        keys = list(self._requests)
        place = {job_id: i for i, job_id in enumerate(keys)}
        for slot, job_id in zip(sorted(place[j] for j in wanted), wanted):
            keys[slot] = job_id
        self._requests = {j: self._requests[j] for j in keys}
        self._sync_order()

    @Slot(int)
    def set_parallel_files(self, count: int):
        """Settings > "Files at once": how many files the engine's admission opens at once."""
        self.parallel_files = max(1, int(count))
        self._apply_parallel_files()
        self._kick()

    def _apply_parallel_files(self):
        admission = getattr(self.engine, "admission", None)   # a server's engine has its own policy
        if admission is not None and self.parallel_files is not None:
            try:
                admission.set_max_decoding(self.parallel_files)
            except Exception:
                log.exception("setting the engine's files at once to %s failed", self.parallel_files)

    def _sync_order(self):
        """Give the engine the queue order of the files it holds."""
        reorder = getattr(self.engine, "reorder_files", None)
        if reorder is not None:
            jobs = [r.job for r in self._requests.values() if r.job is not None]
            if jobs:
                _quietly(lambda: reorder(jobs))

    @Slot(int)
    def cancel_job(self, job_id: int):
        request = self._requests.pop(job_id, None)
        if request is None:
            return
        if request.job is not None:
            _quietly(request.job.cancel)
        self.job_cancelled.emit(job_id)

    @Slot(int, str, str)
    def open_stream(self, stream_id: int, language: str = "", context: str = ""):
        if self.engine is None:
            self.stream_failed.emit(stream_id, "No model is loaded yet; choose one in Models.")
            return
        try:
            extra = {}
            if self.live_speakers:
                from app.transcript.speaker_setup import prepare_speakers

                extra["speakers"] = bool(prepare_speakers(self.engine, True))
            stream = self.engine.open_stream(language=language or None, context=context or "", **extra)
        except Exception as exc:
            log.exception("open_stream failed")
            self.stream_failed.emit(stream_id, f"Could not start live transcription: {exc}")
            return
        self._streams[stream_id] = _StreamState(stream)

    @Slot(int, object)
    def feed_stream(self, stream_id: int, pcm):
        state = self._streams.get(stream_id)
        if state is None or pcm is None or len(pcm) == 0:
            return
        try:
            state.stream.feed(pcm)
        except Exception as exc:
            self._fail_stream(stream_id, f"Live transcription stopped: {exc}")
            return
        self._kick()

    @Slot(int)
    def close_stream(self, stream_id: int):
        state = self._streams.get(stream_id)
        if state is not None:
            _quietly(state.stream.close)
            self._kick()

    @Slot(object)
    def align_segment(self, request):
        """Re-align an edited segment with the loaded aligner (app.backend.segment_align): queued as an
        engine job, so files and live captions keep stepping; ``segment_aligned`` follows when it is done."""
        from app.backend.segment_align import start_alignment

        pending = start_alignment(self.engine, request)
        if pending.finished:
            self.segment_aligned.emit(pending.result())
            return
        self._alignments.append(pending)
        self._kick()

    @Slot()
    def shutdown(self):
        self._pump_timer.stop()
        for request in self._requests.values():
            if request.job is not None:
                _quietly(request.job.cancel)
        for state in self._streams.values():
            _quietly(getattr(state.stream, "cancel", state.stream.close))
        self._requests.clear()
        self._streams.clear()
        self._alignments.clear()
        self.engine = None
        self.stopped.emit()
        thread = self.thread()
        if thread is not None:
            thread.quit()

    # -- the pump ------------------------------------------------------------------
    def _kick(self):
        """New work arrived: step again as soon as the event loop is free."""
        if self.engine is None:
            return
        if self._pump_timer.interval() != 0:
            self._pump_timer.setInterval(0)
        if not self._pump_timer.isActive():
            self._pump_timer.start()

    def _submit_pending(self):
        if self.engine is None:
            return
        for job_id, request in list(self._requests.items()):
            if request.job is not None:
                continue
            try:
                extra = {}
                from app.transcript.speaker_setup import prepare_speakers, speakers_option

                # the file's own choice, else the Settings default; the model from the data folder
                speakers = speakers_option(request.speakers) if request.speakers else self.speakers
                if speakers is not None:
                    extra["speakers"] = prepare_speakers(self.engine, speakers)
                request.job = self.engine.submit_file(
                    request.path, language=request.language, context=request.context,
                    word_timestamps=request.word_timestamps,
                    max_chunk_seconds=request.max_chunk_seconds, **extra)
            except Exception as exc:
                self._requests.pop(job_id, None)
                self.job_failed.emit(job_id, _file_error(request.path, exc))

    @Slot()
    def _pump(self):
        engine = self.engine
        try:
            busy = engine is not None and engine.has_work()
        except Exception as exc:
            log.exception("has_work failed")
            busy = False
            self._blame(exc)
        if not busy:
            self._pump_timer.stop()
            self._report()
            self._set_activity(self._idle_text())
            return
        self._set_activity(self._busy_text())
        started = time.perf_counter()
        outputs = None
        try:
            outputs = engine.step()
        except Exception as exc:
            log.exception("engine step failed")
            self._blame(exc)
        # An open live stream keeps has_work() true through silence; a step that did
        # nothing and took no time means "idle", so wait a little instead of spinning a core.
        idle = not outputs and time.perf_counter() - started < IDLE_STEP_S
        self._pump_timer.setInterval(IDLE_POLL_MS if idle else 0)
        self._report()

    def _blame(self, exc: Exception):
        """A step raised: fail the jobs it was working on, keep everything else going."""
        live = [(i, r) for i, r in self._requests.items() if r.job is not None]
        running = [(i, r) for i, r in live if _state(r.job) == "running"]
        victims = running or [(i, r) for i, r in live if _state(r.job) not in FINAL_STATES]
        for job_id, request in victims:
            _quietly(request.job.cancel)
            self._requests.pop(job_id, None)
            self.job_failed.emit(job_id, _file_error(request.path, exc))
        if not victims:
            for stream_id in list(self._streams):
                self._fail_stream(stream_id, f"Live transcription stopped: {exc}")
            # Nothing left to blame: stop pumping until the next command instead of spinning.
            self._pump_timer.stop()

    def _report(self):
        now = time.monotonic()
        for pending in [p for p in self._alignments if p.finished]:
            self._alignments.remove(pending)
            self.segment_aligned.emit(pending.result())
        for job_id, request in list(self._requests.items()):
            job = request.job
            if job is None:
                continue
            state = _state(job)
            if state != "queued" and request.started_at is None:
                request.started_at = now
                request.eta.update(now, 0.0)   # processing starts now, not at the first progress
                self.job_started.emit(job_id)
            duration = getattr(job, "duration", None)
            if duration is not None and not request.duration_sent:
                request.duration_sent = True
                self.job_duration.emit(job_id, float(duration))
            if state == "done":
                self._requests.pop(job_id)
                if duration and request.started_at is not None:
                    self.speed.record(float(duration), now - request.started_at)
                    self.speed_measured.emit(self.speed.value or 0.0)
                self.job_finished.emit(job_id, job.transcript)
            elif state == "failed":
                self._requests.pop(job_id)
                self.job_failed.emit(job_id, job.error or f"{request.path}: transcription failed")
            elif state == "cancelled":
                self._requests.pop(job_id)
                self.job_cancelled.emit(job_id)
            else:
                done = int(getattr(job, "segments_done", 0) or 0)
                if done != request.segments_sent and hasattr(job, "partial_segments"):
                    request.segments_sent = done
                    self.job_partial.emit(job_id, job.partial_segments())
                progress = float(getattr(job, "progress", 0.0) or 0.0)
                if progress != request.reported_progress:
                    request.reported_progress = progress
                    # Waiting in the engine's queue is not processing: no estimate from it.
                    eta = request.eta.update(now, progress) if request.started_at is not None \
                        else -1.0
                    eta = bounded(eta, duration, progress, self.speed)
                    self.job_progress.emit(job_id, progress, eta)
        for stream_id, st in list(self._streams.items()):
            self._send_captions(stream_id, st)
            lag = float(getattr(st.stream, "lag_seconds", 0.0) or 0.0)
            if int(lag) != st.lag:
                st.lag = int(lag)
                self.stream_lag.emit(stream_id, lag)
            if st.stream.finished:
                self._streams.pop(stream_id)
                error = getattr(st.stream, "error", None)
                if getattr(st.stream, "state", "") == "failed" or error:
                    self.stream_failed.emit(stream_id, f"Live transcription stopped: {error or 'failed'}")
                else:
                    self.stream_finished.emit(stream_id)

    def _send_captions(self, stream_id: int, st: _StreamState):
        """Emit what is new since the last event: never the whole session again."""
        committed = st.stream.committed        # only grows (Stream's contract)
        count = len(committed)
        tentative = st.stream.tentative or ""
        changes = getattr(st.stream, "speakers", None)
        changes = changes.changes[st.changes_seen:] if changes is not None else []
        st.changes_seen += len(changes)
        # corrections of lines not sent yet need nothing: those segments go out with their new label
        relabelled = tuple(sorted({c.index for c in changes if c.index < st.committed_count}))
        if count == st.committed_count and tentative == st.tentative and not relabelled:
            return
        new = tuple(committed[st.committed_count:count])
        event = CaptionEvent(st.committed_count, new, tentative, relabelled)
        st.committed_count, st.tentative = count, tentative
        self.stream_captions.emit(stream_id, event)

    def _fail_stream(self, stream_id: int, message: str):
        state = self._streams.pop(stream_id, None)
        if state is not None:
            _quietly(state.stream.close)
            self.stream_failed.emit(stream_id, message)

    # -- activity text -----------------------------------------------------------------
    def _busy_text(self) -> str:
        # What the engine really runs, as the queue's rows say it: a job its admission has not
        # started yet is "waiting", not "transcribing".
        states = [_state(r.job) for r in self._requests.values() if r.job is not None]
        files, waiting = states.count("running"), states.count("queued")
        parts = []
        if files:
            parts.append(f"Transcribing {files} file{'s' if files != 1 else ''}")
        if waiting:
            parts.append(f"{waiting} waiting")
        if self._streams:
            parts.append("Live captions")
        return " · ".join(parts) or "Working…"

    def _idle_text(self) -> str:
        if self.engine is None:
            return "No model loaded"
        return "Listening" if self._streams else "Idle"

    def _set_activity(self, text: str):
        if text != self._activity:
            self._activity = text
            self.activity.emit(text)


def _state(job) -> str:
    try:
        return str(job.state)
    except Exception:
        return "failed"


def _file_error(path: str, exc: Exception) -> str:
    text = str(exc)
    if path in text:  # engine errors already name the file
        return text
    return f"{Path(path).name}: transcription failed ({type(exc).__name__}: {text})"


def _quietly(fn):
    try:
        fn()
    except Exception:
        log.exception("ignored error in %s", getattr(fn, "__name__", fn))
