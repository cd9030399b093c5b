"""The ``cpu`` platform: verl's device abstraction on plain CPUs (gloo process groups, Ray ``CPU`` resources).

Selected by ``VERL_PLATFORM=cpu`` in every process (``verl_asyncweb.main`` sets it for the driver and the Ray
runtime env); it is never auto-detected, so a GPU deployment that installs this plugin keeps verl's cuda platform.
"""

import logging
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

logger = logging.getLogger(__name__)

PLATFORM_NAME = "cpu"


def _noop(*args, **kwargs) -> None:
    return None


def _zero(*args, **kwargs) -> int:
    return 0


class _CPUStream:
    """Stand-in for a device stream: CPU kernels run in order, so every wait is already satisfied."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, other) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        return event or _CPUEvent()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


class _CPUEvent:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True


def _build_device_module() -> ModuleType:
    """The ``torch.<device>``-like namespace verl calls through ``get_torch_device()``.

    ``torch.cpu`` lacks the memory, stream and RNG entry points verl uses for accelerators; on CPU they are
    no-ops (memory is the process's own) or map to the global CPU generator.
    """
    module = ModuleType("verl_asyncweb_cpu_device")
    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: "cpu"
    module.set_device = _noop
    module.synchronize = _noop
    module.empty_cache = _noop
    module.ipc_collect = _noop
    module.set_per_process_memory_fraction = _noop
    module.reset_peak_memory_stats = _noop
    module.memory_allocated = _zero
    module.memory_reserved = _zero
    module.max_memory_allocated = _zero
    module.max_memory_reserved = _zero
    module.mem_get_info = _mem_get_info
    module.get_device_name = lambda *args: "cpu"
    module.manual_seed = torch.manual_seed
    module.manual_seed_all = torch.manual_seed
    module.get_rng_state = lambda *args: torch.get_rng_state()
    module.set_rng_state = lambda state, *args: torch.set_rng_state(state)
    module.Stream = _CPUStream
    module.Event = _CPUEvent
    module.current_stream = lambda *args: _CPUStream()
    module.stream = lambda stream=None: _CPUStream()
    return module


def _mem_get_info(*args) -> tuple[int, int]:
    import psutil

    memory = psutil.virtual_memory()
    return memory.available, memory.total


_DEVICE_MODULE = _build_device_module()


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for machines without an accelerator: the trainer and rollout run on CPU with gloo."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU host that installs the plugin must keep verl's cuda platform.
        return False

    def current_device(self) -> str:
        # verl uses this value as a device (`tensor.to(get_device_id())`); an int would mean cuda:N.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "VERL_ASYNCWEB_VISIBLE_CPUS"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        # PlatformBase returns resources={"CPU": n}, which Ray rejects: CPU must be requested as num_cpus.
        return {"num_cpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
