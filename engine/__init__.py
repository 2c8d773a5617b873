"""Qwen3-ASR inference engine: our own model code, a batched step loop, and the public API.

    import engine
    eng = engine.load("Qwen3-ASR-0.6B")
    print(eng.transcribe("talk.mp3").text)

The heavy parts (torch, transformers) load on first use of ``load``/``Engine``, so light
modules (``engine.history``, ``engine.exports``, ``engine.audio``) import fast.
"""
from importlib import import_module

from .errors import AudioLoadError, CheckpointError
from .types import Segment, Transcript, Word

__version__ = "0.1.0"

_LAZY = {"Engine": ".engine", "load": ".engine", "Request": ".request", "RequestOutput": ".request",
         "Aligner": ".aligner", "Stream": ".stream", "FileJob": ".jobs"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


def load_aligner(aligner_dir, device=None, dtype=None):
    """Load a Qwen3-ForcedAligner checkpoint folder; see ``Aligner.align``."""
    from .aligner import Aligner

    return Aligner(aligner_dir, device=device, dtype=dtype)


__all__ = ["Engine", "load", "load_aligner", "Aligner", "Stream", "FileJob", "Request", "RequestOutput",
           "Segment", "Transcript", "Word", "AudioLoadError", "CheckpointError", "__version__"]
