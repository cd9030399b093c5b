#!/usr/bin/env bash
# Unpack a bundle of scripts/offline/bundle.sh into PREFIX (replacing an earlier one) and install this checkout of
# verl_asyncweb beside it; writes PREFIX/env.sh, which puts both first on PYTHONPATH and the bundled Chromium and
# fc-list first on PATH. Needs no network (nor xz, which only makes it faster): python3 with pip and setuptools
# (a PyTorch image has them).
#
# A vLLM layer in BUNDLE_DIR (vllm.tar.xz.part-NN, of bundle.sh --with-vllm or --vllm-only) goes to PREFIX/vllm,
# ahead of PREFIX/site on PYTHONPATH: its versions (transformers 5.9.0 and fastapi 0.136 as verl[vllm] and vLLM pin
# them, ...) replace the bundle's and the image's. Without one, an earlier layer is removed.
#
# Usage: bash scripts/offline/install.sh BUNDLE_DIR PREFIX
set -euo pipefail
bundle=${1:?usage: install.sh BUNDLE_DIR PREFIX}
prefix=${2:?usage: install.sh BUNDLE_DIR PREFIX}
repo="$(cd "$(dirname "$0")/../.." && pwd)"
(cd "$bundle" && sha256sum --quiet -c SHA256SUMS)
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
rm -rf "$prefix/site" "$prefix/chromium" "$prefix/vllm"
# unpack NAME: BUNDLE_DIR/NAME.tar.xz.part-* into PREFIX.
unpack() {
  if command -v xz > /dev/null; then
    cat "$bundle/$1".tar.xz.part-* | xz -dc -T0 | tar -C "$prefix" -xf -
  else
    cat "$bundle/$1".tar.xz.part-* | python3 -c '
import sys, tarfile
tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall(sys.argv[1], filter="fully_trusted")
' "$prefix"
  fi
}
unpack bundle
path="$prefix/site"
if compgen -G "$bundle/vllm.tar.xz.part-*" > /dev/null; then
  unpack vllm
  path="$prefix/vllm:$path"
fi
# From a clean copy: a checkout's build/ or egg-info would be packed instead of its sources.
source_copy="$(mktemp -d)"
trap 'rm -rf "$source_copy"' EXIT
tar -C "$repo" --exclude=.git --exclude=build --exclude='*.egg-info' --exclude=runs --exclude=.offline \
  --exclude=__pycache__ -cf - . | tar -C "$source_copy" -xf -
python3 -m pip install -q --no-deps --no-index --no-build-isolation --target "$prefix/site" "$source_copy"
cat > "$prefix/env.sh" <<ENV
export PYTHONPATH="$path\${PYTHONPATH:+:\$PYTHONPATH}"
export PATH="$prefix/chromium/bin:\$PATH"
ENV
echo "installed into $prefix: source $prefix/env.sh"
