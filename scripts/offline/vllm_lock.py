"""Lock the offline bundle's vLLM layer: what vllm==0.24.0 and verl[vllm]==0.9.1 need beyond the CUDA PyTorch image
(image_packages.txt) and the bundle (wheels.txt).

Run with the target's Python (3.12 on Linux x86_64; pip evaluates markers against the interpreter it runs in) and
access to PyPI; downloads no wheel (pip reads each one's metadata alone, PEP 658):

    python3.12 scripts/offline/vllm_lock.py

How: pip resolves the two requirements in an environment faked from dist-info stubs: the bundle's packages at their
pins with their real metadata, and the image's at their versions (a package whose version the image list does not
give: at version 0, and left out of the environment wherever a requirement names a version of it, so the layer
carries it). An image package of known version keeps, of its real requirements (PyPI's metadata of that release;
torch's pins cuda-toolkit 13.0.2), those on what the layer or the bundle replace or add: the image is taken to
satisfy the rest. What pip would install or replace there is the layer (resolved again until it settles). Writes
vllm_wheels.txt (the pins bundle.sh reads) and vllm_lock.json (each wheel's name, version, Requires-Python,
Requires-Dist and Provides-Extra, for the layer, the bundle and the image's packages of known version), from which
tests/unit/test_offline_vllm_layer.py checks offline that the layered set resolves.
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # a bare virtual environment: pip's own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
ROOTS = ["vllm==0.24.0", "verl[vllm]==0.9.1"]
# Published as sources only: built into pure-Python wheels by bundle.sh (as wheels.txt's antlr4-python3-runtime).
SDIST_ONLY = ["pylatexenc"]


def read_list(path: Path) -> dict[str, tuple[str, str | None]]:
    """name (canonical): (name as written, version or None) of a wheels.txt or image_packages.txt."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = (name, version or None)
    return out


def pip(*args: str, env: dict | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def metadata_of(item: dict) -> dict:
    meta = item["metadata"]
    return {
        "name": meta["name"],
        "version": meta["version"],
        "requires_python": meta.get("requires_python"),
        "requires_dist": meta.get("requires_dist", []),
        "provides_extra": meta.get("provides_extra", []),
        "sdist": not item["download_info"]["url"].endswith(".whl"),
        "file": item["download_info"]["url"].rsplit("/", 1)[-1],
        "sha256": item["download_info"].get("archive_info", {}).get("hashes", {}).get("sha256"),
    }


def write_dist_info(site: Path, name: str, version: str, meta: dict | None = None) -> None:
    folder = site / f"{canonicalize_name(name).replace('-', '_')}-{version}.dist-info"
    folder.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if meta:
        if meta["requires_python"]:
            lines.append(f"Requires-Python: {meta['requires_python']}")
        lines += [f"Provides-Extra: {extra}" for extra in meta["provides_extra"]]
        lines += [f"Requires-Dist: {requirement}" for requirement in meta["requires_dist"]]
    (folder / "METADATA").write_text("\n".join(lines) + "\n")
    (folder / "INSTALLER").write_text("stub\n")


def reached_requirements(dists: dict[str, dict]) -> list[Requirement]:
    """Every requirement reached from ROOTS through the metadata in ``dists`` (canonical name: metadata), with the
    extras asked for; markers are evaluated for this interpreter (the target's)."""
    asked: dict[str, set[str]] = {}
    reached, queue = [], [Requirement(root) for root in ROOTS]
    while queue:
        requirement = queue.pop()
        reached.append(requirement)
        name = canonicalize_name(requirement.name)
        extras = set(requirement.extras)
        if name in asked and extras <= asked[name]:
            continue
        asked[name] = asked.get(name, set()) | extras
        for text in dists.get(name, {}).get("requires_dist", []):
            child = Requirement(text)
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in asked[name] | {""}):
                queue.append(child)
    return reached


def metadata_report(tmp: Path, label: str, requirements: list[str]) -> dict[str, dict]:
    """canonical name: metadata of each of ``requirements`` (name==version), from PyPI without their wheels."""
    report = tmp / f"{label}.json"
    print(f"metadata of {label}'s packages ...", flush=True)
    pip("install", "-q", "--dry-run", "--ignore-installed", "--no-deps", "--report", str(report), *requirements)
    return {canonicalize_name(m["name"]): m for m in map(metadata_of, json.loads(report.read_text())["install"])}


