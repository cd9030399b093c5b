"""The offline bundle's vLLM layer is complete, without a network: pip itself resolves vllm==0.24.0 and
verl[vllm]==0.9.1 against stub wheels of what a node gets (the layer's versions ahead of the bundle's ahead of the
image's, as install.sh's PYTHONPATH orders them), built from the metadata that scripts/offline/vllm_lock.py
recorded from PyPI and served as a local index (a folder; pip reaches nothing else). Downloading the layer itself
(1.6 GB of wheels) is tried by hand (docs/install.md, "Offline installs")."""

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

OFFLINE = Path(__file__).resolve().parents[2] / "scripts" / "offline"
LOCK = json.loads((OFFLINE / "vllm_lock.json").read_text())
ROOTS = ["vllm==0.24.0", "verl[vllm]==0.9.1"]
# The node: CPython 3.12.3 on Linux x86_64. Markers are evaluated for it here, whatever Python runs the test (pip
# evaluates them for its own interpreter even with --python-version).
TARGET = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "implementation_version": "3.12.3",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}


def read_list(name: str) -> dict[str, tuple[str, str | None]]:
    out = {}
    for line in (OFFLINE / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            package, _, version = line.partition("==")
            out[canonicalize_name(package)] = (package, version or None)
    return out


def for_target(text: str, extras: list[str]) -> str | None:
    """A Requires-Dist line with its marker decided for TARGET (an ``extra ==`` condition kept), or None."""
    requirement = Requirement(text)
    if requirement.marker is None:
        return text
    true_for = [e for e in ["", *extras] if requirement.marker.evaluate({**TARGET, "extra": e})]
    if not true_for:
        return None
    requirement.marker = None
    if "" in true_for:
        return str(requirement)
    return f"{requirement}; " + " or ".join(f'extra == "{e}"' for e in true_for)


def stub_wheel(folder: Path, name: str, version: str, meta: dict | None) -> None:
    stem = re.sub(r"[-_.]+", "_", name).lower()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if meta:
        if meta["requires_python"]:
            lines.append(f"Requires-Python: {meta['requires_python']}")
        lines += [f"Provides-Extra: {extra}" for extra in meta["provides_extra"]]
        for text in meta["requires_dist"]:
            line = for_target(text, meta["provides_extra"])
            if line:
                lines.append(f"Requires-Dist: {line}")
    info = f"{stem}-{version}.dist-info"
    # A local index (simple/NAME/): pip reads one project's page per lookup, three times faster than --find-links
    # over the ~370 stubs.
    project = folder / canonicalize_name(name)
    project.mkdir()
    filename = f"{stem}-{version}-py3-none-any.whl"
    (project / "index.html").write_text(f'<a href="{filename}">{filename}</a>\n')
    with zipfile.ZipFile(project / filename, "w") as wheel:
        wheel.writestr(f"{info}/METADATA", "\n".join(lines) + "\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: stub\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")


def node_stubs(folder: Path, unknown_version: str, leave_out: str | None = None) -> dict[str, str]:
    """Stub wheels of one version per package, the one a node imports: the layer's, else the bundle's, else the
    image's (``unknown_version`` for a package image_packages.txt gives no version of); ``leave_out`` drops one of
    the layer's. An image package keeps only its requirements on packages the layer or the bundle replace or add
    (the image satisfies the others: pip installed its packages together). Returns name: version."""
    layer = [m for m in LOCK["layer"] if canonicalize_name(m["name"]) != leave_out]
    replaced = {canonicalize_name(m["name"]) for m in LOCK["bundle"] + layer}
    image_meta = {canonicalize_name(m["name"]): m for m in LOCK["image"]}
    node: dict[str, tuple[str, str, dict | None]] = {}
    for key, (name, version) in read_list("image_packages.txt").items():
        meta = image_meta.get(key)
        if meta:
            kept = [r for r in meta["requires_dist"] if canonicalize_name(Requirement(r).name) in replaced]
            meta = {**meta, "requires_dist": kept}
        node[key] = (name, version or unknown_version, meta)
    for meta in LOCK["bundle"] + layer:
        node[canonicalize_name(meta["name"])] = (meta["name"], meta["version"], meta)
    folder.mkdir()
    for name, version, meta in node.values():
        stub_wheel(folder, name, version, meta)
    return {key: version for key, (_, version, _) in node.items()}


def resolve(stubs: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    report = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--no-cache-dir",
        "--dry-run", "--index-url", stubs.as_uri(), "--target", str(tmp_path / "target"),
        "--python-version", "3.12", "--only-binary=:all:", "--report", str(report), *ROOTS,
        # pip 23 checks Requires-Python against its own interpreter too: test_every_wheel_takes_python_3_12 instead.
        "--ignore-requires-python",
    ]  # fmt: skip
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}  # no site-wide index, find-links or constraints
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("unknown_version", ["0", "9999"])
def test_the_layer_bundle_and_image_resolve_vllm_and_verl(tmp_path, unknown_version):
    # Whatever version the image holds of a package image_packages.txt gives none of (the oldest or the newest).
    node = node_stubs(tmp_path / "stubs", unknown_version)
    done = resolve(tmp_path / "stubs", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads((tmp_path / "report.json").read_text())["install"]
    }
    assert chosen["vllm"] == "0.24.0" and chosen["verl"] == "0.9.1" and chosen["transformers"] == "5.9.0"
    assert chosen["torch"] == "2.11.0+cu130"  # the image's: vLLM 0.24.0 pins torch 2.11.0, the image's release
    assert all(node[key] == version for key, version in chosen.items())


