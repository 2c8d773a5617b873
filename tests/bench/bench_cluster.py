"""The archive job on a local Ray against one CLI process, on the same espeak-ng files.

    python tests/bench/bench_cluster.py [--files 40] [--cpus 2]

Runs (1) the CLI in its own process (``--format txt,json``), (2) the Ray job with one engine of
``--cpus`` threads, (3) the Ray job with ``--cpus`` engines of one thread, (4) the CLI with one
torch thread, (5) the CLI again, over the same files,
with the trained test model; prints files per minute for each (end to end: model loading and
engine start included; and from the first file written to the last, the steady rate) and the
ratios to the mean of two CLI runs (one first, one last: the load of a shared machine moves), and
checks that every output equals the CLI's. Ray starts once, before the timed runs, as a cluster
would already be running. On a shared machine, compare ratios of one run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from cluster_helpers import TINY_MODEL, read_outputs, speech_files, start_local_ray  # noqa: E402

FORMATS = ("txt", "json")


def cpu_kind() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return ",".join(sorted({f for f in ("amx_bf16", "avx512_bf16") if f in flags})) or "no bf16"


def run_cli(files, out, threads: int | None = None) -> tuple[float, float]:
    """(wall seconds, seconds from the first file written to the last) of one CLI process
    (``threads``: its torch threads, through OMP_NUM_THREADS; None: torch's default)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, "-m", "cli", "transcribe", *map(str, files), "--model", str(TINY_MODEL), "-o", str(out),
           "--format", ",".join(FORMATS)]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    firsts = [time.monotonic() for line in proc.stderr if line.startswith("wrote") and line.rstrip().endswith(".txt")]
    assert proc.wait() == 0, "the CLI failed"
    return time.monotonic() - started, firsts[-1] - firsts[0]


def run_ray(files, out, engines: int, cpus_per_engine: int) -> tuple[float, float, int]:
    from cluster.archive import ArchiveJob, ArchiveOptions

    job = ArchiveJob(files, out, ArchiveOptions(model=str(TINY_MODEL), formats=FORMATS, engines=engines,
                                                cpus_per_engine=cpus_per_engine))
    started = time.monotonic()
    stamps = [time.monotonic() for r in job.results() if r.state == "done"]
    assert len(stamps) == len(files), "some files failed"
    return time.monotonic() - started, stamps[-1] - stamps[0], job.engines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--cpus", type=int, default=2)
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    files = speech_files(Path.home() / ".cache" / "qwen3-asr-bench" / "cluster-speech", opts.files)
    print(f"{len(files)} files, CPU {cpu_kind()}, {os.cpu_count()} cores, Ray with {opts.cpus} CPUs on loopback",
          flush=True)
    ray = start_local_ray(num_cpus=opts.cpus)
    try:
        rows = [("CLI, 1 process (first)", *run_cli(files, work / "cli"))]
        reference = read_outputs(work / "cli")
        for engines, threads in ((1, opts.cpus), (opts.cpus, 1)):
            out = work / f"ray{engines}"
            wall, steady, _ = run_ray(files, out, engines, threads)
            same = read_outputs(out) == reference
            rows.append((f"Ray, {engines} engine(s) x {threads} thread(s)", wall, steady))
            print(f"{rows[-1][0]}: outputs identical to the CLI's: {same}", flush=True)
            assert same
        # the CLI again, last: on a shared machine the load moves; compare each run with the CLI's mean
        rows.append(("CLI, 1 process, 1 thread", *run_cli(files, work / "cli1", threads=1)))
        assert read_outputs(work / "cli1") == reference
        rows.append(("CLI, 1 process (again)", *run_cli(files, work / "cli2")))
        assert read_outputs(work / "cli2") == reference
    finally:
        ray.shutdown()
    n = len(files)
    print(f"\nload average {os.getloadavg()[0]:.1f}; x CLI: against the mean of the two CLI runs")
    print(f"{'run':<34} {'wall s':>7} {'files/min':>9} {'x CLI':>6}   {'steady s':>8} {'files/min':>9} {'x CLI':>6}")
    base_wall, base_steady = (rows[0][1] + rows[-1][1]) / 2, (rows[0][2] + rows[-1][2]) / 2
    for name, wall, steady in rows:
        print(f"{name:<34} {wall:7.1f} {60 * n / wall:9.1f} {base_wall / wall:6.2f}   {steady:8.1f} "
              f"{60 * (n - 1) / steady:9.1f} {base_steady / steady:6.2f}")


if __name__ == "__main__":
    main()
