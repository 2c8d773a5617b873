"""Archive transcription on a Ray cluster: the files as a Ray dataset, an actor pool of engines.

The driver (the machine that runs ``qwen3-asr transcribe --ray`` or ``transcribe_archive``)
lists the inputs, skips those the manifest marks done, and streams the rest as a Ray dataset
through ``map_batches`` over a pool of ``EngineWorker`` actors (one engine each: one per GPU,
or one per ``cpus_per_engine`` CPU cores). Each actor keeps ``files_per_engine`` files in its
engine at once (cluster.worker). Results come back to the driver file by file; the driver writes
each file's outputs with the CLI's exporter and names, then its manifest line, so outputs land
in one place and a rerun skips them.

Inputs are read by the actors at the path the driver gives (absolute): on a cluster of several
machines they must sit at the same path on every node (a shared or network folder); outputs and
the manifest are written on the driver's machine only.

Ray retries the file of an actor that dies (Ray Data restarts it); the driver keeps the first
result it gets for each file and drops a repeat, so a file is written once.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from cluster.manifest import Manifest, source_key
from cluster.ray_import import require_ray


@dataclass
class ArchiveOptions:
    """How the archive job runs. Engine options mean what the CLI's flags of the same name mean."""

    model: str
    aligner: str | None = None
    language: str | None = None
    context: str = ""
    device: str | None = None            # None: CUDA when the cluster has GPUs, else CPU
    dtype: str | None = None
    quantize: str | None = None
    max_chunk_seconds: float | None = None
    use_vad: bool = True
    formats: tuple[str, ...] = ("txt",)
    engines: int | None = None           # None: one per GPU, else cluster CPUs // cpus_per_engine
    cpus_per_engine: int = 2             # CPU cores (and torch threads) per engine
    files_per_engine: int | None = None  # files each engine works on at once (None: 8 on CPU, 32 on a GPU)
    overwrite: bool = False              # replace outputs of unfinished files that exist already
    compact_weights: bool = True         # an archive is long: pay the one-off packing (engine.load)

    def engine_settings(self, device: str | None) -> dict:
        return {"model": self.model, "aligner": self.aligner, "language": self.language, "context": self.context,
                "device": device, "dtype": self.dtype, "quantize": self.quantize,
                "max_chunk_seconds": self.max_chunk_seconds, "use_vad": self.use_vad,
                "threads": self.cpus_per_engine, "compact_weights": self.compact_weights}

    def check(self) -> None:
        if self.engines is not None and (not isinstance(self.engines, int) or self.engines < 1):
            raise ValueError(f"engines must be a whole number of at least 1, got {self.engines!r}")
        for name in ("cpus_per_engine", "files_per_engine"):
            value = getattr(self, name)
            if value is None and name == "files_per_engine":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


@dataclass
class FileResult:
    """One input's outcome: "done" (outputs written), "failed" (error says why) or "skipped" (done before)."""

    index: int
    source: str
    state: str
    outputs: list[str] = field(default_factory=list)
    error: str = ""
    worker: str = ""
    seconds: float = 0.0


@dataclass
class ArchiveSummary:
    results: list[FileResult]
    wall_seconds: float
    engines: int
    repeats_dropped: int = 0      # results of a file that came back twice (an actor retried), not written

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.results)

    @property
    def files_per_minute(self) -> float:
        """Files transcribed (not skipped) per minute of wall time, model loading included."""
        return 60.0 * (self.count("done") + self.count("failed")) / max(self.wall_seconds, 1e-9)


def connect(address: str | None = None, **init_options):
    """Join the Ray cluster at ``address`` ("auto", "host:6379", "ray://host:10001"); with None,
    a running local cluster or else a new one on this machine. Reuses an existing connection."""
    ray = require_ray("data")
    if not ray.is_initialized():
        try:
            ray.init(address=address or None, **init_options)
        except (ConnectionError, RuntimeError, TimeoutError) as exc:
            raise ConnectionError(f"cannot join the Ray cluster at {address or 'this machine'}: {exc}") from exc
    return ray


