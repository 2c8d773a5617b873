#!/usr/bin/env bash
# Make the project's virtual environment ready, then print the path of its Python on stdout.
# Usage: bash scripts/bootstrap.sh [app|test]
#
# The first call creates .venv (or $QWEN3_ASR_VENV) with $PYTHON (default python3) and installs the
# project into it, so it works on a PEP 668 ("externally managed") system Python as a normal user.
# Later calls compare a stamp (a hash of pyproject.toml) and return in milliseconds, without
# importing anything. System libraries are checked one by one on every call: as root the missing
# ones are installed with apt-get, otherwise the exact package list is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-app}"
case "$what" in app|test) ;; *) echo "usage: bash scripts/bootstrap.sh [app|test]" >&2; exit 2 ;; esac
BASE_PY="${PYTHON:-python3}"
VENV="${QWEN3_ASR_VENV:-.venv}"
VPY="$VENV/bin/python"

say() { echo "$*" >&2; }

# --- system libraries: "Debian package|how to find it" (so:NAME = a shared library, cmd:NAME = a
# program on PATH, file:GLOB = a file). The app needs PortAudio (microphone, playback),
# libsndfile, Qt's xcb/EGL libraries and parec/pactl (pulseaudio-utils: the "system audio" live
# input records what the computer plays with them, on PulseAudio and PipeWire alike); the tests
# also speak with espeak-ng/sox, run a PulseAudio null sink and a virtual X screen.
# The Qt list is every library `ldd` shows for PySide6's xcb platform plugin
# (PySide6/Qt/plugins/platforms/libqxcb.so, with libQt6XcbQpa and libQt6Gui): when one is missing,
# Qt aborts with "Could not load the Qt platform plugin xcb" and names only xcb-cursor0, whatever
# is missing. Left out, as apt installs them with the packages listed (or every system has them):
# QT_PULLED_IN below. tests/test_install_scripts.py checks the list against ldd.
APP_NEEDS=(
    "libportaudio2|so:libportaudio.so.2" "libsndfile1|so:libsndfile.so.1"
    "pulseaudio-utils|cmd:parec"
    "libegl1|so:libEGL.so.1" "libgl1|so:libGL.so.1" "libfontconfig1|so:libfontconfig.so.1"
    "libdbus-1-3|so:libdbus-1.so.3" "libxkbcommon0|so:libxkbcommon.so.0"
    "libxkbcommon-x11-0|so:libxkbcommon-x11.so.0" "libxcb-cursor0|so:libxcb-cursor.so.0"
    "libxcb-icccm4|so:libxcb-icccm.so.4" "libxcb-image0|so:libxcb-image.so.0"
    "libxcb-keysyms1|so:libxcb-keysyms.so.1" "libxcb-randr0|so:libxcb-randr.so.0"
    "libxcb-render-util0|so:libxcb-render-util.so.0" "libxcb-shape0|so:libxcb-shape.so.0"
    "libxcb-xinerama0|so:libxcb-xinerama.so.0" "libxcb-xkb1|so:libxcb-xkb.so.1"
    "libxcb1|so:libxcb.so.1" "libx11-6|so:libX11.so.6" "libx11-xcb1|so:libX11-xcb.so.1"
    "libxcb-util1|so:libxcb-util.so.1" "libxcb-shm0|so:libxcb-shm.so.0" "libxcb-sync1|so:libxcb-sync.so.1"
    "libxcb-xfixes0|so:libxcb-xfixes.so.0" "libxcb-render0|so:libxcb-render.so.0"
    "libxcb-glx0|so:libxcb-glx.so.0" "libglx0|so:libGLX.so.0" "libglvnd0|so:libGLdispatch.so.0"
    "libglib2.0-0|so:libglib-2.0.so.0|so:libgthread-2.0.so.0" "libfreetype6|so:libfreetype.so.6"
)
# Libraries of the xcb plugin that need no entry of their own (the C and C++ runtimes, and what
# libxcb1, libglib2.0-0, libfreetype6, libfontconfig1 and libdbus-1-3 depend on).
QT_PULLED_IN="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1 libstdc++.so.6 libz.so.1
libXau.so.6 libXdmcp.so.6 libbsd.so.0 libmd.so.0 libpcre2-8.so.0 libpng16.so.16 libbrotlidec.so.1
libbrotlicommon.so.1 libexpat.so.1 libsystemd.so.0 libcap.so.2 libgcrypt.so.20 libgpg-error.so.0
liblzma.so.5 liblz4.so.1 libzstd.so.1 libffi.so.8 libmount.so.1 libselinux.so.1 libblkid.so.1"
TEST_NEEDS=(
    "espeak-ng|cmd:espeak-ng" "sox|cmd:sox" "libsox-fmt-all|file:/usr/lib/*/sox/libsox_fmt_mp3.so"
    "pulseaudio|cmd:pulseaudio"
    "libasound2-plugins|file:/usr/lib/*/alsa-lib/libasound_module_pcm_pulse.so"
    "xvfb|cmd:Xvfb" "imagemagick|cmd:import" "desktop-file-utils|cmd:desktop-file-validate"
)

