"""The UI thread's handle on the engine thread.

Starts an EngineWorker in a QThread and turns method calls into queued slot
calls, so the UI never blocks on the engine and never calls it directly.
Connect to ``client.worker``'s signals for results; Qt delivers them in the
UI thread.
"""
from __future__ import annotations

import itertools
import logging
from typing import Callable

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal

from app.backend.main_thread_gc import MainThreadGC
from app.backend.worker import EngineWorker

log = logging.getLogger(__name__)


class EngineClient(QObject):
    # Requests, each connected to the worker slot of the same name (queued across threads).
    _load_model = Signal(str, str, str, str, int, str)
    _add_file = Signal(int, str, str, str, bool, int, str)
    _cancel_job = Signal(int)
    _reorder_jobs = Signal(object)
    _set_parallel_files = Signal(int)
    _open_stream = Signal(int, str, str)
    _feed_stream = Signal(int, object)
    _close_stream = Signal(int)
    _align_segment = Signal(object)
    _shutdown = Signal()

    def __init__(self, loader: Callable | None = None, parent=None):
        super().__init__(parent)
        self.engine_thread = QThread()
        self.engine_thread.setObjectName("engine")
        self.worker = EngineWorker(loader)
        self.worker.moveToThread(self.engine_thread)
        self._load_model.connect(self.worker.load_model)
        self._add_file.connect(self.worker.add_file)
        self._cancel_job.connect(self.worker.cancel_job)
        self._reorder_jobs.connect(self.worker.reorder_jobs)
        self._set_parallel_files.connect(self.worker.set_parallel_files)
        self._open_stream.connect(self.worker.open_stream)
        self._feed_stream.connect(self.worker.feed_stream)
        self._close_stream.connect(self.worker.close_stream)
        self._align_segment.connect(self.worker.align_segment)
        self._shutdown.connect(self.worker.shutdown)
        self.worker.model_loaded.connect(self._remember_model)
        self._stream_ids = itertools.count(1)
        self.model_dir = ""
        self.device = ""
        self._gc = MainThreadGC.shared()   # widgets must never be garbage-collected in the engine thread
        self._gc.acquire()
        self._gc_held = True
        self.engine_thread.start()

    def _remember_model(self, model_dir: str, device: str):
        self.model_dir, self.device = model_dir, device

    def load_model(self, model_dir, device: str = "", dtype: str = "", aligner: str = "", kv_cache_mb: int = 0,
                   quantize: str = ""):
        """``kv_cache_mb`` 0 leaves the KV cache budget to the engine; ``quantize`` "int8" stores the
        decoder's weights as int8 (a quantization setting, not a dtype)."""
        self._load_model.emit(str(model_dir), device or "", dtype or "", str(aligner or ""), int(kv_cache_mb or 0),
                              quantize or "")

    @property
    def hardware(self) -> str:
        """What the loaded model runs on (the engine's platform line), for Help > About."""
        return self.worker.hardware

    @property
    def model_chunk_seconds(self) -> float | None:
        """The loaded model's automatic chunk length (Engine.default_chunk_seconds), None when unknown."""
        return self.worker.model_chunk_seconds

    def add_file(self, job_id: int, path, language: str | None = None, context: str = "",
                 word_timestamps: bool = False, max_chunk_seconds: int = 0, speakers: str = ""):
        """``max_chunk_seconds`` 0 leaves the chunk length to the engine; ``speakers`` "off", "auto"
        or a count for this file ("": the worker's Settings default)."""
        self._add_file.emit(job_id, str(path), language or "", context or "", bool(word_timestamps),
                            int(max_chunk_seconds or 0), speakers or "")

    def cancel_job(self, job_id: int):
        self._cancel_job.emit(job_id)

    def reorder_jobs(self, job_ids):
        """The queue's order of these jobs: the engine starts waiting files in it."""
        self._reorder_jobs.emit([int(j) for j in job_ids])

    def set_parallel_files(self, count: int):
        """How many files the engine opens at once (its file admission; Settings "Files at once")."""
        self._set_parallel_files.emit(int(count))

    def open_stream(self, language: str | None = None, context: str = "") -> int:
        stream_id = next(self._stream_ids)
        self._open_stream.emit(stream_id, language or "", context or "")
        return stream_id

    def feed_stream(self, stream_id: int, pcm: np.ndarray):
        """Callable from any thread (the live window's capture thread calls it): a queued signal."""
        self._feed_stream.emit(stream_id, np.ascontiguousarray(pcm, dtype=np.float32))

    def close_stream(self, stream_id: int):
        self._close_stream.emit(stream_id)

    def align_segment(self, request):
        """Time an edited segment's words with the loaded aligner (app.backend.segment_align.SegmentAlignRequest);
        the answer comes as ``worker.segment_aligned``."""
        self._align_segment.emit(request)

    def shutdown(self, wait_ms: int = 30000) -> bool:
        """Stop the engine thread; waits for a step or a model load in progress to end."""
        if not self.engine_thread.isRunning():
            self._release_gc()
            return True
        self._shutdown.emit()
        finished = self.engine_thread.wait(wait_ms)
        if not finished:
            log.warning("engine thread did not stop within %d ms", wait_ms)
        else:
            self._release_gc()
        return finished

    def _release_gc(self):
        if self._gc_held:
            self._gc_held = False
            self._gc.release()
