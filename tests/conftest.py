"""Suite-wide settings: every test runs on the CPU backend and contacts only loopback."""

import importlib.util
import os

os.environ.setdefault("VERL_PLATFORM", "cpu")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# verl first: it loads the plugin on import (see verl_asyncweb/main.py).
import pytest  # noqa: E402
import verl  # noqa: E402, F401

RAY_NUM_CPUS = 8
# tests/vllm_cpu runs in the vLLM environment (vLLM's CPU build, verl[vllm]'s torch and transformers), where
# scripts/test.sh runs it after the rest of the suite; an interpreter without vLLM does not collect it.
collect_ignore = [] if importlib.util.find_spec("vllm") else ["vllm_cpu"]


@pytest.fixture(scope="session")
def tiny_model_path():
    """The offline tiny Qwen2.5-VL, built once into the user cache (about 7 s the first time)."""
    from verl_asyncweb.backends.tiny_model import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the session; workers select the cpu platform like a real run."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=RAY_NUM_CPUS,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=300 * 1024 * 1024,
            runtime_env={"env_vars": {"VERL_PLATFORM": "cpu", "TOKENIZERS_PARALLELISM": "false"}},
        )
    yield ray
    if started:
        ray.shutdown()
