"""scripts/install_browsergym.py installs BrowserGym without its Playwright pin, so that pip check stays clean."""

import base64
import hashlib
import importlib.metadata
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_browsergym.py"


def _module():
    spec = importlib.util.spec_from_file_location("install_browsergym", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_rewritten_wheel_relaxes_the_pin_drops_mcp_and_keeps_its_record_true(tmp_path):
    metadata = (
        "Metadata-Version: 2.4\nName: browsergym-core\nVersion: 0.14.3\nRequires-Dist: gymnasium>=0.27\n"
        "Requires-Dist: mcp[cli]>=1.6.0\nRequires-Dist: playwright==1.44\n"
    )
    wheel = tmp_path / "browsergym_core-0.14.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("browsergym/core/__init__.py", "x = 1\n")
        archive.writestr("browsergym_core-0.14.3.dist-info/METADATA", metadata)
        archive.writestr(
            "browsergym_core-0.14.3.dist-info/RECORD",
            "browsergym/core/__init__.py,sha256=abc,6\nbrowsergym_core-0.14.3.dist-info/METADATA,sha256=old,1\n"
            "browsergym_core-0.14.3.dist-info/RECORD,,\n",
        )
    (tmp_path / "out").mkdir()
    relaxed = _module().relax(wheel, tmp_path / "out")
    with zipfile.ZipFile(relaxed) as archive:
        new = archive.read("browsergym_core-0.14.3.dist-info/METADATA")
        record = archive.read("browsergym_core-0.14.3.dist-info/RECORD").decode().splitlines()
        assert archive.read("browsergym/core/__init__.py") == b"x = 1\n"
    requires = [line for line in new.decode().splitlines() if line.startswith("Requires-Dist")]
    assert requires == ["Requires-Dist: gymnasium>=0.27", "Requires-Dist: playwright>=1.44"]
    digest = base64.urlsafe_b64encode(hashlib.sha256(new).digest()).rstrip(b"=").decode()
    assert f"browsergym_core-0.14.3.dist-info/METADATA,sha256={digest},{len(new)}" in record
    assert "browsergym/core/__init__.py,sha256=abc,6" in record


def test_the_installed_set_up_needs_no_playwright_downgrade_and_pip_check_is_clean():
    requires = importlib.metadata.requires("browsergym-core")
    assert "playwright>=1.44" in requires and not any(r.startswith(("mcp", "playwright==")) for r in requires)
    assert importlib.metadata.version("playwright") == "1.65.2"
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
