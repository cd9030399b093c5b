"""The offline bundle's install.sh unpacks a bundle's parts (and a vLLM layer's) and installs this checkout beside
them (the bundle's package list is checked in test_packaging.py, the layer's in test_offline_vllm_layer.py). Building
a real bundle (~170 MB from PyPI, ~4 min) is tried by hand (docs/install.md, "Offline installs")."""

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _parts(folder: Path, files: dict[str, str], part_bytes: int, name: str = "bundle") -> None:
    """A bundle of ``files`` (path: text) the way bundle.sh writes one: tar.xz parts (NAME.tar.xz.part-NN; NAME
    vllm for the vLLM layer) and their SHA256SUMS (which lists every part in the folder)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    packed = buffer.getvalue()
    folder.mkdir(exist_ok=True)
    for index in range(0, len(packed), part_bytes):
        part = folder / f"{name}.tar.xz.part-{index // part_bytes:02d}"
        part.write_bytes(packed[index : index + part_bytes])
    _sums(folder)


def _sums(folder: Path) -> None:
    parts = sorted(folder.glob("*.tar.xz.part-*"))
    (folder / "SHA256SUMS").write_text(
        "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in parts)
    )


def test_install_unpacks_the_parts_installs_this_checkout_and_refuses_a_corrupt_part(tmp_path):
    bundle, prefix = tmp_path / "bundle", tmp_path / "prefix"
    noise = "".join(f"{i * 7919 % 10007}\n" for i in range(20000))  # enough bytes for several parts
    _parts(
        bundle, {"site/bundled_probe.py": "VALUE = 42\n" + f"# {noise}", "chromium/bin/chromium": "#!/bin/sh\n"}, 8192
    )
    assert len(list(bundle.glob("bundle.tar.xz.part-*"))) >= 2
    (prefix / "site").mkdir(parents=True)
    (prefix / "site" / "left_from_an_earlier_bundle.py").write_text("")

    install = ["bash", str(REPO / "scripts" / "offline" / "install.sh"), str(bundle), str(prefix)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    probe = (
        f"source {prefix}/env.sh && python3 -c 'import bundled_probe, verl_asyncweb, importlib.metadata as m; "
        'print(bundled_probe.VALUE, verl_asyncweb.__file__, m.entry_points(group="verl.plugins")["asyncweb"].value)\''
        " && command -v chromium"
    )
    # From outside the checkout, whose own folder would be imported first.
    shown = subprocess.run(
        ["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    ).stdout.split()
    assert shown == [
        "42",
        f"{prefix}/site/verl_asyncweb/__init__.py",
        "verl_asyncweb.plugin",
        f"{prefix}/chromium/bin/chromium",
    ]
    assert not (prefix / "site" / "left_from_an_earlier_bundle.py").exists()
    assert (prefix / "site" / "verl_asyncweb" / "config" / "asyncweb" / "default.yaml").exists()

    part = bundle / "bundle.tar.xz.part-01"
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    refused = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "FAILED" in refused.stdout + refused.stderr


def test_install_puts_a_vllm_layer_ahead_of_the_bundle_and_removes_it_with_a_bundle_without_one(tmp_path):
    bundle, prefix = tmp_path / "bundle", tmp_path / "prefix"
    noise = "".join(f"{i * 7919 % 10007}\n" for i in range(20000))
    _parts(bundle, {"site/pinned.py": "VERSION = 'bundle'\n", "chromium/bin/chromium": "#!/bin/sh\n"}, 8192)
    # As bundle.sh --with-vllm packs it: the folder vllm/, whose versions win (transformers 5.9.0 over 5.10.4).
    _parts(bundle, {"vllm/pinned.py": "VERSION = 'layer'\n", "vllm/layer_only.py": f"# {noise}"}, 8192, name="vllm")
    assert len(list(bundle.glob("vllm.tar.xz.part-*"))) >= 2
    install = ["bash", str(REPO / "scripts" / "offline" / "install.sh"), str(bundle), str(prefix)]
    probe = (
        f"source {prefix}/env.sh && python3 -c 'import importlib.util as u, pinned, verl_asyncweb; "
        'print(pinned.VERSION, u.find_spec("layer_only") is not None, verl_asyncweb.__file__)\''
    )

    subprocess.run(install, check=True, capture_output=True, timeout=300)
    shown = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert shown.stdout.split() == ["layer", "True", f"{prefix}/site/verl_asyncweb/__init__.py"], shown.stderr
    assert (prefix / "env.sh").read_text().startswith(f'export PYTHONPATH="{prefix}/vllm:{prefix}/site$')

    part = bundle / "vllm.tar.xz.part-00"
    part.write_bytes(part.read_bytes()[:-1] + b"x")
    refused = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "vllm.tar.xz.part-00: FAILED" in refused.stdout + refused.stderr

    for part in bundle.glob("vllm.tar.xz.part-*"):
        part.unlink()
    _sums(bundle)
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    shown = subprocess.run(["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert shown.stdout.split() == ["bundle", "False", f"{prefix}/site/verl_asyncweb/__init__.py"], shown.stderr
    assert not (prefix / "vllm").exists()


def test_the_scripts_parse():
    for script in ("bundle.sh", "install.sh"):
        subprocess.run(["bash", "-n", str(REPO / "scripts" / "offline" / script)], check=True)
