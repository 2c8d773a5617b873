"""Errors the engine raises for bad input; each names what was wrong."""
from __future__ import annotations


class AudioLoadError(ValueError):
    """An audio file could not be read; the message names the file and the reason."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class CheckpointError(ValueError):
    """A model folder is missing files or tensors, or holds the wrong shapes."""
