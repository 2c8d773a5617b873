"""Threads that are done with torch give their OpenMP workers back (engine/network/openmp_team.py),
so the thread that steps the engine holds the process's only team and libgomp keeps spinning
at its barriers: the loading thread after engine.load, a file reader while it waits for the engine.

Each case runs in a fresh process: it counts the process's threads, which other tests' threads
would disturb. Where torch has one thread or no libgomp there is no team to give back."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

COMMON = """
import os, sys, time, threading
import numpy as np
import torch
torch.set_num_threads(2)
def threads():
    return len(os.listdir("/proc/self/task"))
"""


def _run(code: str, *args) -> str:
    done = subprocess.run([sys.executable, "-c", COMMON + code, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc (Linux)")


def test_a_thread_gives_back_its_workers_and_torch_still_computes_the_same():
    out = _run("""
from engine.network.openmp_team import release_team
x = torch.randn(1024, 1024)
result = {}
def work():
    first = x @ x                        # a parallel op: this thread gets a team
    result["with team"] = threads()
    result["libgomp"] = release_team()
    result["released"] = threads()
    result["same"] = torch.equal(x @ x, first)   # a new team, the same numbers
    release_team()
before = threads()
t = threading.Thread(target=work); t.start(); t.join()
print(before, result["with team"], result["libgomp"], result["released"], result["same"])
""")
    before, with_team, libgomp, released, same = out.split()
    assert same == "True"
    if libgomp == "True":
        # this thread and its one worker, then the thread alone
        assert int(with_team) == int(before) + 2, out
        assert int(released) == int(before) + 1, out


def test_engine_load_leaves_no_workers_on_the_loading_thread(tiny_model_dir):
    """The server and the app load on one thread and step on another: a team left on the loading
    thread put libgomp over the CPU count and cost the stepping thread a third of a core."""
    out = _run("""
import engine
from engine.network.openmp_team import release_team
eng = engine.load(sys.argv[1], device="cpu", dtype="float32", kv_cache_bytes=32 << 20)
loaded = threads()
libgomp = release_team()        # a team left by the load would end here
print(loaded, threads(), libgomp)
""", tiny_model_dir)
    loaded, released, libgomp = out.split()
    if libgomp == "True":
        assert released == loaded, out


def test_a_file_reader_waiting_for_the_engine_holds_no_workers(tiny_model_dir, tmp_path):
    """A reader that has read ahead waits for the engine with only its own thread alive."""
    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(0)
    sf.write(tmp_path / "long.wav", (0.1 * rng.standard_normal(16000 * 40)).astype(np.float32), 16000)
    out = _run("""
from engine.network.openmp_team import release_team
from engine.pipelines.file_reader import ChunkMaker, ThreadedReader
before = threads()
maker = ChunkMaker(sys.argv[1], None, block_seconds=5.0, max_chunk_seconds=12.0, use_vad=False, keep_regions=False)
reader = ThreadedReader(maker, ahead=1)
cpu = time.process_time()
for _ in range(600):                   # until the reader has read ahead and sleeps on the full queue
    time.sleep(0.1)
    now = time.process_time()
    if reader.opened.is_set() and now - cpu < 0.002:
        break
    cpu = now
waiting = threads()
first = reader.take()
reader.stop(); reader.join(10)
print(before, waiting, first is not None and first.decoded > 0, release_team())
""", tmp_path / "long.wav")
    before, waiting, got_block, libgomp = out.split()
    assert got_block == "True", out
    if libgomp == "True":
        assert int(waiting) == int(before) + 1, out      # the reader's own thread, no OpenMP worker
