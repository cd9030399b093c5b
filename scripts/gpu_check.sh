#!/usr/bin/env bash
# The GPU path's verdict on a machine with two NVIDIA GPUs, vLLM, cupy and Chromium, in a few minutes: what the
# machine lacks (doctor), then 3 steps of the gpu_check recipe read back (python -m verl_asyncweb.gpu_check).
# Exit code: 0 passed, 1 failed, 2 not run. Arguments go to gpu_check (--out DIR, --timeout-s S, key=value).
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m verl_asyncweb.doctor --platform auto --no-ray
exec python3 -m verl_asyncweb.gpu_check "$@"
