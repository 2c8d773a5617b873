"""The GE2E speaker-model weights for tests: installed or downloaded once (pip, PyPI) into a
cache outside the repository, as the app's model manager would (modelhub.speaker_model)."""
from __future__ import annotations

import os
from pathlib import Path

CACHE = Path(os.environ.get("QWEN3_ASR_TEST_SPEAKERS", Path.home() / ".cache" / "qwen3-asr-tests" / "speakers"))


def ge2e_weights() -> Path:
    from engine.network.speaker_encoder import SpeakerModelMissing, find_weights
    from modelhub.speaker_model import fetch_speaker_model

    try:
        return find_weights(data_dir=CACHE)
    except SpeakerModelMissing:
        return fetch_speaker_model(CACHE)
