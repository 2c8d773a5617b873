"""Damaged model folders (issue 16): one line naming the folder, the file and what is wrong,
exit status 2 from the CLI and a plain message in the app, never a traceback or a hang."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from bad_model_cases import CASES, make_case
from engine.errors import CheckpointError

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cases(tiny_model_dir, tmp_path_factory) -> dict[str, tuple[Path, list[str]]]:
    root = tmp_path_factory.mktemp("bad-models")
    return {label: (make_case(tiny_model_dir, root / f"case{i}", edit), words)
            for i, (label, edit, words) in enumerate(CASES)}


def _stderr_errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("label", [c[0] for c in CASES])
def test_cli_names_folder_file_and_problem(label, cases, speech_wav, tmp_path, capsys):
    from cli.main import main

    folder, words = cases[label]
    code = main(["transcribe", str(speech_wav), "--model", str(folder), "--device", "cpu",
                 "-o", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    errors = _stderr_errors(err)
    assert len(errors) == 1, err
    assert str(folder) in errors[0]
    for word in words:
        assert word in errors[0], errors[0]
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("label", ["num_hidden_layers = 10^6 (weights for 2)", "hidden_size = 128 (weights for 64)",
                                   "safetensors offsets past the end"])
def test_engine_raises_checkpoint_error(label, cases):
    folder, words = cases[label]
    with pytest.raises(CheckpointError) as err:
        engine.load(folder, device="cpu")
    assert "\n" not in str(err.value)
    assert all(w in str(err.value) for w in words)


def test_original_layout_names_its_keys(tiny_original_dir, tmp_path):
    from bad_model_cases import _set, _text

    folder = make_case(tiny_original_dir, tmp_path / "orig", _set(_text, "num_hidden_layers", 7))
    with pytest.raises(CheckpointError, match=r"thinker_config\.text_config\.num_hidden_layers = 7.*thinker\.model"):
        engine.load(folder, device="cpu")


def test_sharded_index_with_a_path_outside_the_folder_is_refused(tiny_model_dir, tmp_path):
    folder = make_case(tiny_model_dir, tmp_path / "escape", lambda f: (f / "model.safetensors.index.json").write_text(
        '{"weight_map": {"lm_head.weight": "../model.safetensors"}}'))
    with pytest.raises(CheckpointError, match="not plain file names"):
        engine.load(folder, device="cpu")


def test_absurd_layer_count_fails_at_once_in_a_real_cli(cases, speech_wav, tmp_path):
    """The case that hung for minutes at 5 GB: a subprocess as a user runs it."""
    folder, words = cases["num_hidden_layers = 10^6 (weights for 2)"]
    proc = subprocess.run([sys.executable, "-m", "cli.main", "transcribe", str(speech_wav), "--model", str(folder),
                           "--device", "cpu", "-o", str(tmp_path), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr
    errors = _stderr_errors(proc.stderr)
    assert len(errors) == 1 and all(w in errors[0] for w in words), proc.stderr
    assert "Traceback" not in proc.stderr


def test_good_model_still_loads_and_matches(tiny_model_dir, tmp_path):
    """Checking headers first changes nothing for a good folder: same tokens as before."""
    copy = Path(shutil.copytree(tiny_model_dir, tmp_path / "good"))
    audio = np.random.default_rng(3).standard_normal(16000).astype(np.float32) * 0.1
    a = engine.load(tiny_model_dir, device="cpu", dtype="float32").generate([audio], max_new_tokens=8)
    b = engine.load(copy, device="cpu", dtype="float32").generate([audio], max_new_tokens=8)
    assert a == b


# -- the app's model dialog --------------------------------------------------------------------

@pytest.mark.parametrize("label", ["encoder_layers = 10^6 (weights for 2)", "config.json is a JSON list",
                                   'eos_token_id = "end"', "safetensors header length 2^63",
                                   "safetensors cut in half"])
def test_app_model_load_error_is_one_plain_line(label, cases, qtbot):
    pytest.importorskip("pytestqt")
    from app.backend.worker import EngineWorker

    folder, words = cases[label]
    worker = EngineWorker()
    messages = []
    worker.model_failed.connect(messages.append)   # direct connection: emitted inside load_model
    worker.load_model(str(folder), "cpu", "", "")
    assert len(messages) == 1
    message = messages[0]
    assert str(folder) in message and "\n" not in message and "Traceback" not in message
    assert all(w in message for w in words), message
    assert worker.engine is None
