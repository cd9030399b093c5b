"""The offline bundle's install.sh unpacks a bundle's parts and installs this checkout beside them (its package list
is checked in test_packaging.py). Building a real bundle (~170 MB from PyPI, ~4 min) is tried by hand
(docs/install.md, "Offline installs")."""

import hashlib
import io
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _parts(folder: Path, files: dict[str, str], part_bytes: int) -> None:
    """A bundle of ``files`` (path: text) the way bundle.sh writes one: tar.xz parts and their SHA256SUMS."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    packed = buffer.getvalue()
    folder.mkdir()
    sums = []
    for index in range(0, len(packed), part_bytes):
        part = folder / f"bundle.tar.xz.part-{index // part_bytes:02d}"
        part.write_bytes(packed[index : index + part_bytes])
        sums.append(f"{hashlib.sha256(part.read_bytes()).hexdigest()}  {part.name}\n")
    (folder / "SHA256SUMS").write_text("".join(sums))


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


def test_the_scripts_parse():
    for script in ("bundle.sh", "install.sh"):
        subprocess.run(["bash", "-n", str(REPO / "scripts" / "offline" / script)], check=True)
