"""One engine inside a Ray actor: the archive job's map stage (``ArchiveJob`` builds the pool).

Ray Data calls ``__call__`` with one file per call and runs several calls of one actor at once
(``max_concurrent_calls_per_actor``) as coroutines on one event loop thread. Each call submits its
file to the actor's single engine and steps the engine until that file is done, so all files in
flight on the actor share every step: the engine's continuous batching stays full, and a file's
result leaves the actor (and is written by the driver) the moment it is finished, not when a
whole batch is. Everything here stays on the loop thread, so the engine is never used from two
threads.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import time

# A file's failure is recorded and the actor goes on with the next one; these are what the
# engine raises for a bad file or option (anything else is a bug worth seeing in Ray's log too).
_FILE_ERRORS = (ValueError, RuntimeError, OSError, MemoryError)


def _resolve_model(name: str) -> str:
    """A local folder as is; a Hugging Face id downloads on this node (as the CLI does)."""
    from modelhub.downloads import download_model, resolve_model_name

    kind, where = resolve_model_name(name)
    return str(where) if kind == "local" else str(download_model(where))


def driver_model_name(name: str) -> str:
    """``name`` as the driver passes it to engines on any node: a local folder made absolute (it must
    exist here: ValueError with the CLI's message otherwise), a Hugging Face id unchanged (each node
    downloads it when its engine starts)."""
    from pathlib import Path

    from modelhub.downloads import resolve_model_name

    kind, where = resolve_model_name(name)
    return str(Path(where).resolve()) if kind == "local" else str(where)


class EngineWorker:
    """A Ray Data callable class holding one engine. ``settings`` is ``ArchiveOptions.engine_settings()``."""

    def __init__(self, settings: dict, registry=None):
        import torch

        import engine

        self.threads = int(settings["threads"])
        torch.set_num_threads(self.threads)
        self.job_options = dict(language=settings.get("language"), context=settings.get("context") or "",
                                max_chunk_seconds=settings.get("max_chunk_seconds"))
        aligner = settings.get("aligner")
        self.engine = engine.load(_resolve_model(settings["model"]), device=settings.get("device"),
                                  dtype=settings.get("dtype"), quantize=settings.get("quantize"),
                                  aligner=_resolve_model(aligner) if aligner else None,
                                  use_vad=settings.get("use_vad", True),
                                  compact_weights=settings.get("compact_weights", True))
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self._threads_set_on_loop = False
        self.registry = registry
        if registry is not None:   # tell the driver this engine is up (and how to reach its actor)
            import ray

            registry.engine_up.remote(self.name, ray.get_runtime_context().current_actor)

    async def __call__(self, batch):
        for index, path in zip(batch["index"], batch["path"]):
            row = await self._transcribe(int(index), str(path))
            yield {key: [value] for key, value in row.items()}

    async def _transcribe(self, index: int, path: str) -> dict:
        if not self._threads_set_on_loop:   # torch's thread count is kept per OS thread
            import torch

            torch.set_num_threads(self.threads)
            self._threads_set_on_loop = True
        started = time.monotonic()
        if self.registry is not None:
            self.registry.file_started.remote(index, self.name)
        row = {"index": index, "state": "failed", "error": "", "transcript": "", "worker": self.name,
               "seconds": 0.0}
        try:
            job = self.engine.submit_file(path, word_timestamps=self.engine.aligner is not None,
                                          **self.job_options)
        except _FILE_ERRORS as exc:
            row.update(error=f"{path}: {exc}", seconds=time.monotonic() - started)
            return row
        while not job.finished:
            busy = self.engine.has_work()
            if busy:
                try:
                    self.engine.step()
                except _FILE_ERRORS as exc:   # the step failed for everyone in it; this file reports it
                    job.cancel()
                    row.update(error=f"{path}: engine step failed: {exc}", seconds=time.monotonic() - started)
                    return row
            await asyncio.sleep(0 if busy else 0.005)   # let the actor's other files take their turn
        row["seconds"] = time.monotonic() - started
        if job.state == "done":
            row.update(state="done", transcript=json.dumps(job.transcript.to_dict(), ensure_ascii=False))
        else:
            row["error"] = job.error or f"{path}: {job.state}"
        return row


class EngineRegistry:
    """The engines of one job as they come up, and which engine started which file (a Ray actor
    without CPU): the driver can show them; a file started twice ran again after its engine died."""

    def __init__(self):
        self.engines: list[tuple[str, object]] = []
        self.starts: dict[int, list[str]] = {}

    def engine_up(self, name: str, handle) -> None:
        self.engines.append((name, handle))

    def file_started(self, index: int, name: str) -> None:
        self.starts.setdefault(index, []).append(name)

    def list(self) -> list:
        return list(self.engines)

    def started(self) -> dict:
        return {index: list(names) for index, names in self.starts.items()}
