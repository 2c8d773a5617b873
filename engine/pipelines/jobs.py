"""The job layer: file jobs, live streams and the aligner, advanced between two steps of the core.

``Engine.step()`` is ``jobs.advance()`` then ``core.step()``: the jobs read files, detect
speech, cut chunks and submit requests through the engine port (engine.pipelines.port), and
take their results from the outputs the core pushes to them; then the core runs one model
step over everything queued. File admission (engine.pipelines.admission) is applied here,
once per advance, so there is one queue policy for files. The forced aligner is driven by
the job layer too: its ``step()`` runs here when it ``has_work()``, after the stretch alignments
(an edited line's new words, engine.pipelines.stretch_job) have submitted what they are ready to.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Union

from engine.pipelines.admission import FileAdmission
from engine.pipelines.file_job import FileJob, ProcessLimitReached
from engine.pipelines.port import EnginePort

if TYPE_CHECKING:
    from engine.pipelines.live_stream import Stream
    from engine.pipelines.stretch_job import StretchAlignmentJob

Job = Union[FileJob, "Stream"]


def reordered(items: list, wanted, key=lambda item: item) -> list:
    """``items`` with those in ``wanted`` put in ``wanted``'s order, in the places they hold now;
    every other item keeps its place. ``key`` tells items apart (``id`` for jobs); items of
    ``wanted`` not in ``items`` are skipped, repeats count once."""
    place = {key(item): i for i, item in enumerate(items)}
    chosen = list({key(item): item for item in wanted if key(item) in place}.values())
    out = list(items)
    for slot, item in zip(sorted(place[key(item)] for item in chosen), chosen):
        out[slot] = item
    return out


class JobLayer:
    """The engine's jobs, in the order they came. ``aligner`` is the loaded forced aligner or None."""

    def __init__(self, port: EnginePort, admission: FileAdmission):
        self.port = port
        self.admission = admission
        self.aligner = None
        self._jobs: list[Job] = []
        self._alignments: list[StretchAlignmentJob] = []
        self.wake = threading.Event()     # set by file readers when a block is ready (wait_for_readers)

    @property
    def jobs(self) -> list[Job]:
        """The unfinished jobs (file jobs and live streams), oldest first."""
        return list(self._jobs)

    @property
    def alignments(self) -> list[StretchAlignmentJob]:
        """The unfinished stretch alignments, oldest first."""
        return list(self._alignments)

    def add(self, job: Job) -> Job:
        self._jobs.append(job)
        return job

    def add_alignment(self, job: StretchAlignmentJob) -> StretchAlignmentJob:
        self._alignments.append(job)
        return job

    def reorder(self, jobs: list[Job]) -> None:
        """Put ``jobs`` in this order among themselves: they take the places they hold now, in the
        given order, and every other job keeps its place. Admission starts waiting files in queue
        order (within a priority), so this is how a user's reordered queue reaches the engine.
        Jobs that are not here (finished, or another engine's) are skipped."""
        self._jobs = reordered(self._jobs, jobs, key=id)

    def has_work(self) -> bool:
        """Whether a job or the aligner has work; an open live stream waiting for audio has none."""
        return any(job.busy for job in self._jobs) or bool(self._alignments) or (
            self.aligner is not None and self.aligner.has_work())

    def wants_chunks(self) -> bool:
        """Whether the core wants more file chunks now (prompt tokens waiting for prefill below the bound)."""
        limit = self.admission.max_waiting_tokens
        return self.admission.hungry(self.port.waiting_prompt_tokens(limit))

    def advance(self) -> None:
        """Bounded work for every job before the next core step.

        Started jobs first, so files that finish decoding now free their slots for this step's
        newcomers; then the queued files admission lets start; then one aligner step."""
        wants = self.wants_chunks()
        for job in [job for job in self._jobs if not (isinstance(job, FileJob) and job.waiting)]:
            self._advance(job, wants)
        for job in self.admission.admit(self._files(), self.wants_chunks()):
            self._advance(job, wants)     # the rest of the queue stays paths: no open file, no samples
        for job in self.alignments:
            job.advance()
            if job.finished:
                self._alignments.remove(job)
        if self.aligner is not None and self.aligner.has_work():
            self.aligner.step()

    def wait_for_readers(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds while started files wait for their readers and nothing
        else is ready: an idle engine then sleeps instead of spinning against the readers."""
        self.wake.clear()        # before looking: a block that comes after this still wakes the wait
        reading = any(isinstance(job, FileJob) and job.awaiting_audio for job in self._jobs) or any(
            job.awaiting_audio for job in self._alignments)
        if reading and not (self.aligner is not None and self.aligner.has_work()):
            self.wake.wait(timeout)

    def _files(self) -> list[FileJob]:
        return [job for job in self._jobs if isinstance(job, FileJob)]

    def _advance(self, job: Job, wants_chunks: bool) -> None:
        if isinstance(job, FileJob):
            try:
                job.advance(wants_chunks)
            except ProcessLimitReached as limit:
                gate = self.admission.retry_gate(self._files(), job)
                if gate is None:     # nothing else holds what is missing: waiting would not help
                    job.fail(limit.message(job.source))
                else:
                    job.requeue(gate)
        else:
            job.advance()
        if job.finished:
            self._jobs.remove(job)
            self.admission.finished_jobs += 1
