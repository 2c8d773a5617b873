"""Give freed heap memory back to the system after a file finishes.

Each file job allocates and frees tens of MB (decoded blocks, chunk samples, log-mel features,
activations). glibc keeps freed blocks in its heap, so with many files in a row the resident size
grows although nothing holds the memory. Peak memory must follow the batch, not the number of
files queued, so a finishing job trims the heap. Elsewhere (macOS, Windows, musl) this is a no-op.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import sys

_trim = None


def _load_trim():
    global _trim
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _trim = libc.malloc_trim            # glibc only (AttributeError on musl)
                _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):
                _trim = False
    return _trim


def release_freed_memory() -> bool:
    """Return the heap's free pages to the system (glibc; about 0.1 ms); True when it ran."""
    trim = _load_trim()
    if not trim:
        return False
    trim(0)
    return True
