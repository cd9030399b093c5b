"""Fixtures of the agent tests: one small local Ray cluster for the whole session."""

from __future__ import annotations

import pytest

RAY_NUM_CPUS = 4


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray cluster with ``RAY_NUM_CPUS`` logical CPUs, shut down after the session."""
    ray = pytest.importorskip("ray", reason="install ray: pip install 'ray[default]'")
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=RAY_NUM_CPUS,
            include_dashboard=False,
            log_to_driver=False,
            namespace="asyncweb_agent_tests",
            object_store_memory=200 * 1024 * 1024,
        )
    yield ray
    if started:
        ray.shutdown()
