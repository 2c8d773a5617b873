"""Log to a rotating file in the user log folder (Help > About > Open log file)."""
from __future__ import annotations

import logging
import logging.handlers
import sys

from app.paths import log_file


def setup_logging(level: int = logging.INFO) -> str:
    """Send log records to the log file (and stderr for warnings); returns the file path."""
    path = log_file()
    root = logging.getLogger()
    root.setLevel(level)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=3,
                                                       encoding="utf-8")
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
        root.addHandler(handler)
    except OSError as exc:  # a read-only home must not stop the app
        print(f"cannot write the log file {path}: {exc}", file=sys.stderr)
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    root.addHandler(console)
    return str(path)
