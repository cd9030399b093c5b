"""Shared profiles of the planner tests; every simulation here is pure Python and well under a second."""

import functools

import pytest

from verl_asyncweb.plan.overrides import apply_overrides
from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.profile_file import load_profile
from verl_asyncweb.plan.simulate import simulate

predict = functools.cache(simulate)
"""``simulate`` memoised per profile (profiles are frozen): tests that look at the same run share it."""


def override(profile: Profile, **dotted: object) -> Profile:
    """``profile`` with fields set by dotted name: ``override(p, **{"pipeline.mode": "sync"})``."""
    return apply_overrides(profile, [(key, str(value)) for key, value in dotted.items()])


@pytest.fixture(scope="session")
def gpu_paper() -> Profile:
    return load_profile("gpu_paper")


@pytest.fixture(scope="session")
def gpu_short(gpu_paper) -> Profile:
    """The paper profile over fewer steps, for tests of the mechanics rather than of its figures."""
    return override(gpu_paper, **{"sim.train_steps": 14, "sim.warmup_steps": 3})


@pytest.fixture(scope="session")
def cpu_laptop() -> Profile:
    return load_profile("cpu_laptop_learning")