ldcache=""
if command -v ldconfig >/dev/null 2>&1; then ldcache="$(ldconfig -p 2>/dev/null || true)"
elif [ -x /sbin/ldconfig ]; then ldcache="$(/sbin/ldconfig -p 2>/dev/null || true)"; fi

has() {  # has "so:NAME" / "cmd:NAME" / "file:GLOB"
    local kind="${1%%:*}" name="${1#*:}" f
    case "$kind" in
        cmd) command -v "$name" >/dev/null 2>&1 ;;
        so)
            if [ -n "$ldcache" ]; then [[ "$ldcache" == *"$name "* ]]
            else for f in /usr/lib/*/"$name" /usr/lib64/"$name" /usr/lib/"$name" /lib/*/"$name"; do
                     [ -e "$f" ] && return 0; done; return 1; fi ;;
        file) for f in $name; do [ -e "$f" ] && return 0; done; return 1 ;;
    esac
}

missing=()
check() {  # check ENTRY...: collect the Debian packages whose every probe fails
    local entry pkg rest probe found
    for entry in "$@"; do
        pkg="${entry%%|*}"; rest="${entry#*|}|"; found=no
        while [ -n "$rest" ]; do  # split on "|" in the shell: no subprocess, no temp file
            probe="${rest%%|*}"; rest="${rest#*|}"
            has "$probe" && { found=yes; break; }
        done
        [ "$found" = no ] && missing+=("$pkg")
    done
    return 0
}
check "${APP_NEEDS[@]}"
[ "$what" = test ] && check "${TEST_NEEDS[@]}"

if ! [ -x "$VPY" ] && ! "$BASE_PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
    ver="$("$BASE_PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null || echo 3)"
    missing+=("python$ver-venv")
fi

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "Installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    elif [ "${QWEN3_ASR_SKIP_SYSTEM_CHECK:-0}" = 1 ]; then
        say "Missing system packages (ignored): ${missing[*]}"
    else
        say "Missing system packages (Debian/Ubuntu names): ${missing[*]}"
        say "Install them, then run this again:"
        say "    sudo apt-get install ${missing[*]}"
        say "(Other distributions name them differently; QWEN3_ASR_SKIP_SYSTEM_CHECK=1 skips this check.)"
        exit 1
    fi
fi

# --- the virtual environment: rebuilt only when pyproject.toml changes or a run was interrupted.
stamp_of() { echo "$what $(sha256sum pyproject.toml | cut -d' ' -f1)"; }
want="$(stamp_of)"
stamp="$VENV/.bootstrap-$what"
if [ -x "$VPY" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "$VPY"
    exit 0
fi

if [ ! -x "$VPY" ]; then
    say "Creating the virtual environment $VENV with $("$BASE_PY" --version 2>&1) (first run only) ..."
    "$BASE_PY" -m venv "$VENV" >&2
fi
say "Installing the project into $VENV (first run, or pyproject.toml changed) ..."
"$VPY" -m pip install --quiet --upgrade pip >&2
# Without an NVIDIA GPU, PyTorch's CPU build comes from PyTorch's own CPU index: about 190 MB to
# download (750 MB installed). Plain PyPI has only the CUDA build on x86-64 Linux: about 3 GB of
# downloads, 2.7 GB of them NVIDIA libraries no CPU uses. Where that index cannot be reached the
# attempt fails within seconds (short timeout, no retries) and PyPI's build is taken instead.
TORCH_VERSION="2.13.0"
CPU_INDEX="${QWEN3_ASR_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
if ! "$VPY" -c "import torch" >/dev/null 2>&1 && ! command -v nvidia-smi >/dev/null 2>&1; then
    # Asked first in a few seconds, so that an unreachable index gives one line, not pip's page of
    # resolver errors; pip itself then also runs with a short timeout and no retries.
    if "$VPY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip('/') + '/torch/', timeout=10)" \
            "$CPU_INDEX" >/dev/null 2>&1; then
        say "No NVIDIA GPU found: installing PyTorch $TORCH_VERSION's CPU build from $CPU_INDEX"
        say "(about 190 MB to download) ..."
        cpu_ok=yes
        "$VPY" -m pip install --timeout 15 --retries 0 --index-url "$CPU_INDEX" "torch==$TORCH_VERSION" >&2 || cpu_ok=no
    else
        say "No NVIDIA GPU found, but PyTorch's CPU index ($CPU_INDEX) cannot be reached from here."
        cpu_ok=no
    fi
    if [ "$cpu_ok" = no ]; then
        say "Taking torch $TORCH_VERSION from PyPI instead (on x86-64 Linux that is the build with CUDA"
        say "libraries: about 3 GB to download) ..."
        "$VPY" -m pip install "torch==$TORCH_VERSION" >&2 || true
    fi
fi
if "$VPY" -c "import torch" >/dev/null 2>&1; then
    say "Installing Qt (PySide6), transformers and the rest (about 180 MB to download) ..."
else
    say "Installing PyTorch, Qt (PySide6), transformers and the rest (about 3 GB to download with"
    say "PyTorch's CUDA build, 370 MB on machines where pip offers its CPU build) ..."
fi
if [ "$what" = test ]; then
    "$VPY" -m pip install -e ".[test]" >&2
else
    "$VPY" -m pip install -e . >&2
fi
echo "$want" >"$stamp"
say "Ready: $VENV"
echo "$VPY"
