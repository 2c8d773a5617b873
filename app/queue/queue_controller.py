"""Runs the file queue: hands waiting files to the engine, records every change in history.

The engine gets at most ``parallel`` files at a time so the rest stay
editable and reorderable. History is written before the UI changes, so a
crash at any moment leaves the database telling the truth.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.queue.queue_model import EDITABLE_STATES, IN_FLIGHT, QueueItem, QueueModel

log = logging.getLogger(__name__)


class QueueController(QObject):
    message = Signal(str)            # one line for the status bar
    job_done = Signal(int)           # job id, its transcript is in the model item
    job_changed = Signal(int)        # any state or progress change
    _duration_read = Signal(int, float)  # from the duration thread

    def __init__(self, client, history, parallel: int = 4, parent=None):
        super().__init__(parent)
        self.client, self.history = client, history
        self.parallel = max(1, parallel)
        self.word_timestamps = False
        self.max_chunk_seconds = 0       # 0 = the engine's default
        # new files' speaker count (Settings): "off", "auto" or a count; None: the worker's default
        self.speakers: str | None = None
        # names a finished transcript's speakers from the last run's renames and remembered voices
        # (app.transcript.speaker_names.SpeakerNamer; None: left as labelled)
        self.speaker_namer = None
        self.model = QueueModel(self)
        self.model.options_edited.connect(self._options_edited)
        self.model.speakers_chosen.connect(self._speakers_chosen)
        self._duration_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="durations")
        self._duration_read.connect(self._set_duration)
        worker = client.worker
        worker.job_started.connect(self._started)
        worker.job_duration.connect(lambda j, d: self._changed(j, duration=d))
        worker.job_progress.connect(lambda j, p, eta: self._changed(j, progress=p, eta=eta))
        worker.job_finished.connect(self._finished)
        worker.job_partial.connect(self._partial)
        self.partials: dict[int, list] = {}   # job id: segments transcribed so far (while running)
        worker.job_failed.connect(self._failed)
        worker.job_cancelled.connect(self._cancelled)

    # -- adding ------------------------------------------------------------------------------
    def add_files(self, paths, language: str | None = None, context: str = "",
                  speakers: str | None = None) -> list[int]:
        """Queue ``paths``; ``speakers`` ("off", "auto", a count) defaults to ``self.speakers``."""
        ids = []
        speakers = speakers or self.speakers
        for path in paths:
            job_id = self.history.add_file(str(path), language, context, speakers)
            self.model.add(QueueItem(job_id, str(path), language or None, context or "", speakers))
            ids.append(job_id)
        if ids:
            self.message.emit(f"Added {len(ids)} file{'s' if len(ids) != 1 else ''}")
        self._read_durations(ids)
        self.dispatch()
        return ids

    def restore(self, records) -> list[int]:
        """Re-queue history.FileRecord rows left unfinished by the last run."""
        ids = []
        for rec in records:
            self.history.set_state(rec.id, "queued")
            self.model.add(QueueItem(rec.id, rec.path, rec.language, rec.context, rec.speakers))
            ids.append(rec.id)
        self._read_durations(ids)
        self.dispatch()
        return ids

    def _read_durations(self, ids):
        """Show lengths before anything runs. Off the UI thread: a file whose header
        records no duration is decoded to count its samples, which can take seconds."""
        jobs = [(job_id, self.model.item(job_id).path) for job_id in ids]
        if jobs:
            self._duration_pool.submit(self._durations_in_background, jobs)

    def _durations_in_background(self, jobs):
        from engine.audio.decode import audio_info

        for job_id, path in jobs:
            try:
                self._duration_read.emit(job_id, float(audio_info(path).duration))
            except Exception:
                pass  # the engine reports unreadable files with a proper message later

    def _set_duration(self, job_id: int, duration: float):
        item = self.model.item(job_id)
        if item is not None and item.duration is None:
            self.model.update(job_id, duration=duration)

    def shutdown(self):
        self._duration_pool.shutdown(wait=False, cancel_futures=True)

    # -- dispatch -------------------------------------------------------------------------
    def dispatch(self) -> None:
        """Hand waiting files to the engine, in table order, up to ``parallel`` at a time."""
        while self.model.count(*IN_FLIGHT) < self.parallel:
            item = self.model.next_waiting()
            if item is None:
                return
            self.history.set_state(item.job_id, "queued")
            self.model.update(item.job_id, state="queued", progress=0.0, eta=-1.0, error=None)
            self.client.add_file(item.job_id, item.path, item.language, item.context,
                                 self.word_timestamps, self.max_chunk_seconds, item.speakers or "")

    # -- user actions ----------------------------------------------------------------------
    def cancel(self, job_ids) -> None:
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is None:
                continue
            if item.state in IN_FLIGHT:
                self.client.cancel_job(job_id)   # confirmed by job_cancelled
            elif item.state == "waiting":
                self._cancelled(job_id)

    def retry(self, job_ids) -> None:
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is not None and item.state in ("failed", "cancelled"):
                self.history.set_state(job_id, "queued")
                self.model.update(job_id, state="waiting", progress=0.0, eta=-1.0, error=None)
        self.dispatch()

    def transcribe_again(self, job_ids) -> None:
        """Queue finished files once more (another model or language may do better)."""
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is not None and item.state == "done":
                self.history.set_state(job_id, "queued")
                self.model.update(job_id, state="waiting", progress=0.0, eta=-1.0, error=None,
                                  transcript=None)
        self.dispatch()

    def remove(self, job_ids) -> None:
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is None:
                continue
            if item.state in IN_FLIGHT:
                self.client.cancel_job(job_id)
            if item.state not in ("done", "failed"):
                self.history.set_state(job_id, "cancelled")
            self.model.remove(job_id)
        self.dispatch()

    def move(self, job_ids, delta: int) -> None:
        ordered = sorted(job_ids, key=self.model.row_of, reverse=delta > 0)
        for job_id in ordered:
            self.model.move(job_id, delta)

    def _options_edited(self, job_id: int, language, context: str):
        self.history.set_options(job_id, language, context)
        item = self.model.item(job_id)
        if item is not None and item.state == "done":   # a finished file's new language
            self.message.emit(f"Transcribing {item.name} again in {language or 'a detected language'}")
            self.transcribe_again([job_id])

    def _speakers_chosen(self, job_id: int, speakers: str):
        self.history.set_speakers(job_id, speakers)
        item = self.model.item(job_id)
        if item is not None and item.state == "done":   # a finished file's new speaker count
            self.message.emit(f"Transcribing {item.name} again with speakers: {speakers}")
            self.transcribe_again([job_id])

    # -- engine results ------------------------------------------------------------------------
    def _changed(self, job_id: int, **changes):
        item = self.model.item(job_id)
        if item is not None and item.state in IN_FLIGHT:
            self.model.update(job_id, **changes)
            self.job_changed.emit(job_id)

    def _partial(self, job_id: int, segments):
        item = self.model.item(job_id)
        if item is not None and item.state in IN_FLIGHT:
            self.partials[job_id] = list(segments)
            self.job_changed.emit(job_id)

    def _started(self, job_id: int):
        item = self.model.item(job_id)
        if item is not None and item.state == "queued":
            self.history.set_state(job_id, "running")
            self.model.update(job_id, state="running")
            self.job_changed.emit(job_id)

    def _finished(self, job_id: int, transcript):
        if self.speaker_namer is not None:    # before saving: the names are part of the result
            try:
                self.speaker_namer.name(transcript, self.history.get_transcript(job_id))
            except Exception:                 # names are a convenience: the transcript is saved anyway
                log.exception("naming the speakers of file %s failed", job_id)
            problem, self.speaker_namer.problem = self.speaker_namer.problem, ""
            if problem:                       # a damaged voice profiles file, moved aside
                self.message.emit(problem)
        self.history.save_transcript(job_id, transcript)  # durable before anything else
        self.partials.pop(job_id, None)
        item = self.model.update(job_id, state="done", progress=1.0, eta=0.0, transcript=transcript)
        if item is not None:
            self.message.emit(f"Finished {item.name}")
            self.job_done.emit(job_id)
        self.dispatch()

    def _failed(self, job_id: int, error: str):
        self.partials.pop(job_id, None)
        self.history.set_state(job_id, "failed", error)
        item = self.model.update(job_id, state="failed", error=error, eta=-1.0)
        if item is not None:
            self.message.emit(f"Failed: {error}")
            self.job_changed.emit(job_id)
        self.dispatch()

    def _cancelled(self, job_id: int):
        self.partials.pop(job_id, None)
        item = self.model.item(job_id)
        if item is not None and item.state not in ("done", "failed"):
            self.history.set_state(job_id, "cancelled")
            self.model.update(job_id, state="cancelled", eta=-1.0)
            self.message.emit(f"Cancelled {Path(item.path).name}")
            self.job_changed.emit(job_id)
        self.dispatch()

    def editable(self, job_id: int) -> bool:
        item = self.model.item(job_id)
        return item is not None and item.state in EDITABLE_STATES
