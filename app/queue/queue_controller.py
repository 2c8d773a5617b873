"""Runs the file queue: hands files to the engine as they are queued, records every change in history.

The engine's file admission is the one queue policy (engine.pipelines.admission): every
queued file goes to the engine at once, in table order, and the engine decides which start
("Files at once" is its ``max_decoding``). A row shows what the engine reports: waiting
(queued there, not started: its options and place can still change), running with
progress, done, failed or cancelled. Moving a row reorders the engine's queue; a waiting
file's new options replace its engine job in place. History is written before the UI
changes, so a crash at any moment leaves the database telling the truth.

Each hand-over has a ticket of its own (the id the worker knows the file by): a file taken
back (cancelled, removed, given new options) and handed over again gets a new ticket, so
late news about the old one cannot touch the new one.
"""
from __future__ import annotations

import itertools
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
        self._tickets = itertools.count(1)
        self._job_of: dict[int, int] = {}      # ticket -> job id, while the engine holds the file
        self._ticket_of: dict[int, int] = {}   # job id -> its ticket
        self._handed_with: dict[int, tuple] = {}   # job id -> the Settings it was handed over with
        self._parallel = 1
        self.parallel = parallel
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
        self.partials: dict[int, list] = {}   # job id: segments transcribed so far (while running)
        worker = client.worker     # bound methods: Qt queues each call into this (the UI) thread
        worker.job_started.connect(self._on_started)
        worker.job_duration.connect(self._on_duration)
        worker.job_progress.connect(self._on_progress)
        worker.job_finished.connect(self._on_finished)
        worker.job_partial.connect(self._on_partial)
        worker.job_failed.connect(self._on_failed)
        worker.job_cancelled.connect(self._on_cancelled)

    @property
    def parallel(self) -> int:
        """Settings "Files at once": how many files the engine's admission opens at once."""
        return self._parallel

    @parallel.setter
    def parallel(self, count: int) -> None:
        self._parallel = max(1, int(count))
        self.client.set_parallel_files(self._parallel)

    def _job(self, ticket: int, last: bool = False) -> int | None:
        """The job id of a worker signal's ticket, or None for news of a ticket taken back.
        ``last``: the signal ends the hand-over (finished, failed, cancelled)."""
        job_id = self._job_of.get(ticket)
        if job_id is not None and last:
            del self._job_of[ticket]
            self._ticket_of.pop(job_id, None)
            self._handed_with.pop(job_id, None)
        return job_id

    def _on_started(self, ticket: int):
        if (job_id := self._job(ticket)) is not None:
            self._started(job_id)

    def _on_duration(self, ticket: int, duration: float):
        if (job_id := self._job(ticket)) is not None:
            self._changed(job_id, duration=duration)

    def _on_progress(self, ticket: int, progress: float, eta: float):
        if (job_id := self._job(ticket)) is not None:
            self._changed(job_id, progress=progress, eta=eta)

    def _on_partial(self, ticket: int, segments):
        if (job_id := self._job(ticket)) is not None:
            self._partial(job_id, segments)

    def _on_finished(self, ticket: int, transcript):
        if (job_id := self._job(ticket, last=True)) is not None:
            self._finished(job_id, transcript)

    def _on_failed(self, ticket: int, error: str):
        if (job_id := self._job(ticket, last=True)) is not None:
            self._failed(job_id, error)

    def _on_cancelled(self, ticket: int):
        if (job_id := self._job(ticket, last=True)) is not None:
            self._cancelled(job_id)

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

    # -- handing files to the engine -----------------------------------------------------
    def dispatch(self) -> None:
        """Hand every waiting file the engine does not hold yet to it, then give it the table's order.
        A waiting file handed over with other Settings (word timestamps, chunk length) than now is
        handed over again with these, as it would have been had it waited in the app."""
        handed = False
        for item in self.model.items:
            if item.state == "waiting" and self._handed_with.get(item.job_id) != self._settings():
                self._take_back(item.job_id)
            if item.state == "waiting" and item.job_id not in self._ticket_of:
                self._hand(item)
                handed = True
        if handed:
            self._send_order()

    def _hand(self, item: QueueItem) -> None:
        ticket = next(self._tickets)
        self._job_of[ticket], self._ticket_of[item.job_id] = item.job_id, ticket
        self._handed_with[item.job_id] = self._settings()
        self.history.set_state(item.job_id, "queued")
        self.model.update(item.job_id, state="waiting", progress=0.0, eta=-1.0, error=None)
        self.client.add_file(ticket, item.path, item.language, item.context,
                             self.word_timestamps, self.max_chunk_seconds, item.speakers or "")

    def _settings(self) -> tuple:
        return bool(self.word_timestamps), self.max_chunk_seconds

    def _take_back(self, job_id: int) -> bool:
        """The engine drops the file (its later news is ignored); False if it did not hold it."""
        self._handed_with.pop(job_id, None)
        ticket = self._ticket_of.pop(job_id, None)
        if ticket is None:
            return False
        self._job_of.pop(ticket, None)
        self.client.cancel_job(ticket)
        return True

    def _send_order(self) -> None:
        """The engine's queue follows the table: waiting files start in this order."""
        tickets = [self._ticket_of[i.job_id] for i in self.model.items if i.job_id in self._ticket_of]
        if tickets:
            self.client.reorder_jobs(tickets)

    # -- user actions ----------------------------------------------------------------------
    def cancel(self, job_ids) -> None:
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is not None and item.state in IN_FLIGHT:
                self._take_back(job_id)
                self._cancelled(job_id)

    def retry(self, job_ids) -> None:
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is not None and item.state in ("failed", "cancelled"):
                self.model.update(job_id, state="waiting")
        self.dispatch()

    def transcribe_again(self, job_ids) -> None:
        """Queue finished files once more (another model or language may do better)."""
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is not None and item.state == "done":
                self.model.update(job_id, state="waiting", transcript=None)
        self.dispatch()

    def remove(self, job_ids) -> None:
        for job_id in job_ids:
            item = self.model.item(job_id)
            if item is None:
                continue
            self._take_back(job_id)
            self.partials.pop(job_id, None)
            if item.state not in ("done", "failed"):
                self.history.set_state(job_id, "cancelled")
            self.model.remove(job_id)

    def move(self, job_ids, delta: int) -> None:
        ordered = sorted(job_ids, key=self.model.row_of, reverse=delta > 0)
        moved = [self.model.move(job_id, delta) for job_id in ordered]
        if any(moved):
            self._send_order()

    def _hand_again(self, job_id: int) -> None:
        """A waiting file's options changed: its engine job is replaced, in its place in the queue."""
        item = self.model.item(job_id)
        if item is not None and item.state == "waiting" and self._take_back(job_id):
            self.dispatch()

    def _options_edited(self, job_id: int, language, context: str):
        self.history.set_options(job_id, language, context)
        self._hand_again(job_id)
        item = self.model.item(job_id)
        if item is not None and item.state == "done":   # a finished file's new language
            self.message.emit(f"Transcribing {item.name} again in {language or 'a detected language'}")
            self.transcribe_again([job_id])

    def _speakers_chosen(self, job_id: int, speakers: str):
        self.history.set_speakers(job_id, speakers)
        self._hand_again(job_id)
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
        if item is not None and item.state == "waiting":
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

    def _failed(self, job_id: int, error: str):
        self.partials.pop(job_id, None)
        self.history.set_state(job_id, "failed", error)
        item = self.model.update(job_id, state="failed", error=error, eta=-1.0)
        if item is not None:
            self.message.emit(f"Failed: {error}")
            self.job_changed.emit(job_id)

    def _cancelled(self, job_id: int):
        self.partials.pop(job_id, None)
        item = self.model.item(job_id)
        if item is not None and item.state not in ("done", "failed"):
            self.history.set_state(job_id, "cancelled")
            self.model.update(job_id, state="cancelled", eta=-1.0)
            self.message.emit(f"Cancelled {Path(item.path).name}")
            self.job_changed.emit(job_id)

    def editable(self, job_id: int) -> bool:
        item = self.model.item(job_id)
        return item is not None and item.state in EDITABLE_STATES
