"""modelhub.downloads: offline errors, cancelled downloads, model-folder detection."""
from __future__ import annotations

import threading

import pytest

from modelhub import downloads as hub


def test_offline_raises_network_unavailable_without_touching_the_network(monkeypatch, tmp_path):
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tried = []      # at once, with no connection tried (no timeout to wait out)
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: tried.append(address))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: tried.append(args) or [])
    with pytest.raises(hub.NetworkUnavailable) as info:
        hub.download_model("Qwen/Qwen3-ASR-0.6B", dest=tmp_path / "m")
    assert tried == []
    message = str(info.value)
    assert "Cannot reach huggingface.co" in message and "Qwen/Qwen3-ASR-0.6B" in message
    assert "local model folder" in message


def test_connection_error_becomes_network_unavailable(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub

    def unreachable(*args, **kwargs):
        raise ConnectionError("Failed to resolve huggingface.co")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    with pytest.raises(hub.NetworkUnavailable, match="Check your internet connection"):
        hub.download_model("Qwen/Qwen3-ASR-1.7B", dest=tmp_path / "m")


def _fake_snapshot(updates_seen: list, total=1000, chunk=100):
    """Mimics huggingface_hub: a byte bar updated chunk by chunk from the tqdm_class."""

    def fake(repo_id, *, local_dir, allow_patterns, tqdm_class, **kwargs):
        assert "*.safetensors" in allow_patterns and "*.json" in allow_patterns
        files = tqdm_class(total=1, desc="Fetching 1 files")
        bar = tqdm_class(total=0, initial=0, unit="B", unit_scale=True)
        bar.total = total  # huggingface_hub grows the total by attribute
        for _ in range(total // chunk):
            bar.update(chunk)
            updates_seen.append(chunk)
        files.update(1)
        return local_dir

    return fake


def test_progress_reports_bytes(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", _fake_snapshot([]))
    reports = []
    path = hub.download_model("Qwen/Qwen3-ASR-0.6B", dest=tmp_path / "m",
                              progress=lambda done, total: reports.append((done, total)))
    assert path == tmp_path / "m"
    assert reports[-1] == (1000, 1000)
    assert [d for d, _ in reports] == sorted(d for d, _ in reports)


def test_cancel_stops_the_download(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub

    seen: list = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _fake_snapshot(seen))
    cancel = threading.Event()

    def progress(done, total):
        if done >= 300:
            cancel.set()

    with pytest.raises(hub.DownloadCancelled):
        hub.download_model("Qwen/Qwen3-ASR-0.6B", dest=tmp_path / "m", progress=progress,
                           cancel=cancel)
    assert sum(seen) <= 300


def test_is_model_dir(tiny_model_dir, tmp_path):
    assert hub.is_model_dir(tiny_model_dir)
    assert not hub.is_model_dir(tmp_path)
    assert not hub.is_model_dir(tmp_path / "missing")
    (tmp_path / "config.json").write_text("{}")
    assert not hub.is_model_dir(tmp_path)


def test_models_dir_honours_data_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv(hub.DATA_DIR_ENV, str(tmp_path))
    assert hub.models_dir() == tmp_path / "models"
    assert hub.default_model_dest("Qwen/Qwen3-ASR-0.6B") == tmp_path / "models" / "Qwen--Qwen3-ASR-0.6B"
    assert {m.repo_id for m in hub.KNOWN_MODELS} >= {
        "Qwen/Qwen3-ASR-0.6B", "Qwen/Qwen3-ASR-1.7B", "Qwen/Qwen3-ForcedAligner-0.6B"}
