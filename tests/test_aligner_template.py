"""An aligner checkpoint whose chat template renders no <timestamp> tokens (issue 16): the
aligner's raw format is used instead (two timestamps per word), or the load fails clearly."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from engine.errors import CheckpointError
from engine.pipelines.aligner import Aligner

# Renders the audio and the words, but no timestamps (as a chat template for the ASR model would).
NO_TIMESTAMPS = (
    "{%- for message in messages -%}{%- for item in message.content -%}"
    "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif item.type == 'text' -%}{{ item.text }} {%- endif -%}"
    "{%- endfor -%}{%- endfor -%}"
)
# Renders one timestamp per word: as wrong as none.
ONE_TIMESTAMP = NO_TIMESTAMPS.replace("{{ item.text }} ", "{{ item.text }}<timestamp>")


@pytest.fixture(scope="module")
def good(tiny_aligner_dir):
    return Aligner(tiny_aligner_dir, device="cpu", dtype="float32")


@pytest.mark.parametrize("template", [NO_TIMESTAMPS, ONE_TIMESTAMP])
def test_template_without_two_timestamps_per_word_falls_back_to_raw_format(template, tiny_aligner_dir,
                                                                              tmp_path, good):
    folder = shutil.copytree(tiny_aligner_dir, tmp_path / "aligner")
    (folder / "chat_template.jinja").write_text(template)
    aligner = Aligner(folder, device="cpu", dtype="float32")
    audio = np.random.default_rng(2).standard_normal(3 * 16000).astype(np.float32) * 0.1
    words = ["hello", "world", "again"]
    req = aligner.make_request(audio, words)
    assert req.prompt_ids.count(aligner.config.timestamp_token_id) == 2 * len(words)
    # The test aligner's own template is the raw format: same prompt, same times.
    assert req.prompt_ids == good.make_request(audio, words).prompt_ids
    assert aligner.align(audio, "hello world again") == good.align(audio, "hello world again")


def test_timestamp_token_outside_the_vocabulary_fails_at_load(tiny_aligner_dir, tmp_path):
    folder = shutil.copytree(tiny_aligner_dir, tmp_path / "aligner")
    config = json.loads((folder / "config.json").read_text())
    config["timestamp_token_id"] = 10 ** 7
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="timestamp_token_id"):
        Aligner(folder, device="cpu", dtype="float32")