def dedupe(inputs) -> list[str]:
    """Each input once, in order (by absolute path), as the CLI does."""
    files, seen = [], set()
    for name in inputs:
        key = source_key(name)
        if key not in seen:
            seen.add(key)
            files.append(os.fsdecode(name))
    return files


def _checked_model_names(options: ArchiveOptions) -> ArchiveOptions:
    """The options with local model folders made absolute; a missing one fails here, not in every engine."""
    from cluster.worker import driver_model_name

    return replace(options, model=driver_model_name(options.model),
                   aligner=driver_model_name(options.aligner) if options.aligner else None)


class ArchiveJob:
    """One archive run over ``files`` into ``out_dir``; iterate ``results()`` to run it.

    ``names`` is the CLI's ``OutputNames`` for these files and folder (the CLI passes the one it
    planned; the Python entry point makes the same). A file counts as finished for the manifest only
    after all its formats are written. ``worker_class`` is the Ray Data callable each engine actor
    runs: ``cluster.worker.EngineWorker`` unless a caller wraps it (the kill test holds one file)."""

    def __init__(self, files, out_dir, options: ArchiveOptions, *, names=None, address: str | None = None,
                 worker_class=None):
        from engine.text.exports import OutputNames

        options.check()
        options = _checked_model_names(options)
        self.files = [os.fsdecode(f) for f in files]
        self.out_dir = Path(out_dir)
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise ValueError(f"the output folder is a file: {self.out_dir}")
        self.options = options
        self.names = names if names is not None else OutputNames(self.files, [self.out_dir] * len(self.files))
        self.address = address
        self.manifest = Manifest(self.out_dir)
        self.engines = 0
        self.repeats_dropped = 0
        self.registry = None
        self.worker_class = worker_class

    def engine_actors(self) -> list:
        """(name, actor handle) of each engine that has come up so far in this run."""
        if self.registry is None:
            return []
        return require_ray("").get(self.registry.list.remote())

    def started(self) -> dict[int, list[str]]:
        """{input index: the engines that started it, in order}: two names mean it ran again."""
        if self.registry is None:
            return {}
        return require_ray("").get(self.registry.started.remote())

    def pending(self) -> list[int]:
        """Indices of the files this run still has to transcribe (not done by an earlier run)."""
        return [i for i, f in enumerate(self.files) if not self.manifest.is_done(f, self.options.formats)]

    def pending_files(self) -> list[Path]:
        return [Path(self.files[i]) for i in self.pending()]

    def existing_outputs(self, todo) -> list[str]:
        """Outputs of unfinished files that exist already (refused unless ``overwrite``)."""
        from engine.text.exports import render_filename

        paths = [self.out_dir / render_filename("{stem}.{ext}", stem=self.names.stem(i), fmt=fmt)
                 for i in todo for fmt in self.options.formats]
        return [str(p) for p in paths if p.exists()]

    def _pool_shape(self, ray) -> tuple[int, str, float]:
        """(engines, device, GPUs per engine) from the options and the cluster's resources."""
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        device = self.options.device or ("cuda" if gpus else "cpu")
        if device == "cuda":
            if not gpus:
                raise ValueError("device cuda was asked for but the Ray cluster has no GPUs")
            return self.options.engines or gpus, device, 1.0
        cpus = int(resources.get("CPU", 1))
        return self.options.engines or max(1, cpus // self.options.cpus_per_engine), device, 0.0

    def results(self):
        """Run the job; yields a FileResult per input (skipped ones first) as each one is written."""
        from cluster.worker import EngineRegistry, EngineWorker

        worker_class = self.worker_class or EngineWorker

        todo = self.pending()
        todo_set = set(todo)
        for i in (i for i in range(len(self.files)) if i not in todo_set):
            yield FileResult(i, self.files[i], "skipped", outputs=self.manifest.latest[source_key(self.files[i])]
                             ["outputs"])
        if not todo:
            return
        existing = self.existing_outputs(todo)
        if existing and not self.options.overwrite:
            raise FileExistsError("output files exist already (pass --overwrite / overwrite=True to replace "
                                  "them):\n  " + "\n  ".join(existing))
        ray = connect(self.address)
        self.engines, device, gpus = self._pool_shape(ray)
        self.engines = min(self.engines, len(todo))
        self.registry = ray.remote(num_cpus=0)(EngineRegistry).remote()
        in_flight = self.options.files_per_engine or (32 if device == "cuda" else 8)
        rows = [{"index": i, "path": os.path.abspath(self.files[i])} for i in todo]
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows))   # one file per block: per-file tasks
        dataset = dataset.map_batches(
            worker_class, fn_constructor_kwargs={"settings": self.options.engine_settings(device),
                                               "registry": self.registry},
            batch_size=1, batch_format="numpy", num_cpus=self.options.cpus_per_engine, num_gpus=gpus,
            # in flight = running: a file waits in the dataset, not behind a busy engine, so an engine
            # that comes up later (or restarts) takes the next one
            compute=ray.data.ActorPoolStrategy(size=self.engines,
                                               max_concurrent_calls_per_actor=in_flight,
                                               max_tasks_in_flight_per_actor=in_flight))
        written: set[int] = set()
        for row in dataset.iter_rows():
            index = int(row["index"])
            if index in written:       # an actor died after sending it, and Ray ran the file again
                self.repeats_dropped += 1
                continue
            written.add(index)
            yield self._write(index, row)

    def _write(self, index: int, row) -> FileResult:
        from engine.text.exports import export
        from engine.text.types import Transcript

        source = self.files[index]
        result = FileResult(index, source, str(row["state"]), error=str(row["error"]), worker=str(row["worker"]),
                            seconds=float(row["seconds"]))
        if result.state == "done":
            transcript = Transcript.from_dict(json.loads(str(row["transcript"])))
            try:
                for fmt in self.options.formats:
                    result.outputs.append(str(export(transcript, fmt, self.out_dir, self.names.stem(index),
                                                     names=self.names, overwrite=self.options.overwrite)))
            except (OSError, ValueError) as exc:
                result.state, result.error = "failed", f"{source}: {exc}"
        self.manifest.record(source, result.state, formats=self.options.formats, outputs=result.outputs,
                             error=result.error, worker=result.worker, seconds=result.seconds)
        return result


