#!/usr/bin/env bash
# Wheels the offline GPU machine lacks, saved in .whl/ (git-ignored) for gpu_check.sh to install.
# Its image has torch, triton, tokenizers, safetensors, numpy and pytest, but a transformers
# older than the 5.24 that has Qwen3-ASR; transformers is pure Python, so one wheel serves.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: -d .whl "transformers==5.24.0"
ls -l .whl
