"""A model's own automatic chunk length: declared by its folder (transcription_defaults.json), read at load.

The tiny test model declares 12 s (it hears longer chunks badly); a folder that declares nothing, as
the official checkpoints, gets 30 s; a value the caller gives always wins; a broken file fails the
load with a message naming it, before the weights load.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import engine
from engine.errors import CheckpointError
from engine.pipelines.model_defaults import (
    DEFAULTS_FILE,
    read_transcription_defaults,
    write_transcription_defaults,
)
from real_speech import ASR_DIR


def _copy_without_defaults(folder):
    """The tiny model's files (links), without its transcription_defaults.json."""
    folder.mkdir()
    for f in ASR_DIR.iterdir():
        if f.name != DEFAULTS_FILE:
            (folder / f.name).symlink_to(f)
    return folder


def test_the_tiny_model_declares_12_s_and_a_silent_folder_gets_30(tmp_path):
    declared = read_transcription_defaults(ASR_DIR)
    assert declared.max_chunk_seconds == 12.0 and declared.declared_in.endswith(DEFAULTS_FILE)
    silent = read_transcription_defaults(_copy_without_defaults(tmp_path / "official-like"))
    assert silent.max_chunk_seconds == 30.0 and silent.declared_in == ""


@pytest.mark.parametrize("content, says", [
    ({"max_chunk_seconds": 0}, "between 1 and 1200"),
    ({"max_chunk_seconds": "12"}, "between 1 and 1200"),
    ({"max_chunk_seconds": 5000}, "between 1 and 1200"),
    ({"max_chunk_second": 12}, "unknown keys 'max_chunk_second'"),
    ([12], "JSON object"),
    ("{not json", "not valid JSON"),
])
def test_a_broken_file_fails_the_load_naming_it(tmp_path, content, says):
    folder = _copy_without_defaults(tmp_path / "m")
    (folder / DEFAULTS_FILE).write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(CheckpointError, match=says) as caught:
        engine.load(folder, device="cpu", dtype="float32")
    assert DEFAULTS_FILE in str(caught.value) and str(folder) in str(caught.value)


def test_written_defaults_read_back(tmp_path):
    path = write_transcription_defaults(tmp_path, max_chunk_seconds=8.5, comment="why")
    assert json.loads(path.read_text()) == {"max_chunk_seconds": 8.5, "comment": "why"}
    assert read_transcription_defaults(tmp_path).max_chunk_seconds == 8.5
    with pytest.raises(ValueError):
        write_transcription_defaults(tmp_path, max_chunk_seconds=0.5)


def test_file_jobs_take_the_models_length_unless_given_one(tmp_path):
    clip = np.zeros(16000 * 2, np.float32)
    tiny = engine.load(ASR_DIR, device="cpu", dtype="float32")
    official_like = engine.load(_copy_without_defaults(tmp_path / "m"), device="cpu", dtype="float32")
    assert tiny.default_chunk_seconds == 12.0 and official_like.default_chunk_seconds == 30.0
    for eng, given, used in ((tiny, None, 12.0), (official_like, None, 30.0), (tiny, 20, 20.0),
                             (official_like, 5, 5.0)):
        job = eng.submit_file(clip, max_chunk_seconds=given)
        assert job.max_chunk_seconds == used, (eng.model_dir, given)
        job.cancel()
        while eng.has_work():
            eng.step()
