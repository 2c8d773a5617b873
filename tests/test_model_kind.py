"""The checkpoint's own config says whether a folder is a speech model or a forced aligner:
an aligner chosen as the model is refused with a plain message in engine.load, the CLI, the
app and the Models dialog, whatever the folder is called."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from app_fixtures import data_dir  # noqa: F401  (autouse fixture, found by name)

REPO = Path(__file__).resolve().parent.parent
ASR_DIR = REPO / "tests" / "models" / "qwen3-asr-tiny"
ALIGNER_DIR = REPO / "tests" / "models" / "forced-aligner-tiny"


@pytest.fixture(scope="module")
def disguised_aligner(tmp_path_factory) -> Path:
    """The aligner in a folder whose name says nothing ("my-model")."""
    folder = tmp_path_factory.mktemp("kinds") / "my-model"
    shutil.copytree(ALIGNER_DIR, folder)
    return folder


def test_model_kind_is_read_from_the_config_not_the_name(disguised_aligner, tiny_model_dir):
    from engine.network.model_kind import model_kind

    assert model_kind(ASR_DIR) == "asr" and model_kind(tiny_model_dir) == "asr"
    assert model_kind(ALIGNER_DIR) == "aligner"
    assert model_kind(disguised_aligner) == "aligner"


def test_engine_load_refuses_an_aligner_as_the_model(disguised_aligner):
    import engine

    with pytest.raises(ValueError, match="holds a forced aligner.*not a speech recognition model"):
        engine.load(disguised_aligner)
    with pytest.raises(ValueError, match="not a forced aligner"):
        engine.load(ASR_DIR, aligner=ASR_DIR)


def test_cli_names_the_wrong_kind(disguised_aligner, tmp_path, capsys):
    from cli.main import main

    wav = tmp_path / "talk.wav"
    sf.write(str(wav), np.zeros(8000, np.float32), 16000)
    code = main(["transcribe", str(wav), "--model", str(disguised_aligner), "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert code != 0
    assert "holds a forced aligner" in err and "AttributeError" not in err


def test_app_says_the_model_folder_is_an_aligner(qtbot, disguised_aligner, tmp_path):
    from app.backend.engine_client import EngineClient

    client = EngineClient()   # the real loader: engine.load
    failures = []
    client.worker.model_failed.connect(failures.append)
    try:
        client.load_model(str(disguised_aligner))
        qtbot.waitUntil(lambda: bool(failures), timeout=60_000)
    finally:
        client.shutdown()
    assert "holds a forced aligner" in failures[0] and client.model_dir == ""


def test_models_dialog_tells_kinds_apart_highlights_the_folder_and_closes(qtbot, disguised_aligner):
    from app.models.model_manager import ModelManagerDialog

    dialog = ModelManagerDialog("")
    qtbot.addWidget(dialog)
    dialog.show()
    chosen = []
    dialog.model_chosen.connect(lambda *a: chosen.append(a))
    assert dialog.use_folder(str(disguised_aligner))
    assert chosen == [(str(disguised_aligner), "aligner")]
    assert not dialog.isVisible(), "a choice closes the dialog"

    again = ModelManagerDialog("")
    qtbot.addWidget(again)
    again.show()
    assert again.use_folder(str(ASR_DIR))
    current = again.list.currentItem()
    assert current.text(0) == "qwen3-asr-tiny" and current.text(1) == "In use"
    assert again.description.text().endswith(str(ASR_DIR)), "the chosen folder, in full"
    again.select(0)
    model = again.selected_model()
    assert again.description.text() == model.description, "the whole description, never cut"
