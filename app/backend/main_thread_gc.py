"""Python's cyclic garbage collector, run only in the UI thread while the engine thread lives.

The collector runs in whichever thread allocates when a generation fills up, and the engine
thread allocates most. A closed window or dialog caught in a reference cycle is then freed
there; shiboken hands the C++ deletion to the UI thread, which can delete a widget its parent
already deleted, and the process crashes (seen: ``BindingManager::runDeletionInMainThread``).
So while an engine thread exists, automatic collection is off and a UI-thread timer collects
each generation when the automatic rules would have (as pyqtgraph's GarbageCollector does).
"""
from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

INTERVAL_MS = 500


class MainThreadGC(QObject):
    """Collects garbage from the UI thread's event loop; ``acquire``/``release`` bracket the
    time an engine thread runs (the last release turns automatic collection back on)."""

    _instance: "MainThreadGC | None" = None

    def __init__(self):
        super().__init__(QCoreApplication.instance())
        self.users = 0
        self.was_enabled = gc.isenabled()
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.check)

    @classmethod
    def shared(cls) -> "MainThreadGC":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def acquire(self) -> None:
        if self.users == 0:
            self.was_enabled = gc.isenabled()
            gc.disable()
            self.timer.start()
        self.users += 1

    def release(self) -> None:
        self.users = max(0, self.users - 1)
        if self.users == 0:
            self.timer.stop()
            gc.collect()                 # here, in the UI thread, before the collector is back on
            if self.was_enabled:
                gc.enable()

    def check(self) -> None:
        """Collect the oldest generation whose count passed its threshold, as gc would."""
        thresholds, counts = gc.get_threshold(), gc.get_count()
        for generation in (2, 1, 0):
            if counts[generation] > thresholds[generation]:
                gc.collect(generation)
                return
