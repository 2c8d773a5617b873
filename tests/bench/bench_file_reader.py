"""Engine step times while a long file is read: reading on the engine thread vs on a reader thread.

    PYTHONPATH=$PWD python tests/bench/bench_file_reader.py --minutes 5 [--read-ahead 0 2]

Makes an N-minute file of espeak-ng sentences (the trained tiny model's vocabulary) with pauses,
then, per ``file_read_ahead`` value, loads the trained tiny model, queues the file and a 2 s clip,
and times every ``Engine.step()``: the job layer's part (reading, VAD and log-mel when inline),
the core's part (the model) and the idle wait for a reader. Prints one line per mode: steps,
max / p95 of the job layer's part and of a whole step (without the idle wait), the wall time
until the 2 s clip finished and until the file finished.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TRAINED = ROOT / "tests" / "models" / "qwen3-asr-tiny"
TEXTS = ["The quick brown fox jumps over the lazy dog.", "We will walk to the park after lunch.",
         "My sister bought a new car last week.", "The children are playing in the garden."]


def long_file(minutes: float, folder: Path) -> Path:
    import soundfile as sf
    from conftest import espeak_wav

    path = folder / f"talk-{minutes:g}min.wav"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    spoken = [sf.read(str(espeak_wav(folder / f"s{i}.wav", t)), dtype="float32")[0] for i, t in enumerate(TEXTS)]
    parts, n, i = [], 0, 0
    while n < minutes * 60 * 16000:
        pause = np.zeros(int((0.8 + 0.4 * (i % 3)) * 16000), np.float32)
        parts += [spoken[i % len(spoken)], pause]
        n += len(parts[-2]) + len(pause)
        i += 1
    sf.write(path, np.concatenate(parts)[:int(minutes * 60 * 16000)], 16000, subtype="PCM_16")
    return path


def run(path: Path, read_ahead: int) -> str:
    import soundfile as sf

    import engine

    from engine.audio.vad import SpeechDetector

    eng = engine.load(TRAINED, device="cpu", dtype="float32", file_read_ahead=read_ahead)
    eng.generate(np.zeros(16000, np.float32), max_new_tokens=2)          # warm-up
    t0 = time.perf_counter()
    SpeechDetector.shared()      # loaded once per process: not part of the steady state measured here
    vad_load = time.perf_counter() - t0
    layer, core = eng.job_layer, eng.core
    spent = {"advance": 0.0, "core": 0.0, "wait": 0.0}
    real_advance, real_core, real_wait = layer.advance, core.step, layer.wait_for_readers

    def timed(name, fn):
        def wrapper(*args):
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapper

    layer.advance, core.step, layer.wait_for_readers = (timed("advance", real_advance), timed("core", real_core),
                                                        timed("wait", real_wait))
    clip = sf.read(str(path), dtype="float32", frames=2 * 16000)[0]
    t0 = time.perf_counter()
    job = eng.submit_file(str(path), language="en")
    short = eng.submit(clip, language="en")
    short_done, advances, steps = None, [], []
    while not job.finished:
        before = dict(spent)
        eng.step()
        advances.append(spent["advance"] - before["advance"])
        steps.append(spent["advance"] - before["advance"] + spent["core"] - before["core"])
        if short_done is None and short.finished:
            short_done = time.perf_counter() - t0
    total = time.perf_counter() - t0
    assert job.state == "done", job.error
    adv, stp = np.array(advances), np.array(steps)
    return (f"file_read_ahead={read_ahead}: {len(steps)} steps; job layer per step max {adv.max() * 1e3:.0f} ms, "
            f"p95 {np.percentile(adv, 95) * 1e3:.1f} ms, total {adv.sum():.1f} s; step (without idle wait) max "
            f"{stp.max() * 1e3:.0f} ms, p95 {np.percentile(stp, 95) * 1e3:.0f} ms; model {spent['core']:.1f} s, "
            f"idle wait {spent['wait']:.1f} s; 2 s clip done after {short_done:.2f} s; file done after {total:.1f} s, "
            f"{len(job.transcript.segments)} segments (Silero VAD load before: {vad_load:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--read-ahead", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/qwen3-asr-bench-reader"))
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    path = long_file(opts.minutes, opts.folder)
    if opts.one is None:
        print(f"{path} ({opts.minutes:g} min)", flush=True)
    if opts.one is not None:
        print(run(path, opts.one), flush=True)
        return
    import subprocess

    for read_ahead in opts.read_ahead:      # each in a fresh process: no state carried between them
        subprocess.run([sys.executable, __file__, "--minutes", str(opts.minutes), "--folder", str(opts.folder),
                        "--one", str(read_ahead)], check=True)


if __name__ == "__main__":
    main()
