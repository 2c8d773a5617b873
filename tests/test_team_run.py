"""asr_kernels/team_run.py: shares of a kernel on the calling thread's OpenMP team (torch's threads)."""
from __future__ import annotations

import threading

import pytest
import torch

from asr_kernels import team_run


def test_every_share_runs_once_on_the_team():
    seen, lock = [], threading.Lock()

    def work(i):
        with lock:
            seen.append((i, threading.get_ident()))

    team_run.run_shares(work, 4)
    assert sorted(i for i, _ in seen) == [0, 1, 2, 3]
    if team_run.team_available() and torch.get_num_threads() > 1:     # Linux torch: libgomp's team
        assert len({ident for _, ident in seen}) > 1
        assert dict(seen)[0] == threading.get_ident()                 # the caller is thread 0


def test_a_share_that_fails_fails_the_call_after_all_shares_ran():
    ran = []

    def work(i):
        ran.append(i)
        if i == 1:
            raise ValueError("share 1 broke")

    with pytest.raises(ValueError, match="share 1 broke"):
        team_run.run_shares(work, 3)
    assert sorted(ran) == [0, 1, 2]
    assert not team_run._jobs                                          # nothing left registered


def test_without_an_openmp_runtime_shares_run_on_threads_of_its_own(monkeypatch):
    """Windows builds of torch: no libgomp to hand work to, so a thread pool takes the other shares."""
    monkeypatch.setattr(team_run, "_find_runtime", lambda: None)
    assert not team_run.team_available() and team_run.team_queries() is None
    seen, lock, started = [], threading.Lock(), threading.Barrier(2, timeout=10)

    def work(i):
        started.wait()                      # both shares at once, or this times out
        with lock:
            seen.append((i, threading.get_ident()))

    team_run.run_shares(work, 2)
    assert sorted(i for i, _ in seen) == [0, 1]
    assert dict(seen)[0] == threading.get_ident() and dict(seen)[1] != threading.get_ident()

    def fails(i):
        if i == 1:
            raise ValueError("share 1 broke")
    with pytest.raises(ValueError, match="share 1 broke"):
        team_run.run_shares(fails, 3)


@pytest.mark.parametrize("count, unit, threads", [(10, 1, 2), (130, 64, 4), (64, 64, 8), (7, 1, 16), (1, 1, 2)])
def test_all_ranges_cover_the_count_once_and_say_whether_all_held(count, unit, threads, monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    ranges, lock = [], threading.Lock()

    def work(first, last):
        with lock:
            ranges.append((first, last))
        return True

    assert team_run.all_ranges(work, count, unit)
    ranges.sort()
    assert ranges[0][0] == 0 and ranges[-1][1] == count and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert len(ranges) == max(1, min(threads, -(-count // unit)))          # no range for less than a unit's worth
    assert not team_run.all_ranges(lambda first, last: first != 0, count, unit)   # one range's False is the answer
