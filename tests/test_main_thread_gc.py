"""While the engine thread runs, Python's cyclic collector runs only in the UI thread: a widget
caught in a cycle and freed from the engine thread crashed the app (shiboken deleted it twice)."""
from __future__ import annotations

import gc
import threading

import pytest

pytest.importorskip("PySide6")

import fake_engine  # noqa: E402

from app.backend.engine_client import EngineClient  # noqa: E402


class _Cycle:
    def __init__(self, seen: list):
        self.me, self.seen = self, seen

    def __del__(self):
        self.seen.append(threading.current_thread() is threading.main_thread())


def test_cycles_are_collected_in_the_ui_thread_while_the_engine_runs(qtbot):
    was = gc.isenabled()
    client = EngineClient(fake_engine.load)
    try:
        assert not gc.isenabled(), "automatic collection would run in whichever thread allocates"
        seen: list = []
        _Cycle(seen)
        # the engine thread allocating cannot collect it; the UI thread's timer does
        done = threading.Event()
        threading.Thread(target=lambda: ([object() for _ in range(100_000)], done.set())).start()
        done.wait(10)
        for _ in range(gc.get_threshold()[0] + 10):
            _Cycle([])                   # fill generation 0 past its threshold
        qtbot.waitUntil(lambda: bool(seen), timeout=5000)
        assert seen == [True]
    finally:
        client.shutdown()
    assert gc.isenabled() == was
