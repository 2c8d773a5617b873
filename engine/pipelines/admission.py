"""Which queued files start decoding, and when open ones may decode more: memory follows the batch, not the queue.

A file waits as a path until the engine can take its chunks, so a thousand queued files
do not hold a thousand open decoders, VAD states and blocks of samples: at most
``max_decoding`` files are open at once, and a file decodes (or a new one starts) only
while the prompt tokens waiting for prefill are below ``max_waiting_tokens``, which is
enough to fill the next steps' prefill rows.

Jobs are duck-typed (file jobs and live streams share the engine's job list):
``waiting`` (queued, holding nothing), ``decoding`` (its file is open), ``priority``,
and ``retry_gate`` (a job that hit a process-wide limit such as EMFILE starts again
only after another job has finished and freed what it held).
"""
from __future__ import annotations


class FileAdmission:
    def __init__(self, max_decoding: int = 8, max_waiting_tokens: int = 8192):
        for name, value in (("max_decoding", max_decoding), ("max_waiting_tokens", max_waiting_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.max_decoding = max_decoding
        self.max_waiting_tokens = max_waiting_tokens
        self.finished_jobs = 0          # jobs that left the queue; a retry gate waits for this to move

    def hungry(self, scheduler) -> bool:
        """Whether the scheduler wants more chunks: prompt tokens waiting for prefill below the bound."""
        waiting = 0
        for request in scheduler.waiting:
            waiting += request.num_tokens - request.num_cached
            if waiting >= self.max_waiting_tokens:
                return False
        return True

    def admit(self, jobs: list, hungry: bool) -> list:
        """The waiting jobs that may start this step (highest priority first, then in queue order)."""
        decoding = sum(1 for job in jobs if getattr(job, "decoding", False))
        if not hungry or decoding >= self.max_decoding:
            return []       # a full scheduler always drains, so waiting here never deadlocks
        ready = [job for job in jobs if getattr(job, "waiting", False)
                 and (job.retry_gate is None or job.retry_gate < self.finished_jobs)]
        ready.sort(key=lambda job: -job.priority)     # stable: queue order within a priority
        return ready[:self.max_decoding - decoding]

    def retry_gate(self, jobs: list, job) -> int | None:
        """For ``job`` that hit a process-wide limit: the gate to wait behind, or None when no other
        started file job could free anything (then retrying would fail the same way)."""
        started = [other for other in jobs if other is not job and hasattr(other, "retry_gate")
                   and not other.waiting and not other.finished]
        return self.finished_jobs if started else None
