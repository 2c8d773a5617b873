"""The main window's keyboard map, its View menu (text size) and its Tab order.

Space plays or pauses and Left/Right seek 5 s wherever the focus is, except where the key
has its own meaning there: typing in a field, a focused button (Space presses it), a list
or a combo box. Left/Right also stay with the queue's table, where they move between its
columns (to reach a Language or Speakers cell and change it with F2, as in any table): the
queue lists files, not the one playing. In the transcript's table, the player's own view,
they seek, as in a media player (Up/Down move between lines there). F3/Shift+F3 step through
search matches; Ctrl+E exports in the ticked formats. Tab moves between the panels instead of
cycling through the queue's cells.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTableView,
    QTextEdit,
    QWidget,
)

from app.settings.view_prefs import PLAYBACK_RATE, TRANSCRIPT_FONT_PT, clamp_font

SEEK_STEP_S = 5.0
KEYBOARD_MAP = (
    ("Space", "Play or pause"),
    ("Left / Right", "Back or on 5 seconds (in the queue's table: previous or next column)"),
    ("Ctrl+F", "Search the transcript"),
    ("F3 / Enter", "Next match"),
    ("Shift+F3", "Previous match"),
    ("Ctrl+E", "Export the selected files in the chosen formats"),
    ("Ctrl+Shift+E", "Export… (choose formats, Save As)"),
    ("Delete", "Remove the selected files from the queue (in History: delete the selected entries)"),
    ("Ctrl+Z / Ctrl+Shift+Z", "Undo / redo an edit of the transcript"),
    ("Ctrl++ / Ctrl+-", "Larger or smaller transcript text (Ctrl+0: normal)"),
    ("Ctrl+O", "Add files"),
    ("Tab / Shift+Tab", "Next or previous part of the window"),
    ("Double-click or F2", "Correct a line (Enter saves, Escape cancels)"),
    ("Ctrl+L", "Live captions"),
    ("Ctrl+Q", "Quit"),
)


def shortcuts_text() -> str:
    """The Help ▸ Keyboard shortcuts text: one key and what it does per line."""
    return "\n".join(f"{keys}\t{what}" for keys, what in KEYBOARD_MAP)


def shortcuts_html() -> str:
    """The same as a two-column table (tabs did not line up in a message box)."""
    from html import escape

    rows = "".join(f"<tr><td style='padding-right:18px'><b>{escape(keys)}</b></td>"
                   f"<td>{escape(what)}</td></tr>" for keys, what in KEYBOARD_MAP)
    return f"<table cellspacing='2'>{rows}</table>"


def _typing_here(widget) -> bool:
    """Whether a plain key belongs to the focused widget (text, a button, a choice)."""
    return isinstance(widget, (QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSpinBox, QComboBox,
                               QAbstractButton))


def _arrows_here(widget, player_table) -> bool:
    """Whether Left/Right belong to the focused widget: a text cursor, a choice, or a table's
    columns (every table but the transcript's, where they seek). A button has no use for them."""
    if isinstance(widget, (QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSpinBox, QComboBox)):
        return True
    return isinstance(widget, QTableView) and widget is not player_table


class ArrowsStay(QObject):
    """Claims plain Left/Right for a table before the window's seek shortcut sees them (Qt asks
    the focused widget first with a ShortcutOverride event; a table does not claim arrows)."""

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.ShortcutOverride and event.key() in (Qt.Key.Key_Left, Qt.Key.Key_Right) \
                and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            event.accept()
        return False


def _window_action(window, text: str, keys, slot) -> QAction:
    action = QAction(text, window)
    action.setShortcuts([QKeySequence(k) for k in keys])
    action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
    action.triggered.connect(slot)
    window.addAction(action)
    return action


def install(window) -> None:
    """Add the keyboard map, the View menu and the Tab order to a MainWindow."""
    view = window.transcript_view

    def unless_typing(fn):
        def run():
            focus = QApplication.focusWidget()
            if isinstance(focus, QAbstractButton) and focus is not view.play_button:
                focus.animateClick()   # Space on a focused button still presses it
                return
            if not _typing_here(focus) or focus is view.play_button:
                fn()
        return run

    window.play_key = _window_action(window, "Play or pause", ["Space"], unless_typing(view.toggle_play))
    def unless_arrows_here(fn):
        def run():
            if not _arrows_here(QApplication.focusWidget(), view.table):
                fn()
        return run

    window.back_key = _window_action(window, "Back 5 s", ["Left"],
                                     unless_arrows_here(lambda: view.seek_by(-SEEK_STEP_S)))
    window.on_key = _window_action(window, "On 5 s", ["Right"],
                                   unless_arrows_here(lambda: view.seek_by(SEEK_STEP_S)))
    window.arrows_stay = ArrowsStay(window)   # the queue's table moves between its columns
    window.queue_panel.table.installEventFilter(window.arrows_stay)
    window.next_match_key = _window_action(window, "Next match", ["F3"], view.next_match)
    window.previous_match_key = _window_action(window, "Previous match", ["Shift+F3"],
                                               view.previous_match)
    _build_view_menu(window)
    _tab_order(window)
    _accessible_names(window)


def _accessible_names(window) -> None:
    """Names a screen reader says for controls whose text does not say it already."""
    for widget, name in ((window.tabs, "Queue and history"),
                         (window.queue_panel.table, "Queue of files"),
                         (window.history_panel.filter, "Filter past transcripts"),
                         (window.history_panel.list, "Past transcripts"),
                         (window.notice.close_button, "Dismiss the notice")):
        widget.setAccessibleName(name)


def _build_view_menu(window) -> None:
    view, settings = window.transcript_view, window.settings
    saved = settings.get(TRANSCRIPT_FONT_PT)
    if saved:
        view.set_font_points(saved)
    normal = QApplication.font().pointSize()
    view.set_rate(settings.get(PLAYBACK_RATE))
    view.rate_changed.connect(lambda rate: settings.set(PLAYBACK_RATE, rate))

    def change(points):
        view.set_font_points(points)
        settings.set(TRANSCRIPT_FONT_PT, view.font_points())

    menu = window.menuBar().addMenu("&View")
    window.larger_text_action = menu.addAction("Larger transcript text")
    window.larger_text_action.setShortcuts([QKeySequence("Ctrl++"), QKeySequence("Ctrl+=")])
    window.larger_text_action.triggered.connect(lambda: change(clamp_font(view.font_points() + 1)))
    window.smaller_text_action = menu.addAction("Smaller transcript text")
    window.smaller_text_action.setShortcut(QKeySequence("Ctrl+-"))
    window.smaller_text_action.triggered.connect(lambda: change(clamp_font(view.font_points() - 1)))
    window.normal_text_action = menu.addAction("Normal transcript text")
    window.normal_text_action.setShortcut(QKeySequence("Ctrl+0"))
    window.normal_text_action.triggered.connect(lambda: change(normal))
    # Help comes last in a menu bar: move View before it.
    bar = window.menuBar()
    help_action = next((a for a in bar.actions() if a.text() == "&Help"), None)
    if help_action is not None:
        bar.removeAction(menu.menuAction())
        bar.insertMenu(help_action, menu)


def _tab_order(window) -> None:
    """Queue (table, then its buttons), then the transcript (search, playback, segments)."""
    panel, view = window.queue_panel, window.transcript_view
    panel.table.setTabKeyNavigation(False)   # Tab leaves the table; arrows move within it
    chain: list[QWidget] = [
        window.tabs.tabBar(), panel.table, panel.cancel_button, panel.retry_button,
        panel.remove_button, panel.up_button, panel.down_button,
        view.search, view.search_bar.previous_button, view.search_bar.next_button,
        view.play_button, view.seek, view.speed, view.table,
    ]
    for first, second in zip(chain, chain[1:]):
        QWidget.setTabOrder(first, second)
