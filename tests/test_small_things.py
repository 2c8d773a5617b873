"""Issue 35, small things: notices go by themselves, the status bar never cuts a word, and a
History click marks the same file in the queue."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401


def test_notices_dismiss_themselves_but_not_under_the_pointer(qtbot):
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QEnterEvent

    from app.widgets.notice_bar import NoticeBar

    from PySide6.QtWidgets import QWidget

    window = QWidget()   # the bar away from the pointer, which sits at the window's corner
    window.resize(500, 300)
    qtbot.addWidget(window)
    bar = NoticeBar(window)
    bar.setGeometry(0, 200, 500, 40)
    window.show()
    bar.show_notice("Exported 3 files", timeout_ms=50)
    assert bar.isVisible()
    qtbot.waitUntil(lambda: not bar.isVisible(), timeout=2000)
    bar.show_notice("Exported 4 files", timeout_ms=50)
    bar.enterEvent(QEnterEvent(bar.rect().center(), bar.rect().center(), bar.rect().center()))
    qtbot.wait(150)
    assert bar.isVisible(), "someone is reading it"
    bar.leaveEvent(QEvent(QEvent.Type.Leave))
    assert bar._timer.isActive()
    bar.show_notice("Sticky", timeout_ms=0)
    assert not bar._timer.isActive()
    bar.show_notice("Default")
    assert bar._timer.isActive() and bar._timer.interval() >= 12_000


def test_status_bar_shortens_at_a_word_and_keeps_the_whole_text(qtbot, client, tmp_path):
    w = open_main_window(qtbot, client, tmp_path)
    w.resize(700, 500)
    qtbot.wait(50)
    text = ("Loaded the edited transcript of weekly-team-meeting.wav (version 2, 2024-06-12 "
            "10:41) with 312 segments and word timestamps from the aligner")
    w.statusBar().showMessage(text, 8000)
    shown = w.statusBar().currentMessage()
    assert shown.endswith("…") and len(shown) < len(text)
    assert text.startswith(shown[:-1]) and text[len(shown) - 1] in " ,", "cut between words"
    assert w.statusBar().toolTip() == text
    w.resize(1900, 500)
    qtbot.waitUntil(lambda: w.statusBar().currentMessage() == text, timeout=2000)


def test_elide_words_cuts_only_between_words():
    from app.widgets.status_bar import elide_words

    fits = lambda t: len(t) <= 20  # noqa: E731
    assert elide_words("short", fits) == "short"
    assert elide_words("the quick brown fox jumps over", fits) == "the quick brown fox…"
    assert elide_words("Supercalifragilisticexpialidocious", fits) == "Supercalifragilisti…"


def test_history_click_marks_the_same_file_in_the_queue(qtbot, client, tmp_path):
    w = open_main_window(qtbot, client, tmp_path)
    first, second = w.add_paths([silent_wav(tmp_path, "a.wav"), silent_wav(tmp_path, "b.wav")])
    qtbot.waitUntil(lambda: w.queue.model.item(second).state == "done", timeout=5000)
    w.queue_panel.table.selectRow(0)
    assert w.queue_panel.table.selected_job_ids() == [first]
    w.history_panel.transcript_selected.emit(second)
    assert w.transcript_view.model.file_id == second
    assert w.queue_panel.table.selected_job_ids() == [second]
