"""The verl workarounds of the CPU backend: still needed on the pinned verl, applied only on the cpu platform."""

import subprocess
import sys

import pytest
import verl

from verl_asyncweb.backends.verl_compat import VERL_VERSION_WRITTEN_FOR, WORKAROUNDS


def test_pinned_verl_is_the_version_the_workarounds_were_written_for():
    assert verl.__version__ == VERL_VERSION_WRITTEN_FOR


@pytest.mark.parametrize("workaround", WORKAROUNDS, ids=lambda w: w.name)
def test_each_workaround_targets_code_that_still_has_the_problem(workaround):
    # Fails when verl changes under us: then the workaround must be revisited (or deleted).
    assert workaround.still_needed(), f"{workaround.module}.{workaround.attribute} no longer contains the line"


def test_workarounds_are_not_applied_without_the_cpu_platform():
    probe = (
        "import os; os.environ.pop('VERL_PLATFORM', None); import verl;"
        "from verl.single_controller.ray.base import ResourcePoolManager as R;"
        "print(R._check_resource_available.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "verl.single_controller.ray.base"


def test_workarounds_are_applied_on_the_cpu_platform():
    probe = (
        "import os; os.environ['VERL_PLATFORM'] = 'cpu'; import verl;"
        "from verl.single_controller.ray.base import ResourcePoolManager as R;"
        "import verl.workers.engine_workers as w;"
        "print(R._check_resource_available.__module__, w.initialize_global_process_group_ray.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1].split() == ["verl_asyncweb.backends.verl_compat"] * 2
