#!/usr/bin/env bash
# The test command of the README and of CI: set up, lint, then the whole suite (unit, env with a real Chromium,
# Ray, and end-to-end runs of verl's trainer on CPU), then tests/vllm_cpu in the vLLM environment (verl's vLLM
# rollout with vLLM's CPU build, on verl[vllm]==0.9.1's torch and transformers). Arguments go to the first pytest,
# and a run with arguments (a subset, e.g. tests/algo -q) leaves tests/vllm_cpu out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m ruff check verl_asyncweb tests scripts
python3 -m ruff format --check verl_asyncweb tests scripts
status=0
python3 -m pytest tests -p no:cacheprovider --timeout=1500 --durations=30 "$@" || status=$?
[ "$#" -eq 0 ] || exit "$status"
VLLM_PYTHON="$(python3 -c 'from verl_asyncweb.backends.vllm_cpu import VLLM_PYTHON; print(VLLM_PYTHON)')"
echo "tests/vllm_cpu in the vLLM environment ($VLLM_PYTHON)"
"$VLLM_PYTHON" -m pytest tests/vllm_cpu -p no:cacheprovider --timeout=1500 --durations=10 || status=$?
exit "$status"
