#!/usr/bin/env bash
# Build an offline bundle for a GPU machine that cannot reach a package registry (an air-gapped node, or a lent
# check machine): the Python packages its CUDA PyTorch image lacks (scripts/offline/wheels.txt, installed for that
# machine's Python) and a relocatable Chromium (this machine's Debian build with the libraries it loads, less
# glibc's, and its fonts), as one tar.xz split into parts of at most SPLIT_MB MiB. scripts/offline/install.sh
# unpacks it there.
#
# --with-vllm adds the vLLM layer: vllm 0.24.0 and what it and verl[vllm] 0.9.1 need beyond the image
# (scripts/offline/image_packages.txt, an assumption) and the bundle (scripts/offline/vllm_wheels.txt, locked by
# scripts/offline/vllm_lock.py), installed for that Python as a second tar.xz in parts vllm.tar.xz.part-NN.
# --vllm-only builds that layer alone into OUT_DIR (beside a bundle built earlier, or to carry later). Either way
# OUT_DIR/SHA256SUMS lists every part in OUT_DIR.
#
# Usage: bash scripts/offline/bundle.sh [--with-vllm | --vllm-only] OUT_DIR [PYTHON_VERSION (3.12)] [SPLIT_MB (48)]
set -euo pipefail
base=yes vllm=no
case "${1:-}" in
  --with-vllm) vllm=yes; shift ;;
  --vllm-only) vllm=yes base=no; shift ;;
