"""Regenerate the raster icons in ``resources/icons/`` from the SVG source.

Usage (from the repository root)::

    python resources/render_icons.py            # PNGs + Windows .ico (+ .icns if possible)
    python resources/render_icons.py --png-only

The PNGs are committed, so this only needs re-running after the SVG changes.
They are rendered with QtSvg (part of PySide6-Essentials) because that is the
renderer the app itself uses for the scalable icon, so what we ship matches what
we see.  ImageMagick's ``convert`` is the fallback renderer and is also used to
pack the multi-resolution Windows ``.ico``; Pillow, when installed, writes the
macOS ``.icns`` (``iconutil`` is macOS-only, see packaging/README.md).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP_ID = "io.github.qwen3asr.Desktop"
SVG = HERE / f"{APP_ID}.svg"
ICON_DIR = HERE / "icons"
SIZES = (16, 32, 48, 64, 128, 256, 512)
# Windows shell asks for 16..256; larger entries only bloat the .ico.
ICO_SIZES = (16, 32, 48, 64, 128, 256)


def png_path(size: int, out_dir: Path = ICON_DIR) -> Path:
    """Where the ``size`` px PNG lives (same naming as resources.icon_png)."""
    return out_dir / f"icon-{size}.png"


def render_with_qt(svg: Path, out_dir: Path, sizes=SIZES) -> list[Path]:
    """Render ``svg`` to square PNGs with QSvgRenderer; returns the written paths.

    Qt is imported here, not at module level, so importing this module (e.g.
    from tests) stays cheap and works where only ImageMagick is available.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    # QPainter on a QImage needs a Gui application for font/colour-space setup;
    # reuse the caller's one (pytest-qt's qapp) if it already exists.
    _app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise RuntimeError(f"QtSvg cannot parse {svg}")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        renderer.render(painter)
        painter.end()
        path = png_path(size, out_dir)
        if not image.save(str(path), "PNG"):
            raise RuntimeError(f"could not write {path}")
        written.append(path)
    return written


def render_with_imagemagick(svg: Path, out_dir: Path, sizes=SIZES) -> list[Path]:
    """Fallback renderer: ImageMagick ``convert`` with a transparent background."""
    convert = shutil.which("magick") or shutil.which("convert")
    if convert is None:
        raise RuntimeError("neither QtSvg nor ImageMagick is available")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for size in sizes:
        path = png_path(size, out_dir)
        # A high density before reading keeps large sizes sharp instead of upscaled.
        subprocess.run([convert, "-background", "none", "-density", str(max(96, size)),
                        str(svg), "-resize", f"{size}x{size}", f"PNG32:{path}"], check=True)
        written.append(path)
    return written


def render_pngs(svg: Path = SVG, out_dir: Path = ICON_DIR, sizes=SIZES) -> list[Path]:
    """Render with QtSvg when importable, else with ImageMagick."""
    try:
        import PySide6.QtSvg  # noqa: F401
    except ImportError:
        return render_with_imagemagick(svg, out_dir, sizes)
    return render_with_qt(svg, out_dir, sizes)


def make_ico(out_dir: Path = ICON_DIR) -> Path | None:
    """Pack the PNGs into a multi-resolution Windows icon with ImageMagick."""
    convert = shutil.which("magick") or shutil.which("convert")
    if convert is None:
        print("ImageMagick not found: skipping app.ico", file=sys.stderr)
        return None
    ico = out_dir / "app.ico"
    subprocess.run([convert, *(str(png_path(s, out_dir)) for s in ICO_SIZES), str(ico)],
                   check=True)
    return ico


def make_icns(out_dir: Path = ICON_DIR) -> Path | None:
    """Write a macOS .icns with Pillow if it is installed (it is not a dependency)."""
    try:
        from PIL import Image
    except ImportError:
        print("Pillow not installed: skipping app.icns (see packaging/README.md)",
              file=sys.stderr)
        return None
    icns = out_dir / "app.icns"
    # Pillow builds every ICNS size it needs by downscaling the largest image.
    Image.open(png_path(512, out_dir)).save(icns, format="ICNS")
    return icns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--png-only", action="store_true", help="skip .ico/.icns")
    parser.add_argument("--out", type=Path, default=ICON_DIR, help="output folder")
    args = parser.parse_args(argv)
    for path in render_pngs(SVG, args.out):
        print(path.relative_to(args.out.parent) if args.out == ICON_DIR else path)
    if not args.png_only:
        for path in (make_ico(args.out), make_icns(args.out)):
            if path is not None:
                print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
