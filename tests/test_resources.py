"""Tests for resources/ (icons, style sheets, desktop metadata) and packaging/."""
from __future__ import annotations

import configparser
import fnmatch
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tomllib

import resources
from resources import (
    APP_ID,
    ICON_SIZES,
    app_icon,
    desktop_file,
    icon_png,
    icon_svg,
    metainfo_file,
    resource_path,
    style_sheet,
)

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
RESOURCE_FILES = [
    f"{APP_ID}.svg",
    f"{APP_ID}.desktop",
    f"{APP_ID}.metainfo.xml",
    "style.qss",
    "style-dark.qss",
    "icons/app.ico",
    *(f"icons/icon-{size}.png" for size in ICON_SIZES),
]


# --- lookup ----------------------------------------------------------------

@pytest.mark.parametrize("name", RESOURCE_FILES)
def test_resource_path_finds_every_file(name):
    path = resource_path(name)
    assert path.is_absolute() and path.is_file() and path.stat().st_size > 0


def test_accessors_point_at_the_resource_files():
    assert desktop_file() == resource_path(f"{APP_ID}.desktop")
    assert metainfo_file() == resource_path(f"{APP_ID}.metainfo.xml")
    assert icon_svg().suffix == ".svg"
    assert [icon_png(s).name for s in ICON_SIZES] == [f"icon-{s}.png" for s in ICON_SIZES]


def test_resource_path_rejects_missing_and_escaping_names():
    with pytest.raises(FileNotFoundError):
        resource_path("no-such-file.qss")
    with pytest.raises(ValueError):
        resource_path("../pyproject.toml")
    with pytest.raises(ValueError):
        icon_png(20)


def test_resource_path_uses_pyinstaller_bundle(tmp_path, monkeypatch):
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "style.qss").write_text("/* bundled */")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert resource_path("style.qss") == tmp_path / "resources" / "style.qss"


