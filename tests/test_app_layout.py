"""The main window at its default size: what a user reads in the queue and the status bar.

Fast: the engine is tests/fake_engine.py; the window helpers come from test_app_first_use.
"""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from app_fixtures import client, data_dir  # noqa: E402,F401  (fixtures, found by name)
from test_app_first_use import _wav, _window  # noqa: E402

WAIT_MS = 10_000


def test_a_28_character_file_name_is_shown_whole_at_the_default_size(qtbot, client, tmp_path):
    """The File column read "weekly…26.wav" beside an empty Context column and a 150 px Progress."""
    from app.queue.queue_model import COL_NAME

    w = _window(qtbot, client, tmp_path, model=False)   # no model: the row stays put
    assert (w.width(), w.height()) == (1180, 720)
    name = "weekly-team-meeting-2026.wav"
    w.add_paths([_wav(tmp_path, name)])
    qtbot.wait(50)
    table = w.queue_panel.table
    # The cell draws its text inside a few pixels of margin a side.
    assert table.columnWidth(COL_NAME) >= table.fontMetrics().horizontalAdvance(name) + 12


@pytest.mark.parametrize("point_size", [9, 11, 13])
def test_status_and_language_words_are_shown_whole_at_any_font_size(qtbot, point_size):
    """Fixed pixel widths cut words at larger fonts: under Xvfb every running row read "Tran…bing"."""
    from PySide6.QtGui import QFont

    from app.queue.queue_model import COL_LANGUAGE, COL_STATUS, STATUS_TEXT, QueueItem, QueueModel
    from app.queue.queue_view import QueueTable

    from PySide6.QtWidgets import QApplication

    model = QueueModel()
    model.add(QueueItem(1, "talk.wav"))
    saved = QApplication.font()
    font = QFont(saved)
    font.setPointSize(point_size)
    QApplication.setFont(font)          # as a user's desktop font setting would
    try:
        table = QueueTable(model)
    finally:
        QApplication.setFont(saved)
    qtbot.addWidget(table)
    metrics = table.fontMetrics()
    room = 2 * 8 + 2 * 3      # resources/style.qss pads queue cells 8 px a side; Qt adds ~3 px margins
    for status in STATUS_TEXT.values():
        assert table.columnWidth(COL_STATUS) >= metrics.horizontalAdvance(status) + room, status
    for language in ("English (auto)", "Portuguese (auto)"):
        assert table.columnWidth(COL_LANGUAGE) >= metrics.horizontalAdvance(language) + room, language


def test_the_context_column_shows_once_a_file_has_a_context_set_from_the_row_menu(
        qtbot, client, tmp_path):
    from app.queue.queue_model import COL_CONTEXT

    w = _window(qtbot, client, tmp_path, model=False)
    ids = w.add_paths([_wav(tmp_path, "talk.wav")])
    table = w.queue_panel.table
    assert table.isColumnHidden(COL_CONTEXT), "an empty Context column takes the names' room"
    w.queue.cancel(ids)                       # only files that have not started take a context
    qtbot.waitUntil(lambda: w.queue.model.item(ids[0]).state == "cancelled", timeout=WAIT_MS)
    table.selectRow(0)
    actions = {a.text(): a for a in w.queue_context_actions()}
    w.queue_panel.ask_context = lambda current: ("Ada Lovelace, Babbage", True)
    actions["Context…"].trigger()
    assert w.queue.model.item(ids[0]).context == "Ada Lovelace, Babbage"
    assert w.history.get_file(ids[0]).context == "Ada Lovelace, Babbage"
    assert not table.isColumnHidden(COL_CONTEXT)
    assert table.model().index(0, COL_CONTEXT).data() == "Ada Lovelace, Babbage"


def test_a_long_model_folder_name_is_shortened_with_an_ellipsis_and_never_widens_the_window(
        qtbot, client, tmp_path):
    """A plain label cut "Model: …" off at the right edge with no "…", and asked for its whole width."""
    w = _window(qtbot, client, tmp_path)
    name = ("my-finetuned-qwen3-asr-checkpoint-" * 4)[:120]
    assert len(name) == 120
    w._model_loaded(str(tmp_path / name), "cpu, float32")
    assert w.minimumSizeHint().width() < 900
    assert w.model_label.toolTip() == f"Model: {name} on cpu, float32"
    w.resize(800, 600)
    qtbot.wait(50)
    assert w.width() == 800
    shown = w.model_label.elided_text()
    assert shown.startswith("Model: my-finetuned") and shown.endswith("…"), shown
    assert w.activity_label.geometry().right() < w.model_label.geometry().left()
    assert w.model_label.geometry().right() <= w.statusBar().width()


def test_a_cut_short_label_gets_its_full_text_as_a_tooltip(qtbot):
    from app.widgets.elided_label import ElidedLabel

    label = ElidedLabel("Model: tiny on cpu, float32")     # under 40 characters
    qtbot.addWidget(label)
    label.show()
    label.resize(400, 20)
    assert label.elided_text() == label.full_text() and label.toolTip() == ""
    label.resize(60, 20)
    assert label.elided_text() != label.full_text()
    assert label.toolTip() == "Model: tiny on cpu, float32"
