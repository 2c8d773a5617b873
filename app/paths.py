"""Where the app keeps its files: data (history, models, recordings), logs, settings.

``$QWEN3_ASR_DATA_DIR`` puts all of them in one folder; tests and portable
installs use it. engine.hub.data_dir() follows the same rule; it is repeated
here because importing the engine package loads torch, which the UI thread
should not wait for at startup.
"""
from __future__ import annotations

import os
from pathlib import Path

import appdirs

APP_DIR_NAME = "qwen3-asr-desktop"
DATA_DIR_ENV = "QWEN3_ASR_DATA_DIR"


def data_dir() -> Path:
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    return Path(appdirs.user_data_dir(APP_DIR_NAME, appauthor=False))


def log_dir() -> Path:
    if os.environ.get(DATA_DIR_ENV):
        return data_dir() / "logs"
    return Path(appdirs.user_log_dir(APP_DIR_NAME, appauthor=False))


def log_file() -> Path:
    return log_dir() / "qwen3-asr-desktop.log"


def history_file() -> Path:
    return data_dir() / "history.sqlite3"


def recordings_dir() -> Path:
    return data_dir() / "recordings"


def settings_file() -> Path | None:
    """An INI file inside the data folder when it is overridden, else None (native store)."""
    if os.environ.get(DATA_DIR_ENV):
        return data_dir() / "settings.ini"
    return None
