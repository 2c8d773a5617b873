"""The engine keeps the caller's torch thread count: loading Silero VAD must not pin it to one core.

``silero_vad.load_silero_vad()`` calls ``torch.set_num_threads(1)`` for the whole process;
after the first file the engine would run on one core. Each check runs in a fresh
interpreter so no earlier test has loaded the VAD already.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import sys, numpy as np, torch
    torch.set_num_threads(3)          # a count no library picks by itself
    import engine
    seen = {}
    eng = engine.load(sys.argv[1], device="cpu", dtype="float32")
    seen["load"] = torch.get_num_threads()
    t = eng.transcribe(sys.argv[2])   # a file: VAD on, decoding, chunking
    seen["transcribe file"] = torch.get_num_threads()
    stream = eng.open_stream()
    audio = np.zeros(16000 * 3, np.float32)
    audio[16000:32000] = 0.3 * np.sin(np.arange(16000) * 0.05)
    for block in np.split(audio, 6):
        stream.feed(block)
        while eng.has_work():
            eng.step()
    stream.close()
    while eng.has_work():
        eng.step()
    seen["live stream"] = torch.get_num_threads()
    print(seen)
""")


def test_thread_count_survives_load_file_and_stream(tiny_model_dir, speech_wav):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_model_dir), str(speech_wav)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = eval(out.stdout.strip().splitlines()[-1])
    assert seen == {"load": 3, "transcribe file": 3, "live stream": 3}


def test_vad_loader_restores_threads_in_process():
    import torch

    from engine.audio.silero import _load_silero

    before = torch.get_num_threads()
    torch.set_num_threads(2 if before != 2 else 1)
    wanted = torch.get_num_threads()
    try:
        _load_silero()
        assert torch.get_num_threads() == wanted
    finally:
        torch.set_num_threads(before)


def test_default_dtype_follows_cpu_bf16_support(monkeypatch):
    import torch
    from platforms import on_platform

    from engine.network import loading as model

    cpu = torch.device("cpu")
    on_platform(monkeypatch, native_bf16=True)
    assert model.resolve_dtype(None, cpu) == torch.bfloat16
    on_platform(monkeypatch, native_bf16=False)
    assert model.resolve_dtype(None, cpu) == torch.float32
    assert model.resolve_dtype("float32", cpu) == torch.float32   # an explicit choice wins
    assert "AMX" in model.cpu_description()
