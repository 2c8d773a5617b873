"""The transcript search's match count ("12 matches in 2 segments") stays whole however
narrow the transcript pane is: beside the field while it fits, on its own line when not."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtWidgets import QWidget  # noqa: E402

from engine.text.types import Segment, Transcript  # noqa: E402


@pytest.fixture
def pane(qtbot):
    """A transcript view searched for "the"; ``pane(width)`` narrows it to ``width`` pixels.

    The view is placed by hand, not by a layout: a main window at its smallest squeezes
    the pane below its minimum size just the same, which is where the count was cut.
    """
    from app.transcript.transcript_view import TranscriptView

    window = QWidget()
    window.resize(1000, 500)
    view = TranscriptView(parent=window)
    qtbot.addWidget(window)
    text = " ".join(["the cat saw the dog"] * 5)
    view.show_transcript(1, Transcript(text=text + " Then the end.", language="English",
                                       duration=9.0, segments=[Segment(0.0, 5.0, text),
                                                               Segment(5.0, 9.0, "Then the end.")]),
                         "x.wav", "x.wav")
    view.search.setText("the")
    assert view.match_label.text() == "1 of 12"
    window.show()
    qtbot.waitExposed(window)

    def give(width):
        view.setGeometry(0, 0, width, 480)
        qtbot.wait(20)   # layouts settle through posted events
        return view

    give.window = window   # qtbot holds widgets weakly: this keeps the window alive
    return give


def fits(label) -> bool:
    """Every character of the label is inside it: on one line, or on wrapped lines all shown."""
    room = label.contentsRect()
    one_line = label.fontMetrics().horizontalAdvance(label.text()) <= room.width()
    return one_line or label.heightForWidth(label.width()) <= label.height()


def test_count_sits_beside_the_field_while_there_is_room(pane):
    view = pane(600)
    label, field = view.match_label, view.search
    assert view.search_bar.count_beside_field()
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width()
    assert abs(label.geometry().center().y() - field.geometry().center().y()) <= 2
    assert field.width() > label.width()


@pytest.mark.parametrize("width", [320, 280, 240, 200, 170])
def test_the_count_is_whole_at_any_narrow_width(pane, width):
    view = pane(width)
    label, field = view.match_label, view.search
    assert view.width() == width
    assert label.isVisible()
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width(), \
        f"{label.text()!r} cut at a {view.width()} px pane"
    if view.search_bar.count_beside_field():
        assert abs(label.geometry().center().y() - field.geometry().center().y()) <= 2
    else:
        assert label.geometry().top() >= field.geometry().bottom()


def test_without_room_beside_the_field_the_count_moves_under_it(pane):
    view = pane(600)
    metrics = view.match_label.fontMetrics()
    # Less than a 12-em field plus the count: side by side, the field would be a sliver.
    width = metrics.horizontalAdvance("M") * 12 + metrics.horizontalAdvance(
        view.match_label.text()) - 10
    view = pane(width)
    assert view.width() == width
    assert not view.search_bar.count_beside_field()
    assert view.match_label.geometry().top() >= view.search.geometry().bottom()
    label = view.match_label
    assert metrics.horizontalAdvance(label.text()) <= label.contentsRect().width()


def test_the_count_never_widens_the_pane(pane):
    view = pane(600)
    without = max(view.search_bar.minimumSizeHint().width(), view.search_bar.minimumSize().width())
    view.search_bar.set_count_text("123456 matches in 7890 segments, and then some more words")
    assert view.search_bar.minimumSize().width() <= without
    view = pane(160)
    assert fits(view.match_label)


def test_searching_in_an_already_narrow_pane_shows_the_whole_count(pane, qtbot):
    # How users met the bug: the pane was narrowed first, then the count's text arrived.
    view = pane(600)
    view.search.setText("")
    view = pane(170)
    view.search.setText("the")
    qtbot.wait(20)
    label = view.match_label
    assert label.text() == "1 of 12"
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.contentsRect().width()


def test_count_goes_back_beside_the_field_when_the_pane_widens(pane):
    view = pane(220)
    assert not view.search_bar.count_beside_field()
    view = pane(700)
    assert view.search_bar.count_beside_field()
    view.search.setText("")
    assert not view.match_label.isVisible()
