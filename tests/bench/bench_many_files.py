"""Many files through the real CLI: wall time, peak memory and failures per file count.

    python3 tests/bench/bench_many_files.py [--counts 100,300,1000] [--seconds 35]
        [--repo DIR] [--nofile 256] [--no-vad]

Each run is ``python3 -m cli transcribe FILE... --model TINY -o OUT --quiet`` in a
subprocess of ``--repo`` (default: this checkout; point it at a worktree of an older
commit to measure "before"). Peak RSS is the child's own ru_maxrss (os.wait4), so the
bench's own memory never counts. The files (espeak-ng speech repeated to ``--seconds``)
and the tiny checkpoint are built once under ~/.cache. The checkpoint is
tests/many_files.quick_checkpoint: random, but every transcript ends at its first
token, so a run measures the queue (decoding, chunking, admission), not generation.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("QWEN3_ASR_BENCH_CACHE", Path.home() / ".cache" / "qwen3-asr-bench"))
sys.path.insert(0, str(ROOT / "tests"))
from many_files import quick_checkpoint, speech  # noqa: E402


def bench_files(count: int, seconds: float) -> list[Path]:
    """``count`` WAV files of ``seconds`` each (hard links of one master: same bytes, separate opens)."""
    folder = CACHE / f"many-files-{seconds:g}s"
    folder.mkdir(parents=True, exist_ok=True)
    master = folder / "master.wav"
    if not master.is_file():
        sf.write(master, speech(seconds), 16000, subtype="PCM_16")
    files = []
    for i in range(count):
        path = folder / f"file_{i:04d}.wav"
        if not path.exists():
            try:
                os.link(master, path)
            except OSError:
                shutil.copyfile(master, path)
        files.append(path)
    return files


def run_cli(repo: Path, model: Path, files: list[Path], nofile: int | None, timeout: float, extra=()) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-many-"))
    cmd = [sys.executable, "-m", "cli", "transcribe", *map(str, files), "--model", str(model),
           "-o", str(out), "--quiet", "--device", "cpu", "--dtype", "float32", *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(repo))

    def limit():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    started = time.monotonic()
    with open(out / "stderr.log", "w") as err:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=limit)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - started
    written = {p.stem for p in out.glob("*.txt")}
    errors = [line for line in (out / "stderr.log").read_text().splitlines() if line.startswith("error:")]
    result = dict(files=len(files), wall=wall, rss_mb=usage.ru_maxrss / 1024, rc=proc.returncode,
                  failed=len(files) - len(written), errors=errors[:3])
    shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="100,300,1000")
    parser.add_argument("--seconds", type=float, default=35.0)
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout whose CLI runs (default: this one)")
    parser.add_argument("--model", type=Path, help="model folder (default: a tiny random checkpoint)")
    parser.add_argument("--nofile", type=int, help="RLIMIT_NOFILE for the CLI (like `ulimit -n`)")
    parser.add_argument("--no-vad", action="store_true", help="pass --no-vad (skips Silero: far cheaper on a slow CPU)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    model = args.model or quick_checkpoint(CACHE / "tiny-asr-quick")
    counts = [int(c) for c in args.counts.split(",")]
    print(f"repo {args.repo} ({_commit(args.repo)}), model {model}, {args.seconds:g} s files"
          + (f", ulimit -n {args.nofile}" if args.nofile else "") + (", --no-vad" if args.no_vad else ""), flush=True)
    print(f"{'files':>6} {'wall s':>8} {'peak RSS MB':>12} {'failed':>7} {'exit':>5}", flush=True)
    for count in counts:
        r = run_cli(args.repo, model, bench_files(count, args.seconds), args.nofile, args.timeout,
                    ["--no-vad"] if args.no_vad else [])
        print(f"{r['files']:>6} {r['wall']:>8.1f} {r['rss_mb']:>12.0f} {r['failed']:>7} {r['rc']:>5}", flush=True)
        for line in r["errors"]:
            print(f"       e.g. {line[:160]}", flush=True)


def _commit(repo: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


if __name__ == "__main__":
    main()
