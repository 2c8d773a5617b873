#!/usr/bin/env bash
# Build Qwen3 ASR Desktop with PyInstaller and install it for the desktop.
#
# Usage (from anywhere):
#   packaging/build_linux.sh                 # venv + build + install to ~/.local
#   PREFIX=/opt/qwen3 packaging/build_linux.sh
#   USE_VENV=0 packaging/build_linux.sh      # use the current python (torch already there)
#   packaging/build_linux.sh --no-build      # (re)install an existing dist/ build
#   packaging/build_linux.sh --no-install    # only build dist/qwen3-asr-desktop/
#   packaging/build_linux.sh --uninstall     # remove what the install step put in PREFIX
#
# Environment:
#   PREFIX    install prefix (default ~/.local)
#   PYTHON    interpreter used to create the venv / to build (default python3)
#   USE_VENV  1 (default): build in <repo>/build/venv; 0: use $PYTHON as it is
#   LINK      1: symlink the bundle into PREFIX instead of copying it
#   SELF_TEST_MODEL  a model folder: after building, also run the bundle's
#             --self-test on it (loads torch + the engine, transcribes a clip)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME=qwen3-asr-desktop
APP_ID=io.github.qwen3asr.Desktop
PREFIX="${PREFIX:-$HOME/.local}"
PYTHON="${PYTHON:-python3}"
USE_VENV="${USE_VENV:-1}"
LINK="${LINK:-0}"
DIST="$ROOT/dist/$NAME"
ICON_SIZES="16 32 48 64 128 256 512"

do_build=1
do_install=1
do_uninstall=0
for arg in "$@"; do
    case "$arg" in
        --no-build) do_build=0 ;;
        --no-install) do_install=0 ;;
        --uninstall) do_uninstall=1 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown option: $arg (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '\n==> %s\n' "$*"; }

# Files the install step owns, one place so --uninstall removes exactly these.
installed_paths() {
    echo "$PREFIX/lib/$NAME"
    echo "$PREFIX/bin/$NAME"
    echo "$PREFIX/share/applications/$APP_ID.desktop"
    echo "$PREFIX/share/metainfo/$APP_ID.metainfo.xml"
    echo "$PREFIX/share/icons/hicolor/scalable/apps/$APP_ID.svg"
    for size in $ICON_SIZES; do
        echo "$PREFIX/share/icons/hicolor/${size}x${size}/apps/$APP_ID.png"
    done
}

refresh_caches() {
    # Desktop environments pick up new entries without these, only slower;
    # the tools are optional, so failures are not errors.
    if command -v update-desktop-database >/dev/null 2>&1; then
        update-desktop-database "$PREFIX/share/applications" >/dev/null 2>&1 || true
    fi
    if command -v gtk-update-icon-cache >/dev/null 2>&1; then
        gtk-update-icon-cache -q -f -t "$PREFIX/share/icons/hicolor" >/dev/null 2>&1 || true
    fi
}

if [ "$do_uninstall" = 1 ]; then
    log "Removing $NAME from $PREFIX"
    installed_paths | while read -r path; do
        rm -rf -- "$path"
    done
    refresh_caches
    exit 0
fi

# --- (a) Python environment ------------------------------------------------
if [ "$do_build" = 1 ]; then
    if [ "$USE_VENV" = 1 ]; then
        VENV="$ROOT/build/venv"
        if [ ! -x "$VENV/bin/python" ]; then
            log "Creating virtual environment $VENV"
            "$PYTHON" -m venv "$VENV"
        fi
        PY="$VENV/bin/python"
    else
        PY="$(command -v "$PYTHON")"
    fi
    log "Installing PyInstaller and the project into $("$PY" -c 'import sys; print(sys.prefix)')"
    "$PY" -m pip install --upgrade pip
    "$PY" -m pip install "pyinstaller>=6.10" "pyinstaller-hooks-contrib>=2024.8"
    # Editable install: the spec analyses the source tree through pathex, and
    # pip resolves every runtime dependency from pyproject.toml.
    "$PY" -m pip install -e "$ROOT"

    # --- (b) PyInstaller one-folder build -----------------------------------
    log "Running PyInstaller (this takes several minutes)"
    (cd "$ROOT" && "$PY" -m PyInstaller --noconfirm --clean \
        --distpath "$ROOT/dist" --workpath "$ROOT/build/pyinstaller" \
        packaging/$NAME.spec)

    log "Smoke test: $NAME --version"
    QT_QPA_PLATFORM=offscreen "$DIST/$NAME" --version
    # --version imports neither torch nor the engine; --self-test does.
    if [ -n "${SELF_TEST_MODEL:-}" ]; then
        log "Self-test: $NAME --self-test --model $SELF_TEST_MODEL"
        QT_QPA_PLATFORM=offscreen "$DIST/$NAME" --self-test --model "$SELF_TEST_MODEL"
    fi
fi

[ "$do_install" = 1 ] || { log "Built $DIST (not installed)"; exit 0; }

if [ ! -x "$DIST/$NAME" ]; then
    echo "no build at $DIST; run without --no-build first" >&2
    exit 1
fi

# --- (c) Install into PREFIX -----------------------------------------------
log "Installing into $PREFIX"
mkdir -p "$PREFIX/lib" "$PREFIX/bin" "$PREFIX/share/applications" "$PREFIX/share/metainfo"
rm -rf -- "$PREFIX/lib/$NAME"
if [ "$LINK" = 1 ]; then
    ln -s "$DIST" "$PREFIX/lib/$NAME"
else
    cp -a "$DIST" "$PREFIX/lib/$NAME"
fi

# A wrapper script rather than a symlink: the PyInstaller bootloader finds
# _internal/ next to the real executable, whatever PATH or cwd say.
cat > "$PREFIX/bin/$NAME" <<EOF
#!/bin/sh
exec "$PREFIX/lib/$NAME/$NAME" "\$@"
EOF
chmod 755 "$PREFIX/bin/$NAME"

# Point Exec/TryExec at the absolute launcher: ~/.local/bin is not on the
# PATH that every desktop session hands to its launcher.
exec_path="$PREFIX/bin/$NAME"
case "$exec_path" in *" "*) exec_path="\"$exec_path\"" ;; esac
sed -e "s|^Exec=$NAME|Exec=$exec_path|" -e "s|^TryExec=$NAME|TryExec=$PREFIX/bin/$NAME|" \
    "$ROOT/resources/$APP_ID.desktop" > "$PREFIX/share/applications/$APP_ID.desktop"
chmod 644 "$PREFIX/share/applications/$APP_ID.desktop"

install -m 644 "$ROOT/resources/$APP_ID.metainfo.xml" "$PREFIX/share/metainfo/"
install -D -m 644 "$ROOT/resources/$APP_ID.svg" \
    "$PREFIX/share/icons/hicolor/scalable/apps/$APP_ID.svg"
for size in $ICON_SIZES; do
    install -D -m 644 "$ROOT/resources/icons/icon-$size.png" \
        "$PREFIX/share/icons/hicolor/${size}x${size}/apps/$APP_ID.png"
done

refresh_caches
log "Installed. Start it from the applications menu or run $PREFIX/bin/$NAME"
