"""The memory split of ``gpu_check_vllm_1gpu``: the trainer and vLLM on one GPU, sized from the recipe and the model."""

import math

import pytest
import torch
from transformers import AutoModelForImageTextToText

from verl_asyncweb.backends.one_gpu import (
    CUDA_PROCESS_BYTES,
    GIB,
    HEADROOM_BYTES,
    VLLM_NON_TORCH_BYTES,
    ModelShape,
    SplitError,
    SplitInputs,
    plan_split,
    shared_visible_devices,
)
from verl_asyncweb.gpu_check import VLLM_ONE_GPU_LAYOUT
from verl_asyncweb.main import load_config

H200 = 143_771_287_552  # torch.cuda.get_device_properties(0).total_memory of an H200 (133.9 GiB)
# Qwen3-VL-8B-Instruct's config.json (text: 36 layers, hidden 4096, MLP 12288, 8 KV heads of 128, vocabulary 151936).
QWEN3_VL_8B = ModelShape(
    params=8_767_123_696, layers=36, hidden=4096, intermediate=12288, vocab=151936, kv_heads=8, head_dim=128
)


@pytest.fixture(scope="module")
def recipe_inputs() -> SplitInputs:
    cfg, _ = load_config([f"recipe={VLLM_ONE_GPU_LAYOUT.recipe}"])
    return SplitInputs.from_config(cfg)


@pytest.fixture(scope="module")
def qwen3_tiny() -> ModelShape:
    from verl_asyncweb.backends.tiny_model import build_tiny_model

    return ModelShape.from_pretrained(build_tiny_model(size="qwen3-tiny"))


def test_the_recipe_inputs_are_what_the_run_uses(recipe_inputs):
    # fp32 on both sides, 2 groups x n 2 in flight (sync), verl's 8192-token profiling batch, a 64 MiB bucket.
    assert recipe_inputs == SplitInputs(
        utilization=0.3,
        rollout_dtype_bytes=4,
        trainer_param_bytes=4,
        max_model_len=2096,
        max_num_batched_tokens=8192,
        sequences=4,
        trainer_tokens=8192,
        bucket_bytes=64 << 20,
    )


def test_the_model_shape_counts_the_parameters_of_the_real_model(qwen3_tiny):
    from verl_asyncweb.backends.tiny_model import build_tiny_model

    model = AutoModelForImageTextToText.from_pretrained(build_tiny_model(size="qwen3-tiny"), dtype=torch.float32)
    assert qwen3_tiny.params == sum(p.numel() for p in model.parameters()) > 0
    assert (qwen3_tiny.layers, qwen3_tiny.hidden, qwen3_tiny.kv_heads, qwen3_tiny.head_dim) == (2, 64, 2, 16)


def test_the_tiny_model_fits_on_an_h200_with_the_numbers_worked_out(qwen3_tiny, recipe_inputs):
    split = plan_split(H200, qwen3_tiny, recipe_inputs)
    params = qwen3_tiny.params
    # Trainer: 16 B per fp32 parameter (weight, gradient, two Adam moments); 8192 tokens x (2 layers x (6 x 64 +
    # 3 x 128) fp32 values + 4 x 965 fp32 logits); a CUDA context.
    activations = 8192 * (2 * (6 * 64 + 3 * 128) * 4 + 4 * 965 * 4)
    assert split.trainer == 16 * params + activations + CUDA_PROCESS_BYTES
    # vLLM: fp32 weights, one layer's activations over 8192 tokens, non-torch growth, and the KV cache of 4
    # sequences of 2096 tokens (2 x 2 layers x 2 heads x 16 x 4 B = 512 B per token).
    static = 4 * params + 8192 * (2 * 128 + 4 * 64) * 4 + VLLM_NON_TORCH_BYTES
    assert split.vllm_need == static + 4 * 2096 * 512
    assert split.vllm_pool == math.ceil(0.3 * H200)
    assert split.kv_cache == split.vllm_pool - static > 30 * GIB
    assert split.sync_worker == CUDA_PROCESS_BYTES + (64 << 20)
    low, high = split.fits_between
    assert low == pytest.approx(split.vllm_need / H200)
    expected_high = (H200 - split.trainer - split.sync_worker - CUDA_PROCESS_BYTES - HEADROOM_BYTES) / H200
    assert high == pytest.approx(expected_high)
    assert low < 0.3 < high
    assert "gpu_memory_utilization from 0.008 to 0.957 fits" in split.describe()


def test_a_utilization_that_leaves_the_trainer_no_room_is_refused_naming_the_range(qwen3_tiny, recipe_inputs):
    greedy = SplitInputs(**{**recipe_inputs.__dict__, "utilization": 0.97})
    with pytest.raises(SplitError) as refused:
        plan_split(H200, qwen3_tiny, greedy)
    message = str(refused.value)
    assert message.startswith("the trainer's peak of 1.67 GiB does not fit in the 0.00 GiB left beside vLLM")
    assert message.endswith("(set actor_rollout_ref.rollout.gpu_memory_utilization between 0.008 and 0.957)")


def test_a_pool_too_small_for_the_kv_cache_is_refused(qwen3_tiny, recipe_inputs):
    # On a 16 GiB GPU, 5% is 0.8 GiB: less than vLLM's 1 GiB of non-torch growth alone.
    with pytest.raises(SplitError, match=r"^vLLM's 0.05 x 16.0 GiB = 0.80 GiB cannot hold its 1.02 GiB of weights"):
        plan_split(16 * GIB, qwen3_tiny, SplitInputs(**{**recipe_inputs.__dict__, "utilization": 0.05}))
    assert plan_split(16 * GIB, qwen3_tiny, recipe_inputs).utilization == 0.3


def test_an_8b_model_does_not_fit_one_h200_at_any_utilization(recipe_inputs):
    # fp32 training states alone are 16 B x 8.8e9 = 131 GiB; vLLM's fp32 weights another 33 GiB.
    with pytest.raises(SplitError) as refused:
        plan_split(H200, QWEN3_VL_8B, recipe_inputs)
    assert "no gpu_memory_utilization fits: the model is too large for one GPU of this size" in str(refused.value)
    assert "the trainer's peak of" in str(refused.value)


@pytest.mark.parametrize(
    ("visible", "listed"), [(None, "0,0"), ("", "0,0"), ("3", "3,3"), ("2,5", "2,2"), ("GPU-8f3a", "GPU-8f3a,GPU-8f3a")]
)
def test_the_shared_device_is_the_first_visible_one_listed_once_per_ray_slot(visible, listed):
    assert shared_visible_devices(visible) == listed
