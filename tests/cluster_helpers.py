"""Shared by tests/test_cluster_*.py and tests/bench/bench_cluster.py: short espeak-ng files the
trained test model hears (sentences from tools/train_test_model.py's vocabulary), and a local
Ray on loopback."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
TINY_MODEL = ROOT / "tests" / "models" / "qwen3-asr-tiny"


def sentences(n: int, seed: int = 36) -> list[str]:
    sys.path.insert(0, str(ROOT / "tools"))
    from train_test_model import sentence

    rng = random.Random(seed)
    return [sentence(rng) for _ in range(n)]


def speech_files(folder, n: int, seed: int = 36) -> list[Path]:
    """``n`` 16 kHz WAV files of one or two spoken sentences each (about 2-5 s), made once per folder."""
    sys.path.insert(0, str(ROOT / "tests"))
    from real_speech import speak

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    texts = sentences(2 * n, seed)
    paths = []
    for i in range(n):
        path = folder / f"clip{i:03d}.wav"
        if not path.exists():
            parts = [speak(texts[2 * i])] + ([speak(texts[2 * i + 1])] if i % 3 == 0 else [])
            gap = np.zeros(4000, np.float32)
            sf.write(path, np.concatenate([parts[0]] + [x for p in parts[1:] for x in (gap, p)]), 16000)
        paths.append(path)
    return paths


def long_file(folder, clips, repeat: int = 3) -> Path:
    """One file of all ``clips`` one after another, ``repeat`` times, with short pauses (about a minute)."""
    pieces = []
    for _ in range(repeat):
        for clip in clips:
            pieces += [sf.read(clip, dtype="float32")[0], np.zeros(8000, np.float32)]
    path = Path(folder) / "long.wav"
    sf.write(path, np.concatenate(pieces), 16000)
    return path


def start_local_ray(num_cpus: int = 2):
    """A Ray on this machine only: loopback address, no dashboard, no Ray Data progress bars."""
    import ray

    ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def read_outputs(folder, formats=("txt", "json")) -> dict[str, str]:
    """{file name: content} of the transcript outputs in ``folder`` (not the manifest)."""
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(Path(folder).iterdir())
            if p.suffix.lstrip(".") in formats}


def worker_that_holds(path, hold, holder):
    """An EngineWorker class whose engine, once it has stepped ``path``, steps nothing more while the
    file ``hold`` exists, and writes its name to the file ``holder``: a test can then kill the engine
    with ``path`` surely unfinished. Built here (a class in a function) so Ray's cloudpickle ships
    it by value to actors, which cannot import tests/."""
    import os
    import time

    from cluster.worker import EngineWorker

    path, hold, holder = (os.path.abspath(os.fspath(p)) for p in (path, hold, holder))

    class HeldEngine:
        def __init__(self, engine, name):
            self.engine, self.name, self.holding = engine, name, False

        def __getattr__(self, attr):
            return getattr(self.engine, attr)

        def submit_file(self, source, **options):
            job = self.engine.submit_file(source, **options)
            # only set here: another file the actor submits before the next step must not clear it
            if os.path.abspath(os.fspath(source)) == path and os.path.exists(hold):
                self.holding = True
            return job

        def step(self):
            outputs = self.engine.step()
            if self.holding:
                with open(holder + ".part", "w") as f:
                    f.write(self.name)
                os.replace(holder + ".part", holder)   # whole, or not there
                while os.path.exists(hold):   # blocks the actor's loop: it is killed here
                    time.sleep(0.02)
                self.holding = False
            return outputs

    class HoldingEngineWorker(EngineWorker):
        def __init__(self, settings, registry=None):
            super().__init__(settings, registry)
            self.engine = HeldEngine(self.engine, self.name)

    return HoldingEngineWorker
