#!/usr/bin/env bash
# Install the project and its dependencies into the current Python once; later calls return at once.
# Usage: bash scripts/bootstrap.sh [app|test]
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-app}"
PY="${PYTHON:-python3}"

if [ "$what" = test ] && ! command -v espeak-ng >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends \
            espeak-ng sox libsox-fmt-all libsndfile1 libportaudio2 pulseaudio pulseaudio-utils \
            libasound2-plugins xvfb imagemagick desktop-file-utils libegl1 libgl1 libxkbcommon0 \
            libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 \
            libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libdbus-1-3 libfontconfig1 >/dev/null
    else
        echo "The tests need: espeak-ng sox libportaudio2 pulseaudio pulseaudio-utils libasound2-plugins xvfb" >&2
        echo "Install them with your package manager (as root on Debian/Ubuntu: apt-get install ...)." >&2
        exit 1
    fi
fi

probe="import importlib.metadata as m; m.version('qwen3-asr-desktop'); import torch, soxr, av, silero_vad, PySide6"
[ "$what" = test ] && probe="$probe, pytest, pytestqt, hypothesis, srt, webvtt"
if ! "$PY" -c "$probe" >/dev/null 2>&1; then
    "$PY" -m pip install --quiet --upgrade pip
    if ! "$PY" -c "import torch" >/dev/null 2>&1 && ! command -v nvidia-smi >/dev/null 2>&1; then
        # No NVIDIA GPU: prefer the CPU build of torch, far smaller than the CUDA one.
        "$PY" -m pip install --quiet "torch==2.13.0" || true
    fi
    if [ "$what" = test ]; then
        "$PY" -m pip install --quiet -e ".[test]"
    else
        "$PY" -m pip install --quiet -e .
    fi
fi
