"""Install BrowserGym's task packages next to this project's Playwright, without BrowserGym's Playwright pin.

browsergym-core 0.14.3 requires ``playwright==1.44`` (and ``mcp[cli]``, for its MCP server); this project runs
Playwright 1.65 and only uses BrowserGym's task classes, whose sync Playwright calls run over the pool's async page
(verl_asyncweb.env.sync_page; tests/env/test_browsergym.py runs them). This script downloads the pinned
browsergym wheels, rewrites browsergym-core's METADATA so that it asks for ``playwright>=1.44`` and not ``mcp``
(its RECORD updated to match), and installs them with their remaining requirements, so that ``pip check`` stays
clean. Usage: python scripts/install_browsergym.py [BENCHMARK ...]  (default: miniwob; e.g. webarena).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "0.14.3"
CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints" / "cpu.txt"
RELAXED = {"Requires-Dist: playwright==1.44": "Requires-Dist: playwright>=1.44"}
DROPPED = ("Requires-Dist: mcp",)


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def relax(wheel: Path, out_dir: Path) -> Path:
    """A copy of browsergym-core's wheel whose METADATA drops the Playwright pin and the MCP requirement."""
    out = out_dir / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        names = source.namelist()
        metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
        record = next(name for name in names if name.endswith(".dist-info/RECORD"))
        lines = []
        for line in source.read(metadata).decode().splitlines():
            if line.startswith(DROPPED):
                continue
            lines.append(RELAXED.get(line, line))
        if not any(line.startswith("Requires-Dist: playwright>=") for line in lines):
            raise SystemExit(f"{wheel.name}: no 'playwright==1.44' requirement to relax; is it {VERSION}?")
        new_metadata = ("\n".join(lines) + "\n").encode()
        rows = []
        for row in source.read(record).decode().splitlines():
            path = row.split(",", 1)[0]
            rows.append(f"{path},{_digest(new_metadata)},{len(new_metadata)}" if path == metadata else row)
        for name in names:
            if name == metadata:
                target.writestr(name, new_metadata)
            elif name == record:
                target.writestr(name, "\n".join(rows) + "\n")
            else:
                target.writestr(name, source.read(name))
    return out


def main(benchmarks: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        packages = [f"browsergym-core=={VERSION}", *(f"browsergym-{name}=={VERSION}" for name in benchmarks)]
        _pip("download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(folder), *packages)
        core = next(folder.glob(f"browsergym_core-{VERSION}-*.whl"))
        (folder / "relaxed").mkdir()
        relaxed = relax(core, folder / "relaxed")
        others = [str(path) for path in folder.glob("browsergym_*.whl") if path != core]
        # Their own requirements less the ones the relaxed core no longer has; versions from the project's pins.
        _pip("install", "-q", "-c", str(CONSTRAINTS), "beautifulsoup4", "lxml<6", "pyparsing")
        _pip("install", "-q", "--no-deps", str(relaxed), *others)


if __name__ == "__main__":
    main(sys.argv[1:] or ["miniwob"])
