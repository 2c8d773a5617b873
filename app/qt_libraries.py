"""Before the first window: are the system libraries of Qt's xcb platform plugin all there?

When one is missing, Qt aborts with "Could not load the Qt platform plugin xcb" and suggests
xcb-cursor0 whatever is actually missing. ``ldd`` on the plugin names the real ones; this turns
them into the Debian packages to install (the same list as scripts/bootstrap.sh)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

# shared library -> Debian/Ubuntu package (scripts/bootstrap.sh's APP_NEEDS, Qt part)
PACKAGES = {
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3", "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0", "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4", "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0", "libxcb-xkb.so.1": "libxcb-xkb1", "libxcb.so.1": "libxcb1",
    "libX11.so.6": "libx11-6", "libX11-xcb.so.1": "libx11-xcb1", "libxcb-util.so.1": "libxcb-util1",
    "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-glx.so.0": "libxcb-glx0", "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0", "libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0",
    "libfreetype.so.6": "libfreetype6",
}


def xcb_plugin() -> Path | None:
    try:
        import PySide6
    except ImportError:
        return None
    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_libraries(ldd_output: str) -> list[str]:
    """The libraries ``ldd`` reports as "not found", in its order."""
    return [m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", ldd_output, re.MULTILINE)]


def missing_libraries_message() -> str | None:
    """A message naming the missing libraries and the apt-get command, or None when all are there
    (or when it cannot be checked: no ldd, no plugin; then Qt speaks for itself)."""
    plugin = xcb_plugin()
    if plugin is None or shutil.which("ldd") is None:
        return None
    try:
        done = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    missing = missing_libraries(done.stdout)
    if not missing:
        return None
    packages = list(dict.fromkeys(PACKAGES.get(name, name) for name in missing))
    return ("The window cannot open: Qt's X11 (xcb) support needs system libraries that are missing: "
            f"{', '.join(missing)}.\nOn Debian or Ubuntu install them with:\n"
            f"    sudo apt-get install {' '.join(packages)}\n"
            "(bash scripts/run_app.sh checks and names all of them.)")
