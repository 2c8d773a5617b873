#!/usr/bin/env bash
# Run the test suite in the project's .venv (created with the test tools on first run).
# Extra arguments go to pytest: bash scripts/test.sh tests/test_cli.py -x -k transcribe
# Benchmarks in tests/bench are not collected.
set -euo pipefail
cd "$(dirname "$0")/.."
py="$(bash scripts/bootstrap.sh test)"
export QT_QPA_PLATFORM=offscreen
exec "$py" -m pytest -q -p no:cacheprovider "$@"
