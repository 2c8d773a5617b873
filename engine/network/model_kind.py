"""Which kind of checkpoint a folder holds: a speech model ("asr") or a forced aligner ("aligner").

Read from the checkpoint's own config.json, never from the folder's name: an aligner
renamed "my-model" was once loaded as the speech model and every file then failed with
``'Qwen3ASRNetwork' object has no attribute 'head'``. The aligner's config names a token
classification head (``classify_num`` in the original layout, a ``*TokenClassification``
architecture with ``id2label`` in the transformers layout); a speech model's does not.
"""
from __future__ import annotations

from pathlib import Path

from engine.errors import CheckpointError

ASR, ALIGNER = "asr", "aligner"
KIND_NAMES = {ASR: "a speech recognition model (Qwen3-ASR)",
              ALIGNER: "a forced aligner (Qwen3-ForcedAligner), which gives word times"}


def model_kind(model_dir) -> str:
    """"asr" or "aligner", from ``model_dir``/config.json; CheckpointError when it cannot be read."""
    from engine.network.config import read_json_object

    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{model_dir}: no config.json; is this a Qwen3-ASR model folder?")
    raw = read_json_object(path)
    top = raw.get("thinker_config") if isinstance(raw.get("thinker_config"), dict) else raw
    architectures = " ".join(str(a) for a in raw.get("architectures") or [])
    if "classify_num" in top or "ForcedAligner" in architectures or \
            ("TokenClassification" in architectures and "id2label" in raw):
        return ALIGNER
    return ASR


def check_model_kind(model_dir, wanted: str) -> None:
    """Raise CheckpointError (a ValueError) with a plain message when ``model_dir`` is not ``wanted``."""
    found = model_kind(model_dir)
    if found != wanted:
        use = ("choose it as the aligner (word timestamps) and pick a Qwen3-ASR folder as the model"
               if found == ALIGNER else "choose a Qwen3-ForcedAligner folder as the aligner")
        raise CheckpointError(f"{model_dir} holds {KIND_NAMES[found]}, not {KIND_NAMES[wanted]}: {use}")


def check_kind_if_readable(model_dir, wanted: str) -> None:
    """``check_model_kind`` for a folder whose config.json reads; anything else is left to the
    loader, whose messages for missing or broken checkpoints say more."""
    try:
        found = model_kind(model_dir)
    except (CheckpointError, OSError):
        return
    if found != wanted:
        check_model_kind(model_dir, wanted)
