"""Light and dark appearance: follow the system scheme unless the user picked one."""
from __future__ import annotations

import logging

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleFactory

log = logging.getLogger(__name__)


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def is_dark(theme: str) -> bool:
    if theme == "dark":
        return True
    if theme == "light":
        return False
    return system_is_dark()


def dark_palette() -> QPalette:
    p = QPalette()
    window, base, text = QColor("#1f2227"), QColor("#16181c"), QColor("#e6e6e6")
    # Every group, Disabled included: a group left unset keeps light defaults, and
    # disabled buttons then glow white on the dark window.
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive,
                  QPalette.ColorGroup.Disabled):
        p.setColor(group, QPalette.ColorRole.Window, window)
        p.setColor(group, QPalette.ColorRole.WindowText, text)
        p.setColor(group, QPalette.ColorRole.Base, base)
        p.setColor(group, QPalette.ColorRole.AlternateBase, QColor("#23262b"))
        p.setColor(group, QPalette.ColorRole.Text, text)
        p.setColor(group, QPalette.ColorRole.Button, QColor("#2a2d33"))
        p.setColor(group, QPalette.ColorRole.ButtonText, text)
        p.setColor(group, QPalette.ColorRole.Highlight, QColor("#4f46e5"))
        p.setColor(group, QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
        p.setColor(group, QPalette.ColorRole.ToolTipBase, QColor("#2a2d33"))
        p.setColor(group, QPalette.ColorRole.ToolTipText, text)
        p.setColor(group, QPalette.ColorRole.PlaceholderText, QColor("#8a8f98"))
        p.setColor(group, QPalette.ColorRole.Link, QColor("#8ab4f8"))
        p.setColor(group, QPalette.ColorRole.Mid, QColor("#4a4f57"))  # borders that show on base
        p.setColor(group, QPalette.ColorRole.Midlight, QColor("#30343a"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6b7078"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, QColor("#6b7078"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6b7078"))
    return p


# Text colours for finished states, per scheme: each keeps >= 4.5:1 contrast on the
# table's base and alternate-base rows of its scheme.
_STATE_COLORS = {False: {"done": "#15803D", "failed": "#B91C1C", "cancelled": "#6B7280"},
                 True: {"done": "#4ADE80", "failed": "#F87171", "cancelled": "#9CA3AF"}}


def current_is_dark() -> bool:
    """Whether the running app uses the dark scheme (as apply_theme last set it)."""
    app = QApplication.instance()
    return bool(app is not None and app.property("darkTheme"))


def state_color(state: str) -> QColor | None:
    """Colour for a queue state's text in the current scheme; None: the default text colour."""
    code = _STATE_COLORS[current_is_dark()].get(state)
    return QColor(code) if code else None


class AppStyle(QProxyStyle):
    """Fusion, plus a visible box around check boxes on dark palettes.

    Fusion outlines a check box with the window colour darkened, which on a dark
    window is the colour of the box itself: unchecked boxes were invisible.
    """

    def __init__(self):
        super().__init__(QStyleFactory.create("Fusion"))

    def drawPrimitive(self, element, option, painter, widget=None):
        super().drawPrimitive(element, option, painter, widget)
        if element != QStyle.PrimitiveElement.PE_IndicatorCheckBox \
                or option.palette.color(QPalette.ColorRole.Window).lightness() >= 128:
            return
        enabled = bool(option.state & QStyle.StateFlag.State_Enabled)
        color = option.palette.color(QPalette.ColorRole.PlaceholderText) if enabled else \
            option.palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(color, 1))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5), 2, 2)
        painter.restore()


def apply_theme(app: QApplication, theme: str) -> bool:
    """Apply palette and style sheet for ``theme`` ("system", "light", "dark"); returns dark."""
    dark = is_dark(theme)
    # Fusion draws the same everywhere and honours our palette, so both schemes look right.
    app.setStyle(AppStyle())
    app.setPalette(dark_palette() if dark else app.style().standardPalette())
    try:
        from resources import style_sheet

        app.setStyleSheet(style_sheet(dark=dark))
    except Exception as exc:  # resources are optional: the app works unstyled
        log.info("no style sheet: %s", exc)
    app.setProperty("darkTheme", dark)
    return dark


def follow_system_scheme(app: QApplication, get_theme) -> None:
    """Re-apply the theme when the desktop switches between light and dark."""

    def changed(_scheme):
        if get_theme() == "system":
            apply_theme(app, "system")

    QGuiApplication.styleHints().colorSchemeChanged.connect(changed)
