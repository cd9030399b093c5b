#!/usr/bin/env bash
# Unpack a bundle of scripts/offline/bundle.sh into PREFIX and install this checkout of verl_asyncweb beside it;
# writes PREFIX/env.sh, which puts both and the bundled Chromium first on PYTHONPATH and PATH.
# Needs no network: only python3 with pip and setuptools (a PyTorch image has them).
#
# Usage: bash scripts/offline/install.sh BUNDLE_DIR PREFIX
set -euo pipefail
bundle=${1:?usage: install.sh BUNDLE_DIR PREFIX}
prefix=${2:?usage: install.sh BUNDLE_DIR PREFIX}
repo="$(cd "$(dirname "$0")/../.." && pwd)"
(cd "$bundle" && sha256sum --quiet -c SHA256SUMS)
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
cat "$bundle"/bundle.tar.xz.part-* | xz -dc -T0 | tar -C "$prefix" -xf -
python3 -m pip install -q --no-deps --no-index --no-build-isolation --target "$prefix/site" --upgrade "$repo"
cat > "$prefix/env.sh" <<ENV
export PYTHONPATH="$prefix/site\${PYTHONPATH:+:\$PYTHONPATH}"
export PATH="$prefix/chromium/bin:$prefix/site/bin:\$PATH"
ENV
echo "installed into $prefix: source $prefix/env.sh"
