"""A mistyped local model path stays local: a plain message, no network, no data-folder entry."""
from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from cli.main import main
from modelhub import downloads as hub


@pytest.fixture
def no_network(monkeypatch):
    """Any connection or DNS lookup fails the test loudly (and is recorded, in case a library swallows it)."""
    touched = []

    def refuse(*args, **kwargs):
        touched.append(args)
        raise OSError("test: the network must not be touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return touched


@pytest.fixture
def data_dir(tmp_path, monkeypatch, no_network):
    """An empty data folder; online mode on, so only the path check can keep the Hub away."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv(hub.DATA_DIR_ENV, str(folder))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    (work / "models").mkdir(parents=True)
    (work / "some").mkdir()
    (work / "some" / "file.txt").write_text("not a model\n")
    sf.write(work / "memo.wav", np.zeros(16000, np.float32), 16000)
    monkeypatch.chdir(work)
    return folder


def _cli_error(capsys, model: str) -> str:
    code = main(["transcribe", "memo.wav", "--model", model, "--quiet", "-o", "out"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    return err


def test_mistyped_folder_says_no_model_folder(data_dir, no_network, capsys):
    assert _cli_error(capsys, "models/asr-06b-typo") == "error: no model folder at models/asr-06b-typo"
    assert list(data_dir.iterdir()) == [] and no_network == []


def test_file_as_model_says_it_is_a_file(data_dir, no_network, capsys):
    assert _cli_error(capsys, "some/file.txt") == "error: some/file.txt is a file, not a model folder"
    assert list(data_dir.iterdir()) == [] and no_network == []


@pytest.mark.parametrize("typo", ["./asr-typo", "deep/models/asr-typo", "~/no-such-model-folder-xyz",
                                  "models\\asr-typo", "C:/models/asr", "asr-typo"])
def test_every_path_form_stays_local(data_dir, no_network, capsys, typo):
    err = _cli_error(capsys, typo)
    assert err.startswith("error: no model folder at ") and "huggingface" not in err
    assert list(data_dir.iterdir()) == [] and no_network == []


def test_only_owner_slash_name_is_a_hub_id(data_dir):
    assert hub.resolve_model_name("Qwen/Qwen3-ASR-0.6B") == ("hub", "Qwen/Qwen3-ASR-0.6B")
    for name in ("models/asr-06b-typo", "some/file.txt", "a/b/c", "./x", "/x", "~/x", "x\\y", "Qwen"):
        assert not hub.is_hub_id(name), name


def test_download_refuses_a_path_before_touching_anything(data_dir, no_network):
    with pytest.raises(ValueError, match="no model folder at models/asr-06b-typo"):
        hub.download_model("models/asr-06b-typo")
    with pytest.raises(ValueError, match="is a file, not a model folder"):
        hub.download_model("some/file.txt")
    assert list(data_dir.iterdir()) == [] and no_network == []


def test_app_folder_choice_gives_the_same_messages(data_dir, qtbot):
    from app.models.model_manager import ModelManagerDialog

    dialog = ModelManagerDialog(first_run=True)
    qtbot.addWidget(dialog)
    assert not dialog.use_folder("some/file.txt")
    assert dialog.status.text() == "some/file.txt is a file, not a model folder."
    assert not dialog.use_folder("models/asr-06b-typo")
    assert dialog.status.text() == "no model folder at models/asr-06b-typo."
    assert list(data_dir.iterdir()) == []


def test_cli_in_a_subprocess_without_network(tmp_path):
    """The real command line, offline mode off: the typo must still fail fast and locally."""
    (tmp_path / "models").mkdir()
    data = tmp_path / "data"
    data.mkdir()
    sf.write(tmp_path / "memo.wav", np.zeros(16000, np.float32), 16000)
    guard = ("import socket, sys, runpy\n"
             "def refuse(*a, **k): raise SystemExit('network touched')\n"
             "socket.getaddrinfo = refuse; socket.socket.connect = refuse\n"
             "sys.argv = ['qwen3-asr'] + sys.argv[1:]\n"
             "from cli.main import main; sys.exit(main())\n")
    import os
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update({hub.DATA_DIR_ENV: str(data), "PYTHONPATH": str(repo)})
    proc = subprocess.run([sys.executable, "-c", guard, "transcribe", "memo.wav", "--model", "models/asr-06b-typo",
                           "-o", "out"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "error: no model folder at models/asr-06b-typo"
    assert list(data.iterdir()) == []
