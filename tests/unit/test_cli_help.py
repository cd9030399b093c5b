"""Every command a user is told to run answers ``--help`` with exit code 0 and its own ``python -m`` usage, and no
user-facing text points at this project's issue numbers."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import verl_asyncweb

COMMANDS = [
    "main",
    "doctor",
    "gpu_check",
    "evaluate",
    "replay",
    "viewer",
    "compare",
    "bench",
    "plan",
    "browser_server",
    "learning.demos",
    "learning.warm_start",
    "backends.tiny_model",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_exits_0_with_the_python_m_usage(command):
    done = subprocess.run(
        [sys.executable, "-m", f"verl_asyncweb.{command}", "--help"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    usage = f"usage: python -m verl_asyncweb.{command}"
    assert usage in done.stdout, done.stdout[:500]


def test_no_issue_numbers_in_user_facing_text():
    package = Path(verl_asyncweb.__file__).parent
    files = [*package.rglob("*.py"), *package.rglob("*.yaml")]
    hits = [
        f"{path}:{n}"
        for path in files
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"issue #\d", line)
    ]
    assert hits == []


def test_main_help_gives_every_recipe_whole_sentences():
    from verl_asyncweb.recipes_registry import available_recipes, recipe_files, recipe_summary

    files = recipe_files([])
    for name in available_recipes():
        what, hardware = recipe_summary(files[name])
        assert what.endswith(".") and hardware.endswith("."), (name, what, hardware)
        assert "README" not in what + hardware and "runs/" not in what + hardware, name


def test_bench_env_help_answers_without_importing_verl():
    # Asked as a newcomer asks it: importing verl takes ~8 s on 2 cores, and --help needs none of it.
    probe = (
        "import runpy, sys; sys.argv = ['bench', 'env', '--help']\n"
        "try:\n    runpy.run_module('verl_asyncweb.bench', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        "print('verl imported' if 'verl' in sys.modules else 'no verl')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: python -m verl_asyncweb.bench env" in done.stdout and done.stdout.rstrip().endswith("no verl")