def print_progress(result: FileResult, done: int, total: int, stream=None) -> None:
    """The driver's progress: one line per file."""
    stream = stream or sys.stderr
    what = {"done": f"wrote {', '.join(result.outputs)}", "skipped": "done in an earlier run, skipped",
            "failed": f"error: {result.error}"}[result.state]
    extra = f" ({result.worker}, {result.seconds:.1f} s)" if result.state != "skipped" else ""
    print(f"[{done}/{total}] {Path(result.source).name}: {what}{extra}", file=stream, flush=True)


def transcribe_archive(inputs, output_dir, *, model: str, address: str | None = None, progress=print_progress,
                       **options) -> ArchiveSummary:
    """Transcribe many files on a Ray cluster into ``output_dir``; returns an ArchiveSummary.

    ``options`` are ArchiveOptions fields (``formats``, ``engines``, ``cpus_per_engine``,
    ``files_per_engine``, ``language``, ``aligner``...). A file that fails is recorded (its
    FileResult and the manifest) and the others go on; a rerun skips files already done.
    ``progress(result, done, total)`` is called on the driver as each file finishes (None: quiet).
    """
    if "formats" in options:
        options["formats"] = tuple(options["formats"])
    job = ArchiveJob(dedupe(inputs), output_dir, ArchiveOptions(model=model, **options), address=address)
    return run_job(job, progress)


def run_job(job: ArchiveJob, progress=print_progress) -> ArchiveSummary:
    """Run ``job`` to the end, calling ``progress`` per file; the wall time includes starting the engines."""
    started = time.monotonic()
    results = []
    for result in job.results():
        results.append(result)
        if progress is not None:
            progress(result, len(results), len(job.files))
    return ArchiveSummary(sorted(results, key=lambda r: r.index), time.monotonic() - started, job.engines,
                          job.repeats_dropped)