def image_requires(meta: dict, replaced: set[str]) -> dict:
    """An image package's metadata with only its requirements on what the layer or the bundle replace or add: the
    image is taken to satisfy its own packages' requirements on each other (pip installed them together)."""
    kept = [r for r in meta["requires_dist"] if canonicalize_name(Requirement(r).name) in replaced]
    return {**meta, "requires_dist": kept}


def main() -> None:
    if sys.version_info[:2] != (3, 12) or platform.system() != "Linux" or platform.machine() != "x86_64":
        sys.exit("run with Python 3.12 on Linux x86_64 (the target's): pip evaluates markers for its own interpreter")
    image, base = read_list(HERE / "image_packages.txt"), read_list(HERE / "wheels.txt")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base_meta = metadata_report(tmp, "wheels.txt", [f"{name}=={version}" for name, version in base.values()])
        # The requirements of the image's packages of known version (a local version such as +cu130 left out).
        image_meta = metadata_report(
            tmp,
            "image_packages.txt",
            [
                f"{name}=={version.split('+')[0]}"
                for key, (name, version) in image.items()
                if version and key not in base
            ],
        )
        carry_unknown: set[str] = set()
        layer: dict[str, dict] = {}
        for attempt in range(10):
            site = tmp / f"site-{attempt}"
            site.mkdir()
            replaced = set(base) | set(layer) | carry_unknown
            for key, (name, version) in image.items():
                if key not in base and key not in carry_unknown:
                    meta = image_meta.get(key)
                    write_dist_info(site, name, version or "0", meta and image_requires(meta, replaced))
            for meta in base_meta.values():
                write_dist_info(site, meta["name"], meta["version"], meta)
            report = tmp / f"layer-{attempt}.json"
            print(f"resolving {' '.join(ROOTS)} over the image and the bundle ...", flush=True)
            pip(
                "install",
                "-q",
                "--dry-run",
                "--only-binary=:all:",
                *(f"--no-binary={n}" for n in SDIST_ONLY),
                "--report",
                str(report),
                *ROOTS,
                env={**os.environ, "PYTHONPATH": str(site)},
            )
            layer = {
                canonicalize_name(m["name"]): m for m in map(metadata_of, json.loads(report.read_text())["install"])
            }
            dists = {**{k: image_requires(m, replaced) for k, m in image_meta.items()}, **base_meta, **layer}
            named = {
                canonicalize_name(r.name)
                for r in reached_requirements(dists)
                if str(r.specifier) and image.get(canonicalize_name(r.name), ("", "?"))[1] is None
            }
            new = named - set(layer) - set(base) - carry_unknown
            if not new and set(layer) <= replaced:
                break
            print(f"image packages of unknown version that a requirement names a version of: {sorted(new)}")
            carry_unknown |= new
        else:
            sys.exit("the layer did not settle in 10 resolutions")
    pins = sorted(layer.values(), key=lambda m: m["name"].lower())
    header = [
        "# The offline bundle's vLLM layer (bundle.sh --with-vllm): what vllm==0.24.0 and verl[vllm]==0.9.1 need",
        "# beyond the CUDA PyTorch image (image_packages.txt, an assumption) and the bundle (wheels.txt), for CPython",
        "# 3.12 on manylinux x86_64. Written with vllm_lock.json by `python3.12 scripts/offline/vllm_lock.py`: do not",
        "# edit. A line marked `# sdist` has no wheel on PyPI: bundle.sh builds a pure-Python one.",
    ]
    lines = [f"{m['name']}=={m['version']}" + ("  # sdist" if m["sdist"] else "") for m in pins]
    (HERE / "vllm_wheels.txt").write_text("\n".join(header + lines) + "\n")
    lock = {
        "generated_by": "python3.12 scripts/offline/vllm_lock.py",
        "python": platform.python_version(),
        "roots": ROOTS,
        "layer": pins,
        "bundle": sorted(base_meta.values(), key=lambda m: m["name"].lower()),
        "image": sorted(image_meta.values(), key=lambda m: m["name"].lower()),
    }
    (HERE / "vllm_lock.json").write_text(json.dumps(lock, indent=1) + "\n")
    print(f"{len(pins)} wheels in the layer: scripts/offline/vllm_wheels.txt, scripts/offline/vllm_lock.json")


if __name__ == "__main__":
    main()
