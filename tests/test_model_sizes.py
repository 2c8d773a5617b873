"""The Models dialog says how big each download is, asks the Hub off the UI thread, and
never touches the network in tests (the Hub is replaced in every test here)."""
from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

import pytest

pytest.importorskip("pytestqt")

from app.models import model_sizes  # noqa: E402
from modelhub import downloads as hub  # noqa: E402


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """No model downloaded, nothing learnt from the Hub yet, and no socket may connect."""
    monkeypatch.setenv(hub.DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setattr(model_sizes, "_hub_sizes", {})
    monkeypatch.setattr(model_sizes, "_asking", set())
    touched = []

    def refuse(*args, **kwargs):
        touched.append(args)
        raise OSError("test: the network must not be touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield
    for thread in threading.enumerate():   # no lookup outlives the test's fake Hub
        if thread.name == "model-sizes":
            thread.join(10)
    assert touched == []


def rows(dialog):
    return {dialog.list.topLevelItem(r).text(0): dialog.list.topLevelItem(r)
            for r in range(dialog.list.topLevelItemCount())}


def test_sizes_show_at_once_and_the_hub_refines_them_without_blocking(qtbot, monkeypatch):
    from app.models.model_manager import ModelManagerDialog

    release, asked = threading.Event(), []

    def slow_hub(repo_id, timeout=15.0):
        asked.append(repo_id)
        assert release.wait(10), "the test never let the Hub answer"
        return {"Qwen/Qwen3-ASR-0.6B": 1_234_000_000, "Qwen/Qwen3-ASR-0.6B-hf": 987_000_000}.get(
            repo_id, 0)

    monkeypatch.setattr(hub, "download_size", slow_hub)
    dialog = ModelManagerDialog(first_run=True)
    qtbot.addWidget(dialog)
    assert asked == [], "only a dialog that is shown asks the Hub"
    dialog.show()
    qtbot.waitUntil(lambda: len(asked) == 1, timeout=5000)
    # The Hub has not answered (slow_hub is still waiting) and the dialog is usable meanwhile.
    table = rows(dialog)
    assert table["Qwen/Qwen3-ASR-0.6B"].text(2) == "about 1.9 GB"
    assert table["Qwen/Qwen3-ASR-1.7B"].text(2) == "about 4.7 GB"
    assert table["Qwen/Qwen3-ASR-0.6B-hf"].text(2) == "size unknown"   # no figure is made up
    dialog.select(0)
    assert dialog.download_button.text() == "Download (about 1.9 GB)"
    dialog.list.setCurrentItem(table["Qwen/Qwen3-ASR-1.7B-hf"])
    assert dialog.download_button.text() == "Download (size unknown)"

    release.set()
    # every model asked (the lookup thread asks the rest after it has passed on 0.6B-hf's answer)
    qtbot.waitUntil(lambda: table["Qwen/Qwen3-ASR-0.6B-hf"].text(2) == "987 MB"
                    and len(asked) == len(hub.KNOWN_MODELS), timeout=5000)
    assert table["Qwen/Qwen3-ASR-0.6B"].text(2) == "1.2 GB"
    assert table["Qwen/Qwen3-ASR-1.7B"].text(2) == "about 4.7 GB"   # the Hub said nothing useful
    dialog.select(0)
    assert dialog.download_button.text() == "Download (1.2 GB)"
    assert sorted(asked) == sorted(m.repo_id for m in hub.KNOWN_MODELS)

    again = ModelManagerDialog()
    qtbot.addWidget(again)
    again.show()
    assert rows(again)["Qwen/Qwen3-ASR-0.6B"].text(2) == "1.2 GB"   # remembered, not asked again
    assert asked.count("Qwen/Qwen3-ASR-0.6B") == 1


def test_an_unreachable_hub_leaves_the_known_figures(qtbot, monkeypatch):
    from app.models.model_manager import ModelManagerDialog

    calls = []

    def offline(repo_id, timeout=15.0):
        calls.append(repo_id)
        raise hub.NetworkUnavailable("no network")

    monkeypatch.setattr(hub, "download_size", offline)
    dialog = ModelManagerDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: len(calls) == len(hub.KNOWN_MODELS) and not model_sizes._asking,
                    timeout=5000)
    assert rows(dialog)["Qwen/Qwen3-ForcedAligner-0.6B"].text(2) == "about 1.8 GB"
    assert rows(dialog)["Qwen/Qwen3-ASR-1.7B-hf"].text(2) == "size unknown"
    assert model_sizes._hub_sizes == {}   # a later opening may ask again


def test_downloaded_models_show_their_size_on_disk_and_are_not_asked_about(qtbot, monkeypatch):
    from app.models.model_manager import ModelManagerDialog

    folder = hub.default_model_dest("Qwen/Qwen3-ASR-0.6B")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 2_000_000)
    asked = []
    monkeypatch.setattr(hub, "download_size",
                        lambda repo_id, timeout=15.0: asked.append(repo_id) or 5_000_000)
    dialog = ModelManagerDialog(str(folder))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: len(asked) == len(hub.KNOWN_MODELS) - 1, timeout=5000)
    assert "Qwen/Qwen3-ASR-0.6B" not in asked
    assert rows(dialog)["Qwen/Qwen3-ASR-0.6B"].text(2) == "2 MB"
    dialog.select(0)
    assert dialog.download_button.text() == "Download" and not dialog.download_button.isEnabled()


def test_download_size_counts_only_the_files_a_download_fetches(monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    siblings = [SimpleNamespace(rfilename=name, size=size) for name, size in (
        ("model.safetensors", 1_800_000_000), ("config.json", 6_000), ("merges.txt", 1_670_000),
        ("vocab.json", 2_780_000), ("README.md", 57_500), (".gitattributes", 1_520),
        ("assets/overview.png", 9_000_000), ("model.onnx", 2_000_000_000))]
    seen = {}

    def model_info(self, repo_id, files_metadata=False, timeout=None, **kwargs):
        seen.update(repo_id=repo_id, files_metadata=files_metadata)
        return SimpleNamespace(siblings=siblings)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    fetched = 1_800_000_000 + 6_000 + 1_670_000 + 2_780_000   # no README, image or ONNX
    assert hub.download_size("Qwen/Qwen3-ASR-0.6B") == fetched
    assert seen == {"repo_id": "Qwen/Qwen3-ASR-0.6B", "files_metadata": True}


def test_download_size_offline_never_asks(monkeypatch):
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info",
                        lambda *a, **k: pytest.fail("asked the Hub in offline mode"))
    with pytest.raises(hub.NetworkUnavailable, match="Cannot reach huggingface.co"):
        hub.download_size("Qwen/Qwen3-ASR-0.6B")
