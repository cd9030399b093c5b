"""Check downloaded wheels of the vLLM layer and the bundle (bundle.sh with KEEP_STAGE=1 keeps them): pip, with no
index, resolves vllm==0.24.0 and verl[vllm]==0.9.1 over the real wheels, one version of each package as a node
imports it (the layer's, else the bundle's, else a stub of the image's from image_packages.txt, with the requirements
vllm_lock.json records of it on what the layer or the bundle replace). Run with Python 3.12 on Linux x86_64:

    python3.12 scripts/offline/check_vllm_layer.py LAYER_WHEELS BUNDLE_WHEELS [UNKNOWN_VERSION (0)]

UNKNOWN_VERSION: the version given to an image package that image_packages.txt gives none of.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename

HERE = Path(__file__).resolve().parent


def main() -> None:
    layer_dir, bundle_dir = Path(sys.argv[1]), Path(sys.argv[2])
    unknown = sys.argv[3] if len(sys.argv) > 3 else "0"
    lock = json.loads((HERE / "vllm_lock.json").read_text())
    layer = {canonicalize_name(parse_wheel_filename(w.name)[0]): w for w in layer_dir.glob("*.whl")}
    bundle = {canonicalize_name(parse_wheel_filename(w.name)[0]): w for w in bundle_dir.glob("*.whl")}
    image_meta = {canonicalize_name(m["name"]): m for m in lock["image"]}
    with tempfile.TemporaryDirectory() as tmp:
        links = Path(tmp) / "links"
        links.mkdir()
        for wheel in {**bundle, **layer}.values():
            os.symlink(wheel.resolve(), links / wheel.name)
        stubs = 0
        for line in (HERE / "image_packages.txt").read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            name, _, version = line.partition("==")
            key = canonicalize_name(name) if name else ""
            if not name or key in layer or key in bundle:
                continue
            version, stem = version or unknown, re.sub(r"[-_.]+", "_", name).lower()
            requires = [
                f"Requires-Dist: {r}"
                for r in image_meta.get(key, {}).get("requires_dist", [])
                if canonicalize_name(Requirement(r).name) in layer.keys() | bundle.keys()
            ]
            info = f"{stem}-{version}.dist-info"
            with zipfile.ZipFile(links / f"{stem}-{version}-py3-none-any.whl", "w") as wheel:
                wheel.writestr(
                    f"{info}/METADATA",
                    "\n".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}", *requires]) + "\n",
                )
                wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
                wheel.writestr(f"{info}/RECORD", "")
            stubs += 1
        print(f"{len(layer)} layer wheels, {len(bundle.keys() - layer.keys())} bundle wheels, {stubs} image stubs")
        platforms = [f"--platform=manylinux_2_{glibc}_x86_64" for glibc in range(39, 16, -1)]
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--isolated", "--no-index", "--dry-run", "--find-links",
                   str(links), "--target", str(Path(tmp) / "target"), "--only-binary=:all:", "--python-version", "3.12",
                   "--implementation", "cp", *platforms, "--platform=manylinux2014_x86_64", "--report", str(report),
                   *lock["roots"]]  # fmt: skip
        done = subprocess.run(
            command, env={**os.environ, "PIP_CONFIG_FILE": os.devnull}, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.exit(done.stderr)
        chosen = {canonicalize_name(i["metadata"]["name"]) for i in json.loads(report.read_text())["install"]}
    origin = {"layer": len(chosen & layer.keys()), "bundle": len(chosen & (bundle.keys() - layer.keys()))}
    origin["image"] = len(chosen) - sum(origin.values())
    print(f"resolved: {len(chosen)} packages, from {origin}; layer wheels left unused: {sorted(layer.keys() - chosen)}")


if __name__ == "__main__":
    main()
