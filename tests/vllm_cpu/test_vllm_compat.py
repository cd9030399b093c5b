"""What verl's vLLM rollout on the cpu platform rests on, checked against the vLLM and verl this environment has."""

import pytest
import torch

from verl_asyncweb.backends import vllm_cpu
from verl_asyncweb.backends.verl_compat import WORKAROUNDS

pytestmark = pytest.mark.vllm


@pytest.mark.parametrize("workaround", [w for w in WORKAROUNDS if w.needs], ids=lambda w: w.name)
def test_each_vllm_workaround_targets_code_that_still_has_the_problem(workaround):
    assert workaround.still_needed(), f"{workaround.module}.{workaround.attribute} no longer contains the line"


def test_the_head_sizes_main_checks_without_vllm_are_vllms_own():
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    assert tuple(CPUAttentionBackend.get_supported_head_sizes()) == vllm_cpu.CPU_ATTENTION_HEAD_SIZES


def test_vllm_found_its_cpu_platform_and_verl_its_version():
    import importlib.metadata

    from vllm.platforms import current_platform

    assert type(current_platform).__name__ == "CpuPlatform"
    assert importlib.metadata.version("vllm") == "0.24.0+cpu"
    import verl.workers.rollout.vllm_rollout.vllm_async_server  # noqa: F401  (raises on an unsupported version)


def test_a_cpu_tensors_ipc_handle_is_not_one_verls_vllm_receiver_can_rebuild():
    # What verl's BucketedWeightSender does with a tensor over its bucket where CUDA IPC exists: it sends the
    # tensor's own IPC handle, and the vLLM worker rebuilds it on its device. The handle of a CPU tensor (what Ray's
    # object store engine used to hand over) is a file descriptor with no device field: the worker raises while the
    # sender waits for its reply. weight_sync now hands such tensors over on the device (tests/backends).
    from torch.multiprocessing.reductions import reduce_tensor
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import rebuild_ipc

    with pytest.raises(IndexError):
        rebuild_ipc(reduce_tensor(torch.ones(4)), device_id=0)


@pytest.mark.parametrize("size", ["tiny-vllm", "qwen3-tiny-vllm"])
def test_the_offline_models_built_for_vllm_have_heads_its_cpu_attention_takes(size):
    from verl_asyncweb.backends.tiny_model import build_tiny_model

    path = build_tiny_model(size=size)
    assert vllm_cpu.head_dim(path) == 32
    vllm_cpu.check_vllm_cpu_job(path, bucket_megabytes=1)
