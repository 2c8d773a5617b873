"""Application resources: icons, style sheets and desktop-integration files.

Everything the app ships besides code is loaded through this module, so the
lookup rule lives in one place and works the same from a source checkout, an
installed wheel and a PyInstaller bundle::

    from resources import app_icon, style_sheet
    app.setWindowIcon(app_icon())
    app.setStyleSheet(style_sheet(dark=is_dark))

Qt is imported only inside :func:`app_icon`, so the CLI, the engine and the
packaging scripts can import this module without pulling in PySide6.
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

__all__ = [
    "APP_ID", "APP_NAME", "ICON_SIZES", "resource_path", "app_icon", "style_sheet",
    "desktop_file", "metainfo_file", "icon_png", "icon_svg",
]

#: Reverse-DNS id shared by the .desktop file, the metainfo and the icon name.
#: The app should also call QGuiApplication.setDesktopFileName(APP_ID) so that
#: Wayland compositors match its windows to the installed .desktop entry.
APP_ID = "io.github.qwen3asr.Desktop"
APP_NAME = "Qwen3 ASR Desktop"
#: Pixel sizes of the committed PNG icons (resources/icons/icon-<size>.png).
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)


def _base_dir() -> Path:
    """Folder holding the resource files.

    PyInstaller unpacks data to ``sys._MEIPASS`` (one-folder builds: the
    ``_internal`` folder) and the spec copies ours to ``<_MEIPASS>/resources``.
    We prefer that over ``__file__`` because frozen modules may live in the
    PYZ archive, where ``__file__`` is synthetic.
    """
    meipass = getattr(sys, "_MEIPASS", None)
    if getattr(sys, "frozen", False) and meipass:
        bundled = Path(meipass) / "resources"
        if bundled.is_dir():
            return bundled
    return Path(__file__).resolve().parent


def resource_path(name: str) -> Path:
    """Absolute path of resource ``name`` (e.g. ``"style.qss"``, ``"icons/icon-16.png"``).

    Raises FileNotFoundError when it does not exist, so a packaging mistake
    fails loudly at the call site instead of as a blank icon later.
    """
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"resource name must be relative and inside resources/: {name!r}")
    path = _base_dir() / rel
    if not path.exists():
        raise FileNotFoundError(f"resource {name!r} not found in {_base_dir()}")
    return path


def icon_png(size: int) -> Path:
    """The square PNG icon of ``size`` pixels; ``size`` must be in ICON_SIZES."""
    if size not in ICON_SIZES:
        raise ValueError(f"no {size}px icon; available sizes: {ICON_SIZES}")
    return resource_path(f"icons/icon-{size}.png")


def icon_svg() -> Path:
    """The scalable source icon."""
    return resource_path(f"{APP_ID}.svg")


def app_icon():
    """A QIcon holding every PNG size, for windows, the tray and the taskbar.

    Needs a QGuiApplication to exist.  Returns ``PySide6.QtGui.QIcon``; the
    annotation is omitted so that this module never imports Qt at load time.
    Pre-rendered PNGs are used rather than the SVG because they do not depend
    on the QtSvg image-format plugin being bundled and look crisper at 16 px.
    """
    from PySide6.QtGui import QIcon  # lazy: keep Qt out of non-GUI imports

    icon = QIcon()
    for size in ICON_SIZES:
        icon.addFile(str(icon_png(size)))
    return icon


@lru_cache(maxsize=None)
def _read_text(name: str) -> str:
    return resource_path(name).read_text(encoding="utf-8")


def style_sheet(dark: bool = False) -> str:
    """The application Qt style sheet; ``dark`` appends the dark-scheme overrides.

    The base sheet uses palette() roles, so it also suits a dark palette;
    the overrides only lighten hard-coded accents (progress chunks, captions).
    """
    text = _read_text("style.qss")
    if dark:
        text += "\n" + _read_text("style-dark.qss")
    return text


def desktop_file() -> Path:
    """The freedesktop .desktop entry (installed to share/applications)."""
    return resource_path(f"{APP_ID}.desktop")


def metainfo_file() -> Path:
    """The AppStream metainfo (installed to share/metainfo)."""
    return resource_path(f"{APP_ID}.metainfo.xml")
