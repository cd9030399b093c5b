"""scripts/install_browsergym.py installs BrowserGym without its Playwright pin, so that pip check stays clean."""

import base64
import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


def test_webarena_goes_into_its_own_folder_pinned_and_without_requirements(tmp_path, monkeypatch):
    module, calls = _module(), []
    monkeypatch.setattr(module, "_pip", lambda *args: calls.append(args))
    monkeypatch.setattr(module, "install_shared", lambda names: calls.append(("shared", *names)))
    monkeypatch.setattr(module, "isolated_dir", lambda name: tmp_path / name)
    module.main(["miniwob", "webarena"])
    assert calls[0] == ("shared", "miniwob")
    (install,) = calls[1:]
    assert install[:6] == ("install", "-q", "--no-deps", "--only-binary=:all:", "--target", str(tmp_path / "webarena"))
    assert {"browsergym-webarena==0.14.3", "libwebarena==0.0.4", "beartype==0.12.0"} <= set(install[6:])
    assert all("==" in pin for pin in install[6:])


def test_a_folder_that_would_shadow_the_environments_packages_is_refused(tmp_path, monkeypatch):
    module = _module()

    def pip(*args):  # installs a copy of a package the environment has
        dist_info = Path(args[args.index("--target") + 1]) / "requests-2.0.0.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: requests\nVersion: 2.0.0\n")

    monkeypatch.setattr(module, "_pip", pip)
    with pytest.raises(SystemExit, match=r"holds \['requests'\], which the environment has too"):
        module.install_isolated("webarena", tmp_path / "webarena")


def test_the_webarena_folder_shadows_nothing_and_leaves_only_unimported_requirements_unmet():
    module = _module()
    folder = module.isolated_dir("webarena")
    if not (folder / "browsergym" / "webarena").is_dir():
        pytest.skip(f"browsergym-webarena is not installed in {folder} (python scripts/install_browsergym.py webarena)")
    assert module.shadowed(folder) == []
    # pip check over the environment and the folder: what libwebarena's task code never imports, and
    # text-generation's cap on huggingface-hub (it imports, its client is never called: no model endpoint is used).
    env = {**os.environ, "PYTHONPATH": str(folder)}
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120, env=env)
    hub = importlib.metadata.version("huggingface-hub")
    assert sorted(done.stdout.splitlines()) == [
        "libwebarena 0.0.4 requires evaluate, which is not installed.",
        "libwebarena 0.0.4 requires tiktoken, which is not installed.",
        "libwebarena 0.0.4 requires types-tqdm, which is not installed.",
        f"text-generation 0.7.0 has requirement huggingface-hub<1.0,>=0.12, but you have huggingface-hub {hub}.",
    ]


def test_if_missing_skips_what_is_installed_as_pinned_and_installs_the_rest(tmp_path, monkeypatch):
    """scripts/setup.sh runs ``--if-missing`` every time: a folder counts as installed only with its pins file (written
    when its install completed) listing today's pins; an environment package only at its pinned version."""
    module, calls = _module(), []
    monkeypatch.setattr(module, "_pip", lambda *args: calls.append(("pip", args[5])))
    monkeypatch.setattr(module, "install_shared", lambda names: calls.append(("shared", *names)))
    monkeypatch.setattr(module, "isolated_dir", lambda name: tmp_path / name)
    pinned = {"browsergym-core==0.14.3", "browsergym-miniwob==0.14.3"}  # workarena is not installed
    monkeypatch.setattr(module, "_has", lambda pin: pin in pinned)
    (tmp_path / "webarena").mkdir()
    (tmp_path / "webarena" / module.PINS).write_text("\n".join(module.ISOLATED["webarena"]) + "\n")
    (tmp_path / "visualwebarena").mkdir()  # an install that never completed: no pins file
    module.main(["miniwob", "workarena", "webarena", "visualwebarena"], if_missing=True)
    assert calls == [("shared", "workarena"), ("pip", str(tmp_path / "visualwebarena"))]
    assert (tmp_path / "visualwebarena" / module.PINS).read_text().split() == list(module.ISOLATED["visualwebarena"])

    calls.clear()  # WorkArena's package is there, one of the requirements it added is not
    pinned.update(["browsergym-workarena==0.5.1", "english-words==2.0.2", "faker==40.63.0"])
    module.main(["workarena"], if_missing=True)
    assert calls == [("shared", "workarena")]

    calls.clear()  # everything there now, but the WebArena folder was made with other pins
    pinned.add("tenacity==9.2.1")
    (tmp_path / "webarena" / module.PINS).write_text("libwebarena==0.0.3\n")
    module.main(["miniwob", "workarena", "webarena", "visualwebarena"], if_missing=True)
    assert calls == [("pip", str(tmp_path / "webarena"))]  # browsergym-core is there: no shared install
    calls.clear()
    module.main(["miniwob", "workarena", "webarena", "visualwebarena"], if_missing=True)
    assert calls == []
    monkeypatch.setattr(module, "relaxed_core", lambda: False)  # browsergym-core reinstalled with its pins
    module.main(["miniwob", "webarena"], if_missing=True)
    assert calls == [("shared", "miniwob")]
    with pytest.raises(SystemExit, match=r"unknown benchmarks \['webarna'\]"):
        module.main(["webarna"], if_missing=True)
