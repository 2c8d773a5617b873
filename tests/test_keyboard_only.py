"""Issue 35, must show: the keyboard-only path. Add a file, play it, search it and export it
with keys alone (no mouse event anywhere). The keys, in order:

    Ctrl+O (the file dialog answers with talk.wav), Tab until the queue has focus, Down (the
    file), Tab until the transcript's segments have focus, Space (play), Space (pause),
    Ctrl+F, typing "segment", F3 (next), Shift+F3 (previous), Tab until the queue has focus,
    Ctrl+E (export in the ticked formats: SRT until others are ticked).
"""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401
from test_keyboard_playback import FakePlayer  # noqa: E402


@pytest.fixture(autouse=True)
def no_modifier_left_held(qtbot):
    """Qt keeps the last key event's modifiers as the application's: a Shift+F3 would leave
    Shift "held" for the next test, whose selectRow() then extends a selection."""
    yield
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QLineEdit

    field = QLineEdit()
    qtbot.addWidget(field)
    qtbot.keyClick(field, Qt.Key.Key_End)
    assert QGuiApplication.keyboardModifiers() == Qt.KeyboardModifier.NoModifier


def press(qtbot, key, modifier=Qt.KeyboardModifier.NoModifier):
    qtbot.keyClick(QApplication.focusWidget(), key, modifier)


def tab_to(qtbot, widget, limit=20):
    for _ in range(limit):
        if QApplication.focusWidget() is widget:
            return
        press(qtbot, Qt.Key.Key_Tab)
    raise AssertionError(f"Tab never reached {widget.accessibleName()}")


def test_add_play_search_export_with_the_keyboard_only(qtbot, client, tmp_path, monkeypatch):
    monkeypatch.setattr("app.transcript.transcript_view.Player", FakePlayer)
    talk = silent_wav(tmp_path, "talk.wav")
    # The file dialog itself is Qt's (keyboard-driven); here it answers with the file.
    monkeypatch.setattr("app.widgets.dialog_folders.QFileDialog.getOpenFileNames",
                        lambda *a, **k: ([str(talk)], ""))
    w = open_main_window(qtbot, client, tmp_path)
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not None, timeout=2000)
    view, table = w.transcript_view, w.queue_panel.table

    press(qtbot, Qt.Key.Key_O, Qt.KeyboardModifier.ControlModifier)          # add a file
    qtbot.waitUntil(lambda: w.queue.model.count("done") == 1, timeout=5000)
    tab_to(qtbot, table)
    press(qtbot, Qt.Key.Key_Down)                                             # the file
    if not table.selected_job_ids():
        press(qtbot, Qt.Key.Key_Up)
    qtbot.waitUntil(lambda: view.model.transcript is not None, timeout=2000)

    tab_to(qtbot, view.table)
    press(qtbot, Qt.Key.Key_Space)                                            # play
    assert view.player.playing and view.player.calls[-1][0] == str(talk)
    press(qtbot, Qt.Key.Key_Space)                                            # pause
    assert not view.player.playing

    press(qtbot, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)           # search
    assert QApplication.focusWidget() is view.search
    qtbot.keyClicks(view.search, "segment")
    press(qtbot, Qt.Key.Key_F3)
    press(qtbot, Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)
    assert view.match_label.text() == "1 of 1"
    assert view.table.selectionModel().selectedRows()[0].row() == 1

    tab_to(qtbot, table)
    press(qtbot, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)           # export
    assert (tmp_path / "talk.srt").is_file()
    assert "Fake talk." in (tmp_path / "talk.srt").read_text()
