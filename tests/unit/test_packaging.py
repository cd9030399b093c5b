"""The install resolves on both stacks: verl_asyncweb's ranges admit verl[vllm]==0.9.1's GPU pins and the CPU pins.

Checked offline against the installed metadata of verl and of this package (what pip resolves against); the online
check is the ``pip install --dry-run`` command of docs/install.md. The wheel ships every file of the package, and the
offline bundle's package list covers what a CUDA PyTorch image lacks.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints" / "cpu.txt"
# The offline bundle's packages: what a CUDA PyTorch image lacks (scripts/offline/bundle.sh).
OFFLINE_WHEELS = CONSTRAINTS.parents[1] / "scripts" / "offline" / "wheels.txt"
# What such an image provides of verl_asyncweb's requirements.
IMAGE_PROVIDES = {"torch", "torchvision", "pillow", "matplotlib", "scipy", "aiohttp", "tqdm"}
# Requirements no process of a run imports: verl imports qwen_vl_utils only for datasets with images in prompts.
NOT_IMPORTED = {"qwen-vl-utils"}


def requirements(distribution: str, extra: str = "") -> dict[str, Requirement]:
    """The distribution's requirements that apply with ``extra`` (base ones with ``""``), by canonical name."""
    found = {}
    for line in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
            if extra and requirement.marker is None:
                continue
            found[canonicalize_name(requirement.name)] = requirement
    return found