def test_import_does_not_load_qt():
    code = ("import sys, resources; resources.resource_path('style.qss'); "
            "sys.exit(any(m.startswith('PySide6') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_every_resource_is_wheel_package_data():
    """pyproject's package-data globs must cover each file, or wheels lack it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = config["tool"]["setuptools"]["package-data"]
    for name in RESOURCE_FILES:
        # icons/ is a package of its own (resources.icons), so setuptools ships it as data
        package, _, base = name.rpartition("/")
        patterns = package_data["resources." + package if package else "resources"]
        assert any(fnmatch.fnmatch(base, p) for p in patterns), name


# --- icons and style sheets --------------------------------------------------

def test_app_icon_has_every_size(qapp):
    icon = app_icon()
    assert not icon.isNull()
    sizes = {(s.width(), s.height()) for s in icon.availableSizes()}
    assert {(s, s) for s in ICON_SIZES} <= sizes
    assert not icon.pixmap(16, 16).isNull()


def test_pngs_are_square_and_match_the_svg(qapp, tmp_path):
    """Committed PNGs have the right size and still match the SVG source.

    A tolerant pixel comparison catches an edited SVG whose PNGs were not
    regenerated, without failing on antialiasing differences between Qt builds.
    """
    from PySide6.QtGui import QImage

    from resources import render_icons
    for size in ICON_SIZES:
        image = QImage(str(icon_png(size)))
        assert (image.width(), image.height()) == (size, size)
    [fresh] = render_icons.render_with_qt(icon_svg(), tmp_path, sizes=(64,))
    committed, rendered = QImage(str(icon_png(64))), QImage(str(fresh))
    diff = sum(abs(committed.pixelColor(x, y).red() - rendered.pixelColor(x, y).red())
               + abs(committed.pixelColor(x, y).alpha() - rendered.pixelColor(x, y).alpha())
               for x in range(64) for y in range(64))
    assert diff / (64 * 64 * 2) < 4, "run: python resources/render_icons.py"


@pytest.mark.parametrize("dark", [False, True])
def test_style_sheet_parses(qtbot, dark):
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import (
        QLabel,
        QProgressBar,
        QTableView,
        QTextEdit,
        QVBoxLayout,
        QWidget,
    )

    text = style_sheet(dark=dark)
    assert text.count("{") == text.count("}") > 0
    assert ("#818CF8" in text) is dark  # the dark overrides come only when asked
    window = QWidget()
    qtbot.addWidget(window)
    layout = QVBoxLayout(window)
    for cls, name in [(QTableView, "queueTable"), (QTextEdit, "transcriptView"),
                      (QLabel, "liveCaption"), (QLabel, "liveCaptionPartial"),
                      (QProgressBar, "")]:
        widget = cls()
        widget.setObjectName(name)
        layout.addWidget(widget)
    # Our own handler: Qt reports sheet syntax errors only as a warning
    # ("Could not parse stylesheet of object ..."), which pytest-qt's qtlog
    # does not reliably see.
    messages = []
    previous = qInstallMessageHandler(lambda _mode, _ctx, msg: messages.append(msg))
    try:
        window.setStyleSheet(text)
        window.show()
        window.grab()  # forces polish, where Qt parses the sheet
    finally:
        qInstallMessageHandler(previous)
    assert not [m for m in messages if "stylesheet" in m.lower()], messages


# --- desktop integration files ---------------------------------------------

def test_desktop_file_keys():
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # desktop keys are case-sensitive
    parser.read(desktop_file(), encoding="utf-8")
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Name"] == "Qwen3 ASR Desktop"
    assert entry["Exec"] == "qwen3-asr-desktop %F"
    assert entry["Icon"] == APP_ID
    assert entry["Terminal"] == "false"
    assert entry["Categories"] == "AudioVideo;Audio;"
    assert entry["Keywords"].endswith(";") and len(entry["Keywords"].split(";")) > 3
    mimes = entry["MimeType"].rstrip(";").split(";")
    assert "audio/mpeg" in mimes and "audio/flac" in mimes and "video/mp4" in mimes
    assert desktop_file().name == f"{APP_ID}.desktop"
    # The full spec check needs desktop-file-utils; the keys above are checked
    # regardless, so a machine without it still tests the essentials.
    tool = shutil.which("desktop-file-validate")
    if tool is not None:
        result = subprocess.run([tool, str(desktop_file())], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


def test_metainfo_fields():
    root = ET.parse(metainfo_file()).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("name") == "Qwen3 ASR Desktop"
    assert root.findtext("summary")
    launchable = root.find("launchable")
    assert launchable is not None and launchable.get("type") == "desktop-id"
    assert launchable.text == desktop_file().name
    assert root.find("description/p") is not None
    assert root.find("releases/release").get("version")
    tool = shutil.which("appstreamcli")  # apt: appstream; optional like above
    if tool is None:
        return
    result = subprocess.run([tool, "validate", "--no-net", str(metainfo_file())],
                            capture_output=True, text=True)
    # Judge by error lines, not the exit code: newer appstream versions fail
    # on warnings that older ones do not know about.
    errors = [line for line in result.stdout.splitlines() if line.startswith("E:")]
    assert not errors, result.stdout + result.stderr


# --- packaging ---------------------------------------------------------------

def test_spec_and_entry_compile():
    for name in ("qwen3-asr-desktop.spec", "entry.py"):
        path = PACKAGING / name
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    spec = (PACKAGING / "qwen3-asr-desktop.spec").read_text()
    assert "NSMicrophoneUsageDescription" in spec
    assert "app.main import main" in (PACKAGING / "entry.py").read_text()


def test_build_script_syntax():
    script = PACKAGING / "build_linux.sh"
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert script.stat().st_mode & 0o111, "build_linux.sh should be executable"


def test_public_api_is_exported():
    for name in resources.__all__:
        assert hasattr(resources, name), name