@pytest.mark.parametrize(
    "leave_out",
    [
        "blake3",  # vLLM's, in neither the image nor the bundle
        "transformers",  # 5.9.0, as verl[vllm] pins it: the bundle's 5.10.4 would be imported
    ],
)
def test_without_one_of_the_layers_wheels_it_does_not_resolve(tmp_path, leave_out):
    node_stubs(tmp_path / "stubs", "0", leave_out=leave_out)
    done = resolve(tmp_path / "stubs", tmp_path)
    assert done.returncode != 0
    assert "ResolutionImpossible" in done.stderr or "No matching distribution" in done.stderr, done.stderr[-3000:]


def test_the_pins_match_the_lock_and_carry_only_what_differs():
    pins = read_list("vllm_wheels.txt")
    assert {key: version for key, (_, version) in pins.items()} == {
        canonicalize_name(m["name"]): m["version"] for m in LOCK["layer"]
    }
    assert LOCK["roots"] == ROOTS
    lines = {
        line.split()[0]: line for line in (OFFLINE / "vllm_wheels.txt").read_text().splitlines() if line[:1] != "#"
    }
    for meta in LOCK["layer"]:
        assert lines[f"{meta['name']}=={meta['version']}"].endswith("# sdist") == meta["sdist"]
    # Nothing the bundle or the image already holds at the same version.
    held = {key: version for key, (_, version) in read_list("image_packages.txt").items()}
    held |= {key: version for key, (_, version) in read_list("wheels.txt").items()}
    assert [key for key, (_, version) in pins.items() if held.get(key) == version] == []
    # The bundle's metadata is of wheels.txt's pins.
    assert {canonicalize_name(m["name"]): m["version"] for m in LOCK["bundle"]} == {
        key: version for key, (_, version) in read_list("wheels.txt").items()
    }
    assert pins["vllm"][1] == "0.24.0"
    # CUDA 13.0's libraries stay the image's (torch 2.11.0 pins cuda-toolkit 13.0.2): none shadowed by a newer one.
    assert {"torch", "cuda-toolkit", "nvidia-cuda-runtime", "nvidia-nvjitlink", "nvidia-cublas"}.isdisjoint(pins)


def test_every_wheel_takes_python_3_12():
    refused = [
        f"{m['name']} {m['version']}: {m['requires_python']}"
        for m in LOCK["layer"] + LOCK["bundle"] + LOCK["image"]
        if m["requires_python"] and not SpecifierSet(m["requires_python"]).contains(TARGET["python_full_version"])
    ]
    assert refused == []
