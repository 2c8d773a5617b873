"""Transcription defaults a checkpoint folder declares for itself: ``transcription_defaults.json``.

Some models hear long chunks well and some do not: the published Qwen3-ASR checkpoints take 30 s
chunks, while a small model trained on short utterances repeats itself or drops words past ~12 s.
So the chunk length used when the caller leaves it automatic comes from the model, chosen once at
load: a checkpoint may ship, beside ``config.json`` and ``generation_config.json``,

    {"max_chunk_seconds": 12, "comment": "why, for whoever reads the folder"}

and one that ships nothing (the official checkpoints) gets 30 s. A value the user gives (the API's
``max_chunk_seconds``, ``--max-chunk-seconds``, the app's "Longest chunk") always wins. A file that is
there but wrong fails the load with a CheckpointError naming it, like a broken config.json.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.errors import CheckpointError
from engine.network.config import read_json_object
from engine.pipelines.argument_rules import MAX_CHUNK_SECONDS

DEFAULTS_FILE = "transcription_defaults.json"
DEFAULT_CHUNK_SECONDS = 30.0     # what Qwen3-ASR 0.6B/1.7B are made for (and their longest useful chunk)
_KEYS = {"max_chunk_seconds", "comment"}


@dataclass(frozen=True)
class TranscriptionDefaults:
    """What a model folder declares; ``declared_in`` is the file's path, '' when the folder has none."""

    max_chunk_seconds: float = DEFAULT_CHUNK_SECONDS
    declared_in: str = ""


def read_transcription_defaults(model_dir) -> TranscriptionDefaults:
    """The folder's ``transcription_defaults.json``, checked; the built-in defaults when it has none."""
    path = Path(model_dir) / DEFAULTS_FILE
    if not path.is_file():
        return TranscriptionDefaults()
    raw = read_json_object(path)
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise CheckpointError(f"{path.parent}: {path.name} has unknown keys {', '.join(map(repr, unknown))} "
                              f"(known: {', '.join(sorted(_KEYS))})")
    seconds = raw.get("max_chunk_seconds", DEFAULT_CHUNK_SECONDS)
    try:
        seconds = MAX_CHUNK_SECONDS.check(seconds)
    except ValueError as e:
        raise CheckpointError(f"{path.parent}: {path.name}: {e}") from None
    return TranscriptionDefaults(max_chunk_seconds=seconds, declared_in=str(path))


def write_transcription_defaults(model_dir, *, max_chunk_seconds: float, comment: str = "") -> Path:
    """Write the file into a checkpoint folder (tools/train_test_model.py does for the tiny model)."""
    seconds = MAX_CHUNK_SECONDS.check(max_chunk_seconds)
    data = {"max_chunk_seconds": int(seconds) if seconds.is_integer() else seconds}
    if comment:
        data["comment"] = comment
    path = Path(model_dir) / DEFAULTS_FILE
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