def pins(path: Path = CONSTRAINTS) -> dict[str, str]:
    """The ``name==version`` lines of a pin file by canonical name (comments, whole or trailing, skipped)."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[canonicalize_name(name)] = version.strip()
    return found


VERL_VLLM_PINS = requirements("verl", "vllm")


def test_verls_vllm_extra_pins_the_gpu_stack_we_target():
    pins = {name: str(req.specifier) for name, req in VERL_VLLM_PINS.items() if str(req.specifier).startswith("==")}
    assert {"torch": "==2.11.0", "torchvision": "==0.26.0", "transformers": "==5.9.0", "vllm": "==0.24.0"}.items() <= (
        pins.items()
    )


@pytest.mark.parametrize("name", ["torch", "torchvision", "transformers"])
def test_our_ranges_admit_verls_gpu_pin(name):
    pinned = next(iter(VERL_VLLM_PINS[name].specifier)).version
    ours = requirements("verl_asyncweb")[name].specifier
    assert ours.contains(pinned), f"{name} {ours} rejects verl[vllm]'s {pinned}: pip install verl_asyncweb[gpu] fails"


def test_cpu_constraints_satisfy_our_ranges_and_verls():
    ours, verls, cpu = requirements("verl_asyncweb"), requirements("verl"), pins()
    # BrowserGym's task packages (scripts/install_browsergym.py, with its Playwright pin relaxed) and what they pull.
    browsergym = requirements("browsergym-core") | requirements("beautifulsoup4")
    for name, version in cpu.items():
        for owner, reqs in (("verl_asyncweb", ours), ("verl", verls), ("browsergym", browsergym)):
            if name in reqs:
                assert reqs[name].specifier.contains(version), f"{owner} requires {reqs[name]}, pinned {version}"
    # Every exact-pinned package of the CPU stack is a requirement of ours (a stale pin would go unnoticed).
    assert set(cpu) <= set(ours) | set(verls) | set(browsergym)


FLASH_ATTN_EXTRA = "flash-attn-cu130torch211"


def test_gpu_extra_brings_vllm_what_the_nccl_weight_sync_imports_and_verls_flash_attn():
    gpu = requirements("verl_asyncweb", "gpu")
    (verl,) = [req for name, req in gpu.items() if name == "verl"]
    assert {"vllm", "cupy-cu130", FLASH_ATTN_EXTRA} <= verl.extras and verl.specifier.contains("0.9.1")
    cupy = requirements("verl", "cupy-cu130")
    assert any(name.startswith("cupy") for name in cupy), cupy
    # flash-attn as verl pins it, not a second pin of ours that could drift from it.
    assert "flash-attn" not in gpu
    assert str(requirements("verl", FLASH_ATTN_EXTRA)["flash-attn"].specifier) == "==2.8.3"


def test_the_offline_bundle_holds_every_requirement_the_image_lacks():
    bundled = set(pins(OFFLINE_WHEELS))
    assert set(requirements("verl_asyncweb")) - bundled - IMAGE_PROVIDES - NOT_IMPORTED == set()
    assert {"ray", "verl", "playwright", "transferqueue"} <= bundled


def test_the_offline_bundle_pins_the_cpu_stack():
    # The packages constraints/cpu.txt pins; the others are at the versions the bundle was tried with (docs/install.md).
    bundled, cpu = pins(OFFLINE_WHEELS), pins()
    shared = set(bundled) & set(cpu)
    assert {"verl", "ray", "playwright", "transformers", "tensordict", "transferqueue"} <= shared
    assert {name: bundled[name] for name in shared} == {name: cpu[name] for name in shared}


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> Path:
    """The wheel ``pip wheel`` builds from a clean copy of the source tree (as a cluster install would)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    # A clean copy: an editable install's egg-info lists every file, and setuptools ships what it lists.
    source_copy = tmp_path / "source"
    shutil.copytree(
        CONSTRAINTS.parents[1],
        source_copy,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "runs", "__pycache__"),
    )
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path)]
    subprocess.run([*command, str(source_copy)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("verl_asyncweb-*.whl")
    return wheel


def test_the_wheel_ships_every_data_file_of_the_source_tree(built_wheel):
    # Found by the offline bundle's first non-editable install: config/asyncweb/default.yaml was left out of the
    # wheel, so no recipe composed ("Could not find 'asyncweb/default'"); editable installs read the source tree.
    repo = CONSTRAINTS.parents[1]
    shipped = {name for name in zipfile.ZipFile(built_wheel).namelist() if name.startswith("verl_asyncweb/")}
    package = repo / "verl_asyncweb"
    # os.walk follows the recipes link (verl_asyncweb/recipes -> ../recipes); Path.rglob would skip it.
    source = {
        f"verl_asyncweb/{(Path(folder) / name).relative_to(package).as_posix()}"
        for folder, _, names in os.walk(package, followlinks=True)
        if "__pycache__" not in Path(folder).parts
        for name in names
    }
    assert "verl_asyncweb/recipes/gpu_check_1gpu.yaml" in source
    assert source - shipped == set()


def test_the_wheel_installs_into_a_fresh_environment_and_runs_outside_the_checkout(built_wheel, tmp_path):
    """docs/install.md's cluster install: ``pip install dist/verl_asyncweb-*.whl`` into an environment that has the
    stack (a venv over this interpreter's packages, as a verl image has verl), then, away from the checkout, verl's
    plugin entry point finds the installed copy and a recipe composes from the wheel's own files."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    # --force-reinstall --no-deps: this interpreter has the checkout installed (editable); the venv gets the wheel.
    install = [python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(built_wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    checked = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert "verl-asyncweb" not in checked.stdout.lower(), checked.stdout  # its requirements are all met
    probe = (
        "import importlib.metadata, verl_asyncweb\n"
        "(plugin,) = [e for e in importlib.metadata.entry_points(group='verl.plugins') if e.name == 'asyncweb']\n"
        "print(verl_asyncweb.__file__)\n"
        "print(plugin.value)\n"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    location, entry_point = done.stdout.split()
    assert Path(location).is_relative_to(venv) and entry_point == "verl_asyncweb.plugin", done.stdout
    composed = subprocess.run(
        [python, "-m", "verl_asyncweb.main", "recipe=laptop_learning", "--cfg", "job"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert composed.returncode == 0, composed.stderr[-2000:]
    assert "estimator: multistep_grpo" in composed.stdout and "recipe: laptop_learning" in composed.stdout
