"""Qwen3-ASR inference engine: our own model code, a batched step loop, and the public API.

    import engine
    eng = engine.load("Qwen3-ASR-0.6B")
    print(eng.transcribe("talk.mp3").text)

The heavy parts (torch, transformers) load on first use of ``load``/``Engine``, so light
modules (``app.history``, ``engine.text.exports``, ``engine.audio.decode``) import fast.
"""
from importlib import import_module

from engine.errors import AudioLoadError, CheckpointError
from engine.text.types import Segment, Transcript, Word

__version__ = "0.1.0"

_LAZY = {"Engine": "engine.api", "load": "engine.api", "load_aligner": "engine.api",
         "Request": "engine.serving.request", "RequestOutput": "engine.serving.request",
         "Aligner": "engine.pipelines.aligner", "Stream": "engine.pipelines.live_stream", "FileJob": "engine.pipelines.file_job",
         "EngineConfig": "engine.serving.config", "StreamDefaults": "engine.serving.config",
         # speaker names from voices (numpy only): the app's re-runs and voice profiles
         "VoiceProfiles": "engine.pipelines.speaker_profiles", "carry_names": "engine.pipelines.speaker_profiles",
         "DEFAULT_MATCH_THRESHOLD": "engine.pipelines.speaker_profiles"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = ["Engine", "EngineConfig", "StreamDefaults", "load", "load_aligner", "Aligner", "Stream", "FileJob", "Request", "RequestOutput",
           "VoiceProfiles", "carry_names", "DEFAULT_MATCH_THRESHOLD", "Segment", "Transcript", "Word", "AudioLoadError", "CheckpointError", "__version__"]
