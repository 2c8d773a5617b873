"""Run shares of a nogil kernel on the calling thread's OpenMP team: torch's own CPU threads.

A CPU step alternates torch ops (parallel regions of torch's OpenMP team) with compiled kernels.
After each region, libgomp's worker threads spin for milliseconds waiting for the next one, so a
thread of our own given half a kernel's work shares its core with a spinning worker and gains
nothing. Handing the work to that same team (``GOMP_parallel``, which torch's ops use too) puts
it on the threads that are already awake, one share per thread.

Two forms: ``run_shares`` takes a Python callable that calls a kernel releasing the GIL (numba
``nogil=True``), and each team thread takes the GIL only to start its share (tens of us a call);
``run_compiled`` takes a compiled C body (a numba ``cfunc``) that finds its share itself through
``team_queries``' functions, for work handed out at every layer of a step (a few us a call).
Where no OpenMP runtime with ``GOMP_parallel`` is loaded (Windows builds of torch), ``run_shares``
hands shares to threads of its own (no better place for them there), and ``team_queries`` is None.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

__all__ = ["run_shares", "run_compiled", "team_queries", "team_available"]

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_lock = threading.Lock()
_runtime = None     # (GOMP_parallel for Python bodies, for C bodies, omp_get_thread_num, omp_get_num_threads)
_looked = False
_jobs: dict[int, tuple[Callable[[int], None], int, list]] = {}
_ids = itertools.count(1)
_pool: ThreadPoolExecutor | None = None    # run_shares' threads where no OpenMP runtime is loaded


def _find_runtime():
    """GOMP_parallel and the team queries from the OpenMP runtime torch loaded (libgomp on Linux;
    LLVM's libomp, which exports the same entry points, on macOS), else None."""
    global _runtime, _looked
    with _lock:
        if _looked:
            return _runtime
        _looked = True
        import torch  # noqa: F401  (loads the runtime torch uses)

        for path in _loaded_runtimes():
            try:
                lib = ctypes.CDLL(path)          # the copy already loaded: dlopen returns it
                parallel, parallel_c = lib["GOMP_parallel"], lib["GOMP_parallel"]   # two prototypes
                thread_num, team_size = lib.omp_get_thread_num, lib.omp_get_num_threads
            except (OSError, AttributeError):
                continue
            parallel.argtypes, parallel.restype = [_CALLBACK, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint], None
            parallel_c.argtypes, parallel_c.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint], None
            for query in (thread_num, team_size):
                query.argtypes, query.restype = [], ctypes.c_int
            _runtime = (parallel, parallel_c, thread_num, team_size)
            break
        return _runtime


def _loaded_runtimes() -> list[str]:
    """Loaded OpenMP runtimes, torch's own copy first (another copy would be another team)."""
    if sys.platform.startswith("linux"):
        import torch
        try:
            with open("/proc/self/maps") as maps:
                paths = {line.split()[-1] for line in maps
                         if "/" in line and any(name in line for name in ("libgomp", "libiomp5", "libomp"))}
        except OSError:
            return []
        torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        return sorted(paths, key=lambda path: (not path.startswith(torch_lib), path))
    if sys.platform == "darwin":
        import glob

        import torch
        return glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libomp.dylib"))
    return []


def team_available() -> bool:
    """Whether shares run on an OpenMP team here (else one after another)."""
    return _find_runtime() is not None


@_CALLBACK
def _share(job_id):
    """Each team thread's body: its shares of the job registered under job_id (one each, unless
    the runtime gave a smaller team than asked for)."""
    work, shares, errors = _jobs[job_id]
    for i in range(_runtime[2](), shares, _runtime[3]()):
        try:
            work(i)
        except BaseException as error:      # noqa: BLE001 (raised again on the calling thread)
            errors.append(error)


def run_shares(work: Callable[[int], None], shares: int) -> None:
    """Call work(0), ..., work(shares - 1) at once on the calling thread's OpenMP team (thread i runs
    share i); return when all are done, raising the first error any share raised. Not for work
    still running at interpreter exit: the team's threads take the GIL (``run_compiled`` does not)."""
    if shares <= 1:
        for i in range(shares):
            work(i)
        return
    if _find_runtime() is None:
        _on_own_threads(work, shares)
        return
    job_id, errors = next(_ids), []
    _jobs[job_id] = (work, shares, errors)
    try:
        _runtime[0](_share, job_id, shares, 0)      # the calling thread is team thread 0
    finally:
        del _jobs[job_id]
    if errors:
        raise errors[0]


def all_ranges(work: Callable[[int, int], bool], count: int, unit: int = 1) -> bool:
    """Cut range(count) into contiguous ranges, one for each of torch's threads but none for less
    than ``unit`` items, run ``work(first, last)`` on all of them at once (``run_shares``) and say
    whether every call returned True (kernels that check what they copy)."""
    import torch

    shares = max(1, min(torch.get_num_threads(), -(-count // unit)))
    bounds = [count * i // shares for i in range(shares + 1)]
    results = [True] * shares

    def share(i: int) -> None:
        results[i] = work(bounds[i], bounds[i + 1])

    run_shares(share, shares)
    return all(results)


def _on_own_threads(work: Callable[[int], None], shares: int) -> None:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1), thread_name_prefix="shares")
    helping = [_pool.submit(work, i) for i in range(1, shares)]
    errors = []
    try:
        work(0)
    except BaseException as error:          # noqa: BLE001 (raised below, once every share is done)
        errors.append(error)
    for future in helping:                  # shares write into the caller's buffers: wait for all
        try:
            future.result()
        except BaseException as error:      # noqa: BLE001
            errors.append(error)
    if errors:
        raise errors[0]


def team_queries() -> tuple[int, int] | None:
    """The addresses of ``int omp_get_thread_num(void)`` and ``int omp_get_num_threads(void)``, for a
    compiled body to find its share; None where no runtime is loaded."""
    if _find_runtime() is None:
        return None
    return tuple(ctypes.cast(f, ctypes.c_void_p).value for f in _runtime[2:4])


def run_compiled(body: int, data: int, shares: int) -> None:
    """Call the C function ``void body(void *data)`` at once on ``shares`` threads of the calling
    thread's OpenMP team (the caller is one of them) and return when all are done. The body finds
    its share with ``team_queries``' functions and must hand out every share whatever the team's
    size. Only with a runtime loaded (``team_available``)."""
    _runtime[1](body, data, shares, 0)
