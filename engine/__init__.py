"""Qwen3-ASR inference engine: our own model code, a batched step loop, and the public API.

    import engine
    eng = engine.load("Qwen3-ASR-0.6B")
    print(eng.transcribe("talk.mp3").text)
"""
from .engine import Engine, load
from .errors import AudioLoadError, CheckpointError
from .request import Request, RequestOutput
from .types import Segment, Transcript, Word

__version__ = "0.1.0"


def load_aligner(aligner_dir, device=None, dtype=None):
    """Load a Qwen3-ForcedAligner checkpoint folder; see ``Aligner.align``."""
    from .aligner import Aligner

    return Aligner(aligner_dir, device=device, dtype=dtype)


__all__ = ["Engine", "load", "load_aligner", "Request", "RequestOutput", "Segment", "Transcript", "Word",
           "AudioLoadError", "CheckpointError", "__version__"]
