"""Helpers for many-files runs (tests and tests/bench/bench_many_files.py).

``quick_checkpoint`` is a tiny random checkpoint whose first generated token is
always an end token: every chunk costs one encoder pass and one decode step, so
hundreds of files run in seconds and what is measured is the queue (decoding,
admission, open files, memory), not generation. ``run_cli_measured`` runs the real
CLI in a subprocess under an optional RLIMIT_NOFILE and returns its peak RSS.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
SPEECH_TEXT = ("The quick brown fox jumps over the lazy dog. Speech recognition turns spoken words into "
               "text, one sentence at a time, and a queue of many files should never need more memory "
               "than a handful of them.")

# Runs the CLI in this process after setting the limit, then reports what the kernel measured.
_WRAPPER = """
import json, resource, sys
nofile = int(sys.argv[1])
if nofile:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
from cli.main import main
try:
    rc = main(sys.argv[2:])
except SystemExit as e:
    rc = e.code
print(json.dumps({"rc": rc, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def quick_checkpoint(out_dir) -> Path:
    """A tiny random checkpoint that ends every transcript at once (see the module doc).

    Only the final norm and lm_head change: the norm keeps one hidden dimension, and the two
    end tokens score +50 and -50 times it, so one of them wins whatever its sign (and token 0,
    an end token, wins a tie at zero).
    """
    import torch
    from safetensors.torch import load_file, save_file

    sys.path.insert(0, str(ROOT / "tests"))
    from checkpoints import build_checkpoint

    out_dir = Path(out_dir)
    if (out_dir / "model.safetensors").is_file() and (out_dir / "quick_eos").is_file():
        return out_dir
    build_checkpoint(out_dir, seed=0)
    eos = json.loads((out_dir / "config.json").read_text())["eos_token_id"]
    weights = load_file(out_dir / "model.safetensors")
    norm = torch.zeros_like(weights["model.language_model.norm.weight"])
    norm[0] = 1.0
    head = torch.zeros_like(weights["lm_head.weight"])
    head[eos[0], 0], head[eos[1], 0] = 50.0, -50.0
    weights["model.language_model.norm.weight"], weights["lm_head.weight"] = norm, head
    save_file(weights, out_dir / "model.safetensors", metadata={"format": "pt"})
    (out_dir / "quick_eos").write_text("first token is an end token\n")
    return out_dir


def speech(seconds: float) -> np.ndarray:
    """espeak-ng speech at 16 kHz, repeated to ``seconds``."""
    if shutil.which("espeak-ng") is None or shutil.which("sox") is None:
        raise RuntimeError("espeak-ng and sox are required")
    with tempfile.TemporaryDirectory() as tmp:
        raw, wav = Path(tmp) / "raw.wav", Path(tmp) / "speech.wav"
        subprocess.run(["espeak-ng", "-w", str(raw), SPEECH_TEXT], check=True, capture_output=True)
        subprocess.run(["sox", "-R", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)], check=True)
        voice, _ = sf.read(wav, dtype="float32")
    return np.resize(voice, int(seconds * 16000)).astype(np.float32)


def short_files(folder, count: int, seed: int = 0, min_s: float = 2.0, max_s: float = 5.0) -> list[Path]:
    """``count`` WAV files of 2-5 s of speech, each a different slice of one espeak recording."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    voice = speech(30.0)
    rng = np.random.default_rng(seed)
    files = []
    for i in range(count):
        n = int(rng.uniform(min_s, max_s) * 16000)
        start = int(rng.integers(0, len(voice) - n))
        path = folder / f"clip_{i:04d}.wav"
        sf.write(path, voice[start:start + n], 16000, subtype="PCM_16")
        files.append(path)
    return files


def run_cli_measured(files, model, out_dir, *, nofile: int = 0, repo: Path = ROOT,
                     extra=(), timeout: float = 600) -> dict:
    """``qwen3-asr transcribe FILES --model MODEL -o OUT --quiet`` in a fresh process.

    Returns rc, maxrss_mb (the process's own peak), the stderr lines and the stems written.
    """
    cmd = [sys.executable, "-c", _WRAPPER, str(nofile), "transcribe", *map(str, files), "--model", str(model),
           "-o", str(out_dir), "--quiet", "--device", "cpu", "--dtype", "float32", *extra]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(repo))
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode not in (0, 1) or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"CLI run broke (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    report = json.loads(lines[-1])
    return dict(rc=report["rc"], maxrss_mb=report["maxrss_kb"] / 1024, stderr=proc.stderr.splitlines(),
                written={p.stem for p in Path(out_dir).glob("*.txt")})
