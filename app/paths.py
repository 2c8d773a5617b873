"""Where the app keeps its files: data (history, models, recordings), logs, settings.

``$QWEN3_ASR_DATA_DIR`` puts all of them in one folder; tests and portable
installs use it. The data folder has one definition, ``modelhub.downloads.data_dir``,
shared with the command line (modelhub loads neither torch nor Qt).
"""
from __future__ import annotations

import os
from pathlib import Path

import appdirs

APP_DIR_NAME = "qwen3-asr-desktop"
DATA_DIR_ENV = "QWEN3_ASR_DATA_DIR"


def data_dir() -> Path:
    from modelhub.downloads import data_dir as shared_data_dir

    return shared_data_dir()


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
