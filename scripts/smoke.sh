#!/usr/bin/env bash
# The main job of the README: set up, then run the embedded default recipe (cpu_smoke) on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec python3 -m verl_asyncweb.main "$@"
