"""Give back a thread's OpenMP worker team when that thread is done with torch for a while.

With GNU OpenMP (libgomp, which Linux torch wheels ship), every thread that runs a parallel
torch op keeps a team of worker threads for the rest of its life. Once the teams of all
threads together hold more threads than the process has CPUs, libgomp stops spinning at its
barriers (100 spins instead of ~300,000) and every parallel region sleeps and wakes on futexes.
A model step runs hundreds of small parallel regions (one attention call per row and layer),
so an engine stepped on a thread other than the one that loaded it (the server's engine
thread) left cores idle while it waited at those barriers: the loading thread's team was still
there, and so were the teams of file readers waiting for the engine to take a block.

So whoever finishes a burst of torch work on a thread that will not step the engine gives its
team back: ``engine.load`` on the loading thread, a file reader after each block. The next
parallel op on that thread builds a new team (one thread start).
"""

from __future__ import annotations

import ctypes
import sys
import threading

_lock = threading.Lock()
_pause = None          # libgomp's omp_pause_resource_all, once found
_looked = False


def _find_pause():
    """libgomp's ``omp_pause_resource_all`` from the copy this process has loaded, else None
    (macOS and Windows builds use other OpenMP runtimes, which keep one pool per process)."""
    global _pause, _looked
    with _lock:
        if _looked:
            return _pause
        _looked = True
        if not sys.platform.startswith("linux"):
            return None
        import torch  # noqa: F401  (loads the libgomp torch uses, if it uses one)

        try:
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps if "libgomp" in line and "/" in line})
        except OSError:
            return None
        for path in paths:
            try:
                pause = ctypes.CDLL(path).omp_pause_resource_all   # the loaded copy: dlopen returns it
            except (OSError, AttributeError):   # an old libgomp without OpenMP 5.0's pause
                continue
            pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
            _pause = pause
            break
        return _pause


def release_team() -> bool:
    """End the calling thread's OpenMP worker threads (omp_pause_soft); whether there was a
    libgomp to ask. Must not be called inside a parallel region (torch never calls Python there)."""
    pause = _find_pause()
    if pause is None:
        return False
    return pause(1) == 0      # 1 = omp_pause_soft: threads end, settings stay


__all__ = ["release_team"]
