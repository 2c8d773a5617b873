"""Qwen3 ASR Desktop: the PySide6 user interface over the ``engine`` package.

The UI holds no transcription logic: it sends work to ``app.backend.worker`` (which
owns the engine in its own thread) and shows what comes back.
"""
from __future__ import annotations


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("qwen3-asr-desktop")
    except Exception:  # running from a source checkout that was never installed
        pass
    try:
        from pathlib import Path

        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"]
    except Exception:
        return "0.0.0"


__version__ = _version()
APP_NAME = "Qwen3 ASR Desktop"
