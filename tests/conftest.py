"""Shared fixtures: tiny random checkpoints in the real layouts, and spoken audio."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Triton reads TRITON_INTERPRET when it is first imported: set it before anything imports
# it, so the kernel tests run on the CPU in this same session. The engine still uses the
# torch references on CPU (asr_kernels.triton_available needs an explicit opt-in there).
import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# int8 weights the tests quantize are cached in a folder of this run, not in the user's cache.
_CACHE = __import__("tempfile").mkdtemp(prefix="qwen3-asr-test-cache-")
os.environ.setdefault("QWEN3_ASR_CACHE_DIR", _CACHE)
__import__("atexit").register(shutil.rmtree, _CACHE, True)
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from checkpoints import build_checkpoint, to_original_layout  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen3-ASR checkpoint in the transformers-native (-hf) layout."""
    return build_checkpoint(tmp_path_factory.mktemp("tiny-asr"), seed=0)


@pytest.fixture(scope="session")
def tiny_original_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The same weights in the original Qwen layout (thinker.*, thinker_config)."""
    return to_original_layout(tiny_model_dir, tmp_path_factory.mktemp("tiny-asr-original"))


@pytest.fixture(scope="session")
def tiny_aligner_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen3-ForcedAligner checkpoint (-hf layout)."""
    return build_checkpoint(tmp_path_factory.mktemp("tiny-aligner"), seed=1, aligner=True)


def espeak_wav(path: Path, text: str, rate: int = 16000) -> Path:
    """Speak ``text`` with espeak-ng and convert it to mono ``rate`` Hz 16-bit WAV with sox."""
    if shutil.which("espeak-ng") is None or shutil.which("sox") is None:
        pytest.fail("espeak-ng and sox are required (installed by .ci/run)")
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["sox", "-R", str(raw), "-r", str(rate), "-c", "1", "-b", "16", str(path)], check=True)
    raw.unlink()
    return path


def tone_clip(seconds: float, seed: int) -> np.ndarray:
    """Noise shaped like speech: a few tones under noise, so features vary over time."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    tones = sum(np.sin(2 * np.pi * f * t) * (0.5 + 0.5 * np.sin(2 * np.pi * r * t))
                for f, r in zip(rng.uniform(100, 3000, 4), rng.uniform(0.5, 4, 4)))
    return (0.05 * tones + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


def read_trimmed(path) -> np.ndarray:
    """A 16-bit mono WAV as float32, without espeak's own leading and trailing silence."""
    import wave

    with wave.open(str(path)) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    return audio[loud[0]:loud[-1] + 1]


def with_pauses(spoken: list[np.ndarray], rate: int = 16000) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """0.5 s of silence, then each clip followed by 1.0 s, 1.1 s, 1.2 s... of zeros; and the
    clips' sample spans."""
    parts, spans, pos = [np.zeros(rate // 2, np.float32)], [], rate // 2
    for i, speech in enumerate(spoken):
        gap = np.zeros(int(rate * (1.0 + 0.1 * i)), np.float32)
        spans.append((pos, pos + len(speech)))
        parts += [speech, gap]
        pos += len(speech) + len(gap)
    return np.concatenate(parts), spans


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory) -> Path:
    """A few seconds of real synthetic speech at 16 kHz."""
    return espeak_wav(tmp_path_factory.mktemp("speech") / "hello.wav",
                      "Hello world. This is a test of local speech recognition.")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
