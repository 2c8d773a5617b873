"""Issue 35, playback and keyboard: the keyboard map in Help, Tab order, accessible names,
text size, playback speed, the playing word in the selected row, one-line times, playback
found again when a sound server starts late, and search's previous match with "3 of 12"."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QObject, Qt, Signal  # noqa: E402
from PySide6.QtGui import QAccessible  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401
from engine.text.types import Segment, Transcript, Word  # noqa: E402


class FakePlayer(QObject):
    """Sound output for machines without one: records what would play."""

    position_changed = Signal(float)
    playing_changed = Signal(bool)
    failed = Signal(str)
    backend, unavailable_reason = "fake", ""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.calls, self.playing, self.rate, self.available, self._at = [], False, 1.0, True, 0.0

    def play(self, path, start_s=0.0):
        self.calls.append((path, round(start_s, 2)))
        self._at = start_s
        self.playing = True
        self.playing_changed.emit(True)
        return True

    def stop(self):
        if self.playing:
            self.playing = False
            self.playing_changed.emit(False)

    def position(self):
        return self._at

    def set_rate(self, rate):
        self.rate = rate

    def recheck(self):
        return self.available


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


@pytest.fixture
def window(qtbot, client, tmp_path, monkeypatch):
    monkeypatch.setattr("app.transcript.transcript_view.Player", FakePlayer)
    w = open_main_window(qtbot, client, tmp_path)
    (job,) = w.add_paths([silent_wav(tmp_path, "talk.wav")])
    qtbot.waitUntil(lambda: w.queue.model.item(job).state == "done", timeout=5000)
    w.queue_panel.table.selectRow(0)
    qtbot.waitUntil(lambda: w.transcript_view.model.transcript is not None, timeout=2000)
    return w


def long_transcript() -> Transcript:
    text = " ".join(["the cat saw the dog"] * 5)
    return Transcript(text=text + " Then the end.", language="English", duration=60.0,
                      segments=[Segment(0.0, 30.0, text), Segment(30.0, 60.0, "Then the end.")])


def test_help_shows_the_keyboard_map(window, monkeypatch):
    shown = []
    monkeypatch.setattr("app.main_window.QMessageBox.information",
                        lambda parent, title, text: shown.append((title, text)))
    window.shortcuts_action.trigger()
    title, text = shown[0]
    assert title == "Keyboard shortcuts"
    for key in ("Space", "Left / Right", "Ctrl+F", "F3 / Enter", "Shift+F3", "Ctrl+E", "Delete"):
        assert f"<b>{key}</b>" in text, key


def test_every_focusable_control_has_an_accessible_name(window, qtbot):
    unnamed = []
    for tab in range(window.tabs.count()):
        window.tabs.setCurrentIndex(tab)
        qtbot.wait(10)
        for widget in window.findChildren(QWidget):
            if widget.focusPolicy() & Qt.FocusPolicy.TabFocus and widget.isVisibleTo(window):
                face = QAccessible.queryAccessibleInterface(widget)
                if not (face and face.text(QAccessible.Text.Name).strip()):
                    unnamed.append(f"{type(widget).__name__} {widget.objectName()}")
    assert not unnamed


def test_tab_leaves_the_queue_and_reaches_the_transcript_and_buttons(window, qtbot):
    table = window.queue_panel.table
    table.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is table, timeout=2000)
    seen = []
    for _ in range(16):
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        seen.append(QApplication.focusWidget())
    view = window.transcript_view
    assert seen[0] is not table, "Tab is not trapped in the queue's cells"
    for widget in (window.queue_panel.retry_button, view.search, view.play_button, view.speed,
                   view.table):
        assert widget in seen, widget.accessibleName() or widget.text()


def test_space_plays_and_pauses_left_right_seek(window, qtbot):
    view, player = window.transcript_view, window.transcript_view.player
    view.show_transcript(1, long_transcript(), "/x.wav", "x.wav")
    view.table.setFocus()
    qtbot.keyClick(view.table, Qt.Key.Key_Space)
    assert player.playing and player.calls[-1] == ("/x.wav", 0.0)
    qtbot.keyClick(view.table, Qt.Key.Key_Right)
    assert player.calls[-1] == ("/x.wav", 5.0), "on 5 s while playing"
    qtbot.keyClick(view.table, Qt.Key.Key_Space)
    assert not player.playing
    qtbot.keyClick(view.table, Qt.Key.Key_Left)
    qtbot.keyClick(view.table, Qt.Key.Key_Left)
    assert view.seek.value() == 0
    qtbot.keyClick(view.table, Qt.Key.Key_Right)
    qtbot.keyClick(view.table, Qt.Key.Key_Space)
    assert player.calls[-1] == ("/x.wav", 5.0), "play goes on where Left/Right left it"
    view.search.setFocus()
    qtbot.keyClick(view.search, Qt.Key.Key_Space)
    assert view.search.text() == " " and player.playing, "typing a space is not a shortcut"


def test_text_size_and_speed_are_kept(window, qtbot):
    from app.settings import Settings
    from app.settings.view_prefs import PLAYBACK_RATE, TRANSCRIPT_FONT_PT

    view = window.transcript_view
    before = view.font_points()
    window.larger_text_action.trigger()
    window.larger_text_action.trigger()
    assert view.font_points() == before + 2
    assert Settings().get(TRANSCRIPT_FONT_PT) == before + 2
    view.speed.setCurrentIndex(view.speed.findData(1.5))
    assert view.player.rate == 1.5 and Settings().get(PLAYBACK_RATE) == 1.5
    assert [view.speed.itemData(i) for i in (0, view.speed.count() - 1)] == [0.5, 2.0]


def test_time_column_reads_start_to_end_on_one_line():
    from app.transcript.transcript_model import TranscriptModel, format_span

    assert format_span(7.2, 11.9) == "0:07–0:11"
    assert format_span(3725, 3731) == "1:02:05–1:02:11"
    model = TranscriptModel()
    model.set_transcript(1, long_transcript())
    assert "\n" not in model.index(1, 0).data()


def test_playing_word_stands_out_in_the_selected_row(qtbot):
    from PySide6.QtGui import QPalette, QTextCursor
    from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView(player=FakePlayer())
    qtbot.addWidget(view)
    seg = Segment(0.0, 3.0, "alpha beta gamma", [Word("alpha", 0.0, 0.9), Word("beta", 1.0, 1.9),
                                                   Word("gamma", 2.0, 3.0)])
    view.show_transcript(1, Transcript("alpha beta gamma", "English", 3.0, [seg]), "/a.wav", "a")
    view.model.set_playhead(1.5)
    index = view.model.index(0, 1)
    option = QStyleOptionViewItem()
    option.font, option.palette = view.table.font(), view.table.palette()
    option.state = QStyle.StateFlag.State_Selected | QStyle.StateFlag.State_Enabled
    doc = view.table.text_delegate._document(option, index, 400)
    cursor = QTextCursor(doc)
    cursor.setPosition(len("alpha ") + 1)
    word = cursor.charFormat()
    row_colour = option.palette.color(QPalette.ColorRole.Highlight)
    assert word.background().color() != row_colour, "the word must not vanish into the row"
    assert word.fontUnderline()


def test_playback_is_found_when_the_sound_server_starts_later(qtbot, monkeypatch):
    import app.transcript.player as player_module
    from app.transcript.transcript_view import TranscriptView

    class Output:   # what sounddevice gives once a device is there
        def play(self, *a): pass
        def stop(self): pass

    monkeypatch.setattr(player_module, "_qt_multimedia", lambda: None)
    monkeypatch.setattr(player_module, "_sounddevice_output", lambda rescan=False: None)
    monkeypatch.setattr(player_module, "portaudio_installed", lambda: True)
    view = TranscriptView()
    qtbot.addWidget(view)
    view.show_transcript(1, long_transcript(), "/x.wav", "x.wav")
    assert not view.player.available
    reason = view.player.unavailable_reason
    assert "sound server" in reason and "libportaudio2" not in reason
    assert view.play_button.isEnabled(), "Play stays pressable: it looks again"
    monkeypatch.setattr(player_module, "_sounddevice_output", lambda rescan=False: Output())
    view._recheck_timer.setInterval(20)
    qtbot.waitUntil(lambda: view.player.available, timeout=2000)
    assert "Playback is off" not in view.message.text()


def test_search_steps_forward_and_back_with_a_count(window, qtbot):
    view = window.transcript_view
    view.show_transcript(1, long_transcript(), "/x.wav", "x.wav")
    view.search.setFocus()
    qtbot.keyClicks(view.search, "the")
    assert view.match_label.text() == "1 of 12"
    qtbot.keyClick(view.search, Qt.Key.Key_F3)
    qtbot.keyClick(view.search, Qt.Key.Key_F3)
    assert view.match_label.text() == "3 of 12"
    qtbot.keyClick(view.search, Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)
    assert view.match_label.text() == "2 of 12"
    view.search_bar.previous_button.click()
    view.search_bar.previous_button.click()
    assert view.match_label.text() == "12 of 12"
    assert view.table.selectionModel().selectedRows()[0].row() == 1, "the last match is in row 2"


def test_arrows_and_space_still_edit_text(window, qtbot):
    """The window's Space and Left/Right never take keys from a text field or a line's editor."""
    view = window.transcript_view
    view.show_transcript(1, long_transcript(), "/x.wav", "x.wav")
    view.search.setFocus()
    qtbot.keyClicks(view.search, "abc")
    qtbot.keyClick(view.search, Qt.Key.Key_Left)
    qtbot.keyClicks(view.search, "X")
    assert view.search.text() == "abXc" and view.seek.value() == 0
    index = view.model.index(0, 1)
    view.table.setCurrentIndex(index)
    view.table.edit(index)
    editor = view.table.findChild(QWidget, "segmentEditor")
    editor.setPlainText("one two")
    qtbot.keyClick(editor, Qt.Key.Key_End)
    qtbot.keyClick(editor, Qt.Key.Key_Left)
    qtbot.keyClick(editor, Qt.Key.Key_Space)
    assert editor.toPlainText() == "one tw o" and not view.player.playing


def test_left_right_move_between_queue_columns_and_seek_elsewhere(window, qtbot):
    """Left/Right: the queue's table keeps them (columns, e.g. the Language cell for F2); the
    transcript's table and a focused button seek with them, and a button is never pressed by them."""
    from app.widgets.keyboard import KEYBOARD_MAP

    view, table = window.transcript_view, window.queue_panel.table
    view.show_transcript(1, long_transcript(), "/x.wav", "x.wav")
    table.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is table, timeout=2000)
    table.setCurrentIndex(table.model().index(0, 0))
    qtbot.keyClick(table, Qt.Key.Key_Right)
    qtbot.keyClick(table, Qt.Key.Key_Right)
    assert table.currentIndex().column() == 2 and view.seek.value() == 0, "the queue moved, playback did not"
    qtbot.keyClick(table, Qt.Key.Key_Left)
    assert table.currentIndex().column() == 1 and view.seek.value() == 0
    view.table.setFocus()
    qtbot.keyClick(view.table, Qt.Key.Key_Right)
    assert view.seek.value() == 5000, "the transcript is the player's view: Right seeks there"
    qtbot.keyClick(view.table, Qt.Key.Key_Left)
    assert view.seek.value() == 0
    retry = window.queue_panel.retry_button
    retry.setEnabled(True)
    retry.setFocus()
    pressed = []
    retry.clicked.connect(lambda: pressed.append(True))
    qtbot.keyClick(retry, Qt.Key.Key_Right)
    qtbot.wait(200)     # animateClick would click after 100 ms
    assert not pressed, "an arrow never presses a button"
    assert "queue" in dict(KEYBOARD_MAP)["Left / Right"], "Help says where the arrows do not seek"
