#!/usr/bin/env bash
# Run the whole test suite (installs what it needs on first run). Benchmarks in tests/bench are not collected.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh test
export QT_QPA_PLATFORM=offscreen
exec "${PYTHON:-python3}" -m pytest tests -q -p no:cacheprovider "$@"
