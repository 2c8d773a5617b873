"""PyInstaller entry script for Qwen3 ASR Desktop.

PyInstaller needs a script, not a ``module:function`` console-script
reference, so this file only forwards to ``app.main:main`` (the same target as
the ``qwen3-asr-desktop`` console script in pyproject.toml).
"""
import multiprocessing
import sys


def _run() -> int:
    # Frozen apps re-execute the bundle for multiprocessing children (spawn on
    # Windows/macOS); without this a child would start a second GUI.
    multiprocessing.freeze_support()
    from app.main import main

    return main()


if __name__ == "__main__":
    sys.exit(_run())
