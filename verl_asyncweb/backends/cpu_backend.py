"""Activates the CPU backend in processes that selected the ``cpu`` platform (``VERL_PLATFORM=cpu``).

Importing this module on such a process registers verl's FSDP engines for device ``cpu`` and applies the
CPU workarounds of :mod:`.verl_compat`; on any other process it does nothing.
"""

import logging

from . import cpu_platform  # noqa: F401  (the platform must be registered before verl resolves it)
from .verl_compat import apply_workarounds, cpu_platform_selected

logger = logging.getLogger(__name__)

ENGINE_BACKENDS = ["fsdp", "fsdp2"]


def register_cpu_engines() -> None:
    """Register verl's FSDP engines (language model and value head) for device ``cpu``; idempotent."""
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, engine_cls in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        registered = EngineRegistry._engines.get(model_type, {})
        if all("cpu" in registered.get(backend, {}) for backend in ENGINE_BACKENDS):
            continue
        EngineRegistry.register(model_type=model_type, backend=ENGINE_BACKENDS, device="cpu")(engine_cls)


def activate_cpu_backend() -> None:
    """Register the CPU engines and apply the verl workarounds in this process; idempotent."""
    register_cpu_engines()
    apply_workarounds()


if cpu_platform_selected():
    activate_cpu_backend()
