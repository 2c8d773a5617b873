#!/usr/bin/env bash
# Start the desktop app. The first run creates .venv and installs the app into it (see
# scripts/bootstrap.sh); later runs start at once. Arguments go to the app (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
py="$(bash scripts/bootstrap.sh app)"
exec "$py" -m app "$@"
