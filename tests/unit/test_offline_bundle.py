"""The offline bundle's package list (scripts/offline/wheels.txt) keeps up with the package's requirements and pins
the stack CI runs; the bundle itself is built and tried by hand (README, "Offline installs")."""

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
WHEELS = REPO / "scripts" / "offline" / "wheels.txt"
CONSTRAINTS = REPO / "constraints" / "cpu.txt"

# What a CUDA PyTorch image provides of verl_asyncweb's requirements.
IMAGE_PROVIDES = {"torch", "torchvision", "pillow", "matplotlib", "aiohttp", "tqdm"}
# Requirements no process of a run imports: verl imports qwen_vl_utils only for datasets with images in prompts.
NOT_IMPORTED = {"qwen-vl-utils"}


def pins(path: Path) -> dict[str, str]:
    lines = [line.strip() for line in path.read_text().splitlines()]
    return {
        canonicalize_name(name): version
        for name, version in (line.split("==") for line in lines if line and not line.startswith("#"))
    }


def install_requires() -> set[str]:
    setup = (REPO / "setup.py").read_text()
    block = setup[setup.index("INSTALL_REQUIRES = [") : setup.index("\n]\n", setup.index("INSTALL_REQUIRES = ["))]
    return {canonicalize_name(Requirement(spec).name) for spec in re.findall(r'^\s+"([^"]+)",', block, re.M)}


def test_the_bundle_holds_every_requirement_the_image_lacks():
    bundled = set(pins(WHEELS))
    missing = install_requires() - bundled - IMAGE_PROVIDES - NOT_IMPORTED
    assert missing == set()
    assert {"ray", "verl", "playwright", "transferqueue"} <= bundled


def test_the_bundle_pins_the_cpu_stack():
    # The packages constraints/cpu.txt pins; the others are at the versions the bundle was tried with (README).
    bundled, cpu = pins(WHEELS), pins(CONSTRAINTS)
    shared = set(bundled) & set(cpu)
    assert {"verl", "ray", "playwright", "transformers", "tensordict", "transferqueue"} <= shared
    assert {name: bundled[name] for name in shared} == {name: cpu[name] for name in shared}
