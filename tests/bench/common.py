"""Shared benchmark helpers: the cached 0.6B-dimension checkpoint, clips, machine peak figures."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from checkpoints import REAL_0_6B, build_checkpoint  # noqa: E402

CACHE = Path(os.environ.get("QWEN3_ASR_BENCH_CACHE", Path.home() / ".cache" / "qwen3-asr-bench"))


def real_size_checkpoint() -> Path:
    """A random checkpoint with the real Qwen3-ASR-0.6B dimensions, built once and cached.

    Stored in bfloat16, as published checkpoints are, so the benchmarks load what users load:
    on CPUs without bfloat16 hardware the engine then keeps these weights compact
    (engine/network/fp16_weights.py), which a float32-stored checkpoint would hide. The LM head
    is its own matrix: random weights with a tied head repeat the token just read (its logit
    is the embedding's squared norm), and a stream of repeats would accept every draft token.
    A decode step reads as many bytes either way."""
    path = CACHE / "qwen3-asr-0.6b-random-bf16"
    if not (path / "model.safetensors").is_file():
        print(f"building a 0.6B-dimension random checkpoint in {path} (once, ~40 s, 1.9 GB)...", flush=True)
        build_checkpoint(path, dims=REAL_0_6B, seed=0, dtype=torch.bfloat16)
    return path


def widened_checkpoint() -> Path:
    """The trained tiny test model widened to the real 0.6B dimensions (tests/widened_model.py), in
    bfloat16, built once and cached: the cost of the 0.6B with a model that says real words, the
    same words about the same audio from one live update to the next. After ``engine.load``, call
    ``widened_model.use_widened_positions(engine)``."""
    import shutil

    from widened_model import POSITIONS_FILE, TINY, widen

    path = CACHE / "qwen3-asr-0.6b-dims-widened-tiny-bf16-v1"    # v: bump when widened_model.py changes
    if not (path / POSITIONS_FILE).is_file():                     # written last, and renamed into place
        print(f"widening the trained tiny model to the 0.6B dimensions in {path} (once, 1.9 GB)...", flush=True)
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        widen(TINY, partial, REAL_0_6B, dtype=torch.bfloat16)
        shutil.rmtree(path, ignore_errors=True)
        partial.rename(path)
    return path


def synthetic_clip(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    tones = sum(np.sin(2 * np.pi * f * t) for f in rng.uniform(100, 3000, 4))
    return (0.05 * tones + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


def unseen(clip: np.ndarray, k: int) -> np.ndarray:
    """``clip`` turned by ``k`` tenths of a second (and a sample): the same audio, but no feature
    window of it matches the original's or another turn's, so a timed run finds nothing of it in
    the engine's encoder or prefix cache. A user's next file is new audio too; peers cache nothing."""
    return np.roll(clip, k * 1601) if k else clip


def settled(eng):
    """``eng`` once its load's background work (decoder weights onto 2 MB pages) is done, as in an
    app that loaded a while ago, so that no thread of it competes with the timed work."""
    pages = getattr(eng.core, "weight_pages", None)
    if pages is not None:
        result = pages.wait()
        print(f"weights on 2 MB pages: {result.collapsed / 2 ** 30:.2f} of {result.asked / 2 ** 30:.2f} GiB"
              + (f" ({result.reason})" if result.reason else ""), flush=True)
    return eng


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_seconds(fn, device: torch.device, repeat: int) -> float:
    """The fastest of ``repeat`` timed calls: a peak figure, so a busy moment cannot lower the bar."""
    fn()
    sync(device)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t)
    return best


def gemm_flops(device: torch.device, dtype: torch.dtype, n: int = 2048, repeat: int = 10) -> float:
    """Measured peak FLOP/s of a large square matmul."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    return 2 * n ** 3 / _best_seconds(lambda: a @ b, device, repeat)


def gemv_bandwidth(device: torch.device, dtype: torch.dtype, megabytes: int = 300, repeat: int = 10) -> float:
    """Measured peak bytes/s of a matrix-vector product over a ``megabytes`` weight (read once per call)."""
    elem = torch.empty((), dtype=dtype).element_size()
    cols = 4096
    rows = megabytes * 2 ** 20 // (elem * cols)
    w = torch.randn(rows, cols, device=device).to(dtype)
    x = torch.randn(1, cols, device=device).to(dtype)
    return w.numel() * elem / _best_seconds(lambda: x @ w.T, device, repeat)
