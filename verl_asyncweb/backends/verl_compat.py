"""Run-time workarounds of verl internals that the CPU backend needs: the only place the plugin touches them.

Each workaround names the verl line it works around, checks that the line is still there (so a verl upgrade
that fixes or moves it fails loudly in ``tests/backends/test_verl_compat.py`` instead of silently misbehaving),
and is applied only when the ``cpu`` platform is selected: GPU deployments run verl untouched.

- ``gloo_process_group``: ``TrainingWorker.__init__`` calls ``initialize_global_process_group_ray()``, whose
  default backend string ``cpu:gloo,cpu:gloo`` torch rejects.
- ``cpu_resource_check``: ``ResourcePoolManager._check_resource_available`` counts only GPU/NPU and raises on a
  CPU cluster.
- ``separate_async_logger``: ``PPOTrainerSeparateAsync._setup`` calls ``logger.info(..., flush=True)``, a
  TypeError whenever INFO logging is on.
"""

import inspect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

VERL_VERSION_WRITTEN_FOR = "0.9.1"
_applied: set[str] = set()
_originals: dict[str, object] = {}


@dataclass(frozen=True)
class Workaround:
    """A verl internal replaced at run time, with the source line that makes it necessary."""

    name: str
    module: str
    attribute: str
    expected_source: str
    apply: Callable[[], None]

    def target(self):
        import importlib

        module = importlib.import_module(self.module)
        owner, _, member = self.attribute.rpartition(".")
        return getattr(getattr(module, owner), member) if owner else getattr(module, member)

    def target_source(self) -> str:
        """Source of verl's own target (as it was before this workaround replaced it, if it did)."""
        return inspect.getsource(_originals.get(self.name) or self.target())

    def still_needed(self) -> bool:
        return self.expected_source in self.target_source()


def _patch_gloo_process_group() -> None:
    import verl.workers.engine_workers as engine_workers
    from verl.utils.distributed import initialize_global_process_group_ray

    def initialize_gloo_process_group(timeout_second=None, backend=None):
        return initialize_global_process_group_ray(timeout_second=timeout_second, backend=backend or "gloo")

    engine_workers.initialize_global_process_group_ray = initialize_gloo_process_group


def _patch_cpu_resource_check() -> None:
    import ray
    from verl.single_controller.ray.base import ResourcePoolManager

    def check_cpu_resources(self) -> None:
        available = sum(node.get("CPU", 0) for node in ray._private.state.available_resources_per_node().values())
        required = sum(n for process_on_nodes in self.resource_pool_spec.values() for n in process_on_nodes)
        if available < required:
            raise ValueError(
                f"the Ray cluster has {available} free CPUs but the resource pools need {required}; raise "
                "ray_kwargs.ray_init.num_cpus (logical CPUs may exceed cores) or shrink the pools"
            )

    ResourcePoolManager._check_resource_available = check_cpu_resources


class _FlushTolerantLogger(logging.LoggerAdapter):
    """Drops the print-style ``flush=`` keyword that verl passes to ``logger.info``."""

    def process(self, msg, kwargs):
        kwargs.pop("flush", None)
        return msg, kwargs


def _patch_separate_async_logger() -> None:
    import verl.trainer.ppo.v1.trainer_separate_async as separate_async

    if not isinstance(separate_async.logger, _FlushTolerantLogger):
        separate_async.logger = _FlushTolerantLogger(separate_async.logger, {})


WORKAROUNDS = (
    Workaround(
        name="gloo_process_group",
        module="verl.workers.engine_workers",
        attribute="TrainingWorker.__init__",
        expected_source="initialize_global_process_group_ray(timeout_second=None)",
        apply=_patch_gloo_process_group,
    ),
    Workaround(
        name="cpu_resource_check",
        module="verl.single_controller.ray.base",
        attribute="ResourcePoolManager._check_resource_available",
        expected_source='node_info.get("GPU", 0) if "GPU" in node_info else node_info.get("NPU", 0)',
        apply=_patch_cpu_resource_check,
    ),
    Workaround(
        name="separate_async_logger",
        module="verl.trainer.ppo.v1.trainer_separate_async",
        attribute="PPOTrainerSeparateAsync._setup",
        expected_source="flush=True",
        apply=_patch_separate_async_logger,
    ),
)


def cpu_platform_selected() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def apply_cpu_workarounds() -> list[str]:
    """Apply every workaround once per process when the cpu platform is selected; returns the applied names."""
    if not cpu_platform_selected():
        return []
    import verl

    if verl.__version__ != VERL_VERSION_WRITTEN_FOR:
        logger.warning(
            "verl_asyncweb's CPU workarounds were written for verl %s, found %s; run "
            "`python -m verl_asyncweb.doctor` to check them",
            VERL_VERSION_WRITTEN_FOR,
            verl.__version__,
        )
    for workaround in WORKAROUNDS:
        if workaround.name not in _applied:
            _originals[workaround.name] = workaround.target()
            workaround.apply()
            _applied.add(workaround.name)
    return sorted(_applied)