esac
out=${1:?usage: bundle.sh [--with-vllm | --vllm-only] OUT_DIR [PYTHON_VERSION] [SPLIT_MB]}
python_version=${2:-3.12}
split_mb=${3:-48}
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stage="$(mktemp -d)"
# KEEP_STAGE=1 keeps the downloaded wheels and the unpacked trees (for a check of the wheel set).
if [ -n "${KEEP_STAGE:-}" ]; then echo "stage: $stage"; else trap 'rm -rf "$stage"' EXIT; fi
# manylinux_2_39 down to 2_17: the target's glibc is 2.39 (Ubuntu 24.04); pip matches each tag exactly.
platforms=()
for glibc in $(seq 39 -1 17); do platforms+=(--platform "manylinux_2_${glibc}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
target=(--python-version "$python_version" --implementation cp "${platforms[@]}")

# download_wheels LIST DIR: every pin of LIST (wheels.txt's format) as a wheel for the target into DIR.
download_wheels() {
  grep -v '^#' "$1" | while read -r requirement marker; do
    [ -n "$requirement" ] || continue
    if [[ "$marker" == "# sdist"* ]]; then
      # Pure Python without a wheel on PyPI (antlr4-python3-runtime 4.9.3, pylatexenc): built into one here.
      python3 -m pip wheel -q --no-deps -w "$2" "$requirement"
    else
      python3 -m pip download -q --no-deps --only-binary=:all: "${target[@]}" -d "$2" "$requirement"
    fi
  done
}

# pack NAME DIR...: the folders DIR under the stage as OUT/NAME.tar.xz.part-NN.
pack() {
  local name=$1
  shift
  echo "packing $name (xz) ..."
  rm -f "$out/$name".tar.xz.part-*
  tar -C "$stage" -cf - "$@" | xz -T0 -6 | split -b "${split_mb}m" -d -a 2 - "$out/$name.tar.xz.part-"
  du -sh "${@/#/$stage/}" | sed 's/^/unpacked: /'
  ls -l "$out/$name".tar.xz.part-* | awk '{printf "part %s: %.1f MiB\n", $NF, $5 / 1048576}'
}

if [ "$base" = yes ]; then  # the bundle (not indented, to keep its history readable)
echo "wheels for Python $python_version ..."
mkdir -p "$stage/wheels"
download_wheels "$here/wheels.txt" "$stage/wheels"
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: "${target[@]}" --target "$stage/site" \
  "$stage"/wheels/*.whl
# Ray's Java worker jars (34 MB) and the dashboard's source maps serve nothing a Python job starts.
rm -rf "$stage/site/ray/jars"
find "$stage/site" -name '*.js.map' -delete

echo "chromium ..."
chromium_src=/usr/lib/chromium
[ -x "$chromium_src/chromium" ] || { echo "no $chromium_src/chromium: apt-get install chromium" >&2; exit 2; }
mkdir -p "$stage/chromium/bin" "$stage/chromium/lib/deps" "$stage/chromium/fonts"
cp -a "$chromium_src" "$stage/chromium/lib/chromium"
# Vulkan validation and mock drivers: for Chromium's developers, never loaded by a headless run.
rm -f "$stage/chromium/lib/chromium/"libVkLayer_khronos_validation.so* \
  "$stage/chromium/lib/chromium/"libVkICD_mock_icd.so*
# NSS loads its crypto modules by name at run time; ldd cannot see them.
cp -aL /usr/lib/x86_64-linux-gnu/nss "$stage/chromium/lib/deps/" 2>/dev/null || true
for lib in libsoftokn3.so libfreebl3.so libfreeblpriv3.so libnssckbi.so; do
  [ -e "/usr/lib/x86_64-linux-gnu/$lib" ] && cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$stage/chromium/lib/deps/"
done
# fc-list: what `doctor` lists the fonts with (FONTCONFIG_FILE points it at the bundled ones).
cp /usr/bin/fc-list "$stage/chromium/lib/fc-list"
# Every library the binaries link, less glibc's and the compiler runtime's (the target's own are used: its glibc must
# be at least Debian 12's 2.36, and its libstdc++ at least GCC 12's).
target_libs='/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s)\.so|/ld-linux'
find "$stage/chromium/lib/chromium" "$stage/chromium/lib/fc-list" -maxdepth 1 -type f \
  \( -name chromium -o -name '*.so' -o -name chrome_crashpad_handler -o -name fc-list \) \
  -exec ldd {} \; 2>/dev/null | awk '/=> \//{print $3}' | sort -u | grep -v -E "$target_libs" | while read -r lib; do
  cp -L "$lib" "$stage/chromium/lib/deps/"
done
# The fonts a CPU machine's set-up installs (fonts-liberation, fonts-dejavu-core, fonts-wqy-zenhei) and this
# machine's fontconfig rules for them.
cp -L /usr/share/fonts/truetype/liberation/*.ttf /usr/share/fonts/truetype/dejavu/*.ttf \
  /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc "$stage/chromium/fonts/"
cp -rL /etc/fonts/conf.d "$stage/chromium/conf.d"
cat > "$stage/chromium/fonts.conf" <<'CONF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir prefix="relative">fonts</dir>
  <include ignore_missing="yes" prefix="relative">conf.d</include>
  <cachedir prefix="xdg">fontconfig</cachedir>
  <alias><family>sans-serif</family><prefer><family>DejaVu Sans</family></prefer></alias>
  <alias><family>serif</family><prefer><family>DejaVu Serif</family></prefer></alias>
  <alias><family>monospace</family><prefer><family>DejaVu Sans Mono</family></prefer></alias>
  <alias><family>Arial</family><prefer><family>Liberation Sans</family></prefer></alias>
  <alias><family>Helvetica</family><prefer><family>Liberation Sans</family></prefer></alias>
  <alias><family>Times New Roman</family><prefer><family>Liberation Serif</family></prefer></alias>
</fontconfig>
CONF
# bin/NAME runs the bundled binary at PATH (under chromium/) with the bundled libraries and fonts.
write_wrapper() {
  local name=$1 path=$2
  {
    echo '#!/bin/sh'
    echo 'root="$(dirname "$(dirname "$(readlink -f "$0")")")"'
    echo 'export LD_LIBRARY_PATH="$root/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'
    echo 'export FONTCONFIG_FILE="$root/fonts.conf"'
    echo "exec \"\$root/$path\" \"\$@\""
  } > "$stage/chromium/bin/$name"
  chmod +x "$stage/chromium/bin/$name"
}
write_wrapper chromium lib/chromium/chromium
write_wrapper fc-list lib/fc-list

missing=$(LD_LIBRARY_PATH="$stage/chromium/lib/deps" ldd "$stage/chromium/lib/chromium/chromium" \
  "$stage/chromium/lib/fc-list" | awk '/=>/{print $3}' | grep -v "^$stage/chromium/lib/deps/" \
  | grep -v -E "$target_libs" || true)
[ -z "$missing" ] || { echo "libraries left out of the bundle: $missing" >&2; exit 1; }

pack bundle site chromium
fi

if [ "$vllm" = yes ]; then
  echo "vLLM layer: wheels for Python $python_version ..."
  mkdir -p "$stage/vllm-wheels"
  download_wheels "$here/vllm_wheels.txt" "$stage/vllm-wheels"
  du -sh "$stage/vllm-wheels" | sed 's/^/wheels: /'
  # --ignore-requires-python: pip 23 checks it against its own Python even with --python-version (av: >=3.12);
  # the download above chose for the target, and tests/unit/test_offline_vllm_layer.py checks the lock.
  python3 -m pip install -q --no-deps --no-compile --ignore-requires-python --only-binary=:all: "${target[@]}" \
    --target "$stage/vllm" "$stage"/vllm-wheels/*.whl
  pack vllm vllm
fi
(cd "$out" && sha256sum -- *.tar.xz.part-* > SHA256SUMS)
