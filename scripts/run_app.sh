#!/usr/bin/env bash
# Start the desktop app (installs it into the current Python on first run). Arguments go to the app.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh app
exec "${PYTHON:-python3}" -m app "$@"
