#!/usr/bin/env bash
# The test command of the README and of CI: set up, lint, then the whole suite (unit, env with a real Chromium,
# Ray, and end-to-end runs of verl's trainer on CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m ruff check verl_asyncweb tests
python3 -m ruff format --check verl_asyncweb tests
exec python3 -m pytest tests -p no:cacheprovider --timeout=1500 --durations=30 "$@"
