"""Telling the user, once the window is up, what was wrong with the app's own data.

The history may have been damaged (moved aside), locked by another program (read-only),
unwritable (kept in memory) or partly unreadable: the app starts anyway and says so in a
non-modal message box, and the status bar keeps saying when nothing is being saved.
"""
from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QMessageBox

from app.history.history_open import LOCKED, UNWRITABLE

TITLES = {LOCKED: "History is locked", UNWRITABLE: "Data folder is not writable"}


def show_startup_notices(window, opening) -> None:
    """Schedule the message for ``opening`` (an app.history.history_open.HistoryOpening) on ``window``;
    sets ``window.startup_notice`` to the box once it is shown (None when all was well)."""
    window.startup_notice = None
    if not opening.history.persistent:
        label = QLabel("History not saved")
        label.setObjectName("historyNotSaved")
        label.setToolTip(opening.message)
        label.setContentsMargins(8, 0, 8, 0)
        window.statusBar().addPermanentWidget(label)
    notices = opening.notices
    if notices:
        QTimer.singleShot(0, lambda: _open_box(window, opening, notices))


def _open_box(window, opening, notices: list[str]) -> None:
    box = QMessageBox(QMessageBox.Icon.Warning, TITLES.get(opening.status, "History"),
                      "\n\n".join(notices), QMessageBox.StandardButton.NoButton, window)
    box.setObjectName("startupNotice")
    if opening.status == LOCKED:
        box.addButton("Continue read-only", QMessageBox.ButtonRole.AcceptRole)
        quit_button = box.addButton("Quit", QMessageBox.ButtonRole.RejectRole)
        box.buttonClicked.connect(lambda b: window.close() if b is quit_button else None)
    else:
        box.addButton(QMessageBox.StandardButton.Ok)
    window.statusBar().showMessage(notices[0], 30000)
    window.startup_notice = box
    box.open()   # not exec(): the app goes on (and loads its model) while the user reads
