"""Keep Python's ``None`` alive under a PySide6 that drops a reference to it on every void call.

PySide6 6.12.0 on Python 3.11 (``None`` is immortal only from 3.12 on) returns ``None`` from a
void method (``setValue``, ``setText``, ``insertText`` ...) without taking a reference, so
``sys.getrefcount(None)`` falls by one per call, and once it reaches zero the process aborts
with "Fatal Python error: none_dealloc". The live window's level meter alone makes 20 such calls
a second, so a long live session ends in that abort. PySide6 6.11.3 does not do this.

Where the drop is seen, a timer gives the references back: it adds what is missing to None's
reference count (CPython's ``ob_refcnt``, the object's first field) whenever it falls below half
of ``TARGET_REFS``. Holding them in a Python list instead would not do: the list releases them
when the interpreter shuts down, and the count drops below zero there. Where the drop is not seen
(a fixed PySide6, Python 3.12+, another interpreter), nothing is installed.
"""
from __future__ import annotations

import ctypes
import sys

from PySide6.QtCore import QObject, QTimer

TARGET_REFS = 1 << 22    # None's reference count after a top-up; a top-up comes at half of it
CHECK_MS = 500           # a busy UI thread makes far fewer than TARGET_REFS / 2 calls in this time


def drops_none_references() -> bool:
    """True when a void Qt call takes a reference to None away (the PySide6 6.12.0 bug)."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython" or hasattr(sys, "gettotalrefcount"):
        return False                  # immortal None, or an object layout other than ob_refcnt first
    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(64):
        probe.setObjectName("probe")
    return sys.getrefcount(None) < before - 32


class NoneKeeper(QObject):
    """Gives None back the references a void Qt call takes; see the module docstring."""

    def __init__(self, parent=None, target: int = TARGET_REFS, interval_ms: int = CHECK_MS):
        super().__init__(parent)
        self.target = target
        self.given = 0                # references added so far (= void calls made, roughly)
        self.top_up()
        self._timer = QTimer(self, interval=interval_ms)
        self._timer.timeout.connect(self.top_up)
        self._timer.start()

    def top_up(self) -> None:
        missing = self.target - sys.getrefcount(None)
        if missing > self.target // 2:
            ctypes.c_ssize_t.from_address(id(None)).value += missing
            self.given += missing


def keep_none_alive(parent=None) -> NoneKeeper | None:
    """Install a NoneKeeper where this PySide6 needs one (parented to ``parent``), else None."""
    return NoneKeeper(parent) if drops_none_references() else None
