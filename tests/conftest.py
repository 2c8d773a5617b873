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
# torch references on CPU (kernels.triton_available needs an explicit opt-in there).
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


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory) -> Path:
    """A few seconds of real synthetic speech at 16 kHz."""
    return espeak_wav(tmp_path_factory.mktemp("speech") / "hello.wav",
                      "Hello world. This is a test of local speech recognition.")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
