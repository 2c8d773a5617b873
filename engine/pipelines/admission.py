"""Which queued files start decoding, and when open ones may decode more: memory follows the batch, not the queue.

A file waits as a path until the engine can take its chunks, so a thousand queued files
do not hold a thousand open decoders, VAD states and blocks of samples: at most
``max_decoding`` files are open at once, and a file decodes (or a new one starts) only
while the prompt tokens waiting for prefill are below ``max_waiting_tokens``, which is
enough to fill the next steps' prefill rows. This is the one queue policy for files:
highest priority first, then queue order; the job layer (engine.pipelines.jobs) applies it.

A file that hit a process-wide limit (too many open files, no memory) carries a
``retry_gate``: it starts again only after another file has finished and freed what it held.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.pipelines.file_job import FileJob


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


class FileAdmission:
    def __init__(self, max_decoding: int = 8, max_waiting_tokens: int = 8192):
        _check_positive("max_decoding", max_decoding)
        _check_positive("max_waiting_tokens", max_waiting_tokens)
        self.max_decoding = max_decoding
        self.max_waiting_tokens = max_waiting_tokens
        self.finished_jobs = 0          # files that left the queue; a retry gate waits for this to move

    def set_max_decoding(self, max_decoding: int) -> None:
        """Change how many files may be open at once (EngineConfig.max_decoding_files) on a running
        engine: the app's "Files at once" setting. Files already open keep going; fewer start."""
        self.max_decoding = _check_positive("max_decoding", max_decoding)

    def hungry(self, waiting_tokens: int) -> bool:
        """Whether the engine wants more chunks: ``waiting_tokens`` (queued for prefill) below the bound."""
        return waiting_tokens < self.max_waiting_tokens

    def admit(self, files: list[FileJob], hungry: bool) -> list[FileJob]:
        """The waiting files that may start this step (highest priority first, then in queue order)."""
        decoding = sum(1 for job in files if job.decoding)
        if not hungry or decoding >= self.max_decoding:
            return []       # a full scheduler always drains, so waiting here never deadlocks
        ready = [job for job in files if job.waiting
                 and (job.retry_gate is None or job.retry_gate < self.finished_jobs)]
        ready.sort(key=lambda job: -job.priority)     # stable: queue order within a priority
        return ready[:self.max_decoding - decoding]

    def retry_gate(self, files: list[FileJob], job: FileJob) -> int | None:
        """For ``job`` that hit a process-wide limit: the gate to wait behind, or None when no other
        started file could free anything (then retrying would fail the same way)."""
        started = [other for other in files if other is not job and not other.waiting and not other.finished]
        return self.finished_jobs if started else None
