"""The FSDP2 trainer and a vLLM rollout server on one GPU: Ray placement and the GPU memory split.

**Placement.** verl's separate-async trainer always starts a standalone rollout pool beside the trainer's pool
(``rollout.nnodes x n_gpus_per_node`` must be > 0), and each pool reserves whole-GPU placement-group bundles
(``RayResourcePool.get_placement_groups``: ``{"GPU": 1, "CPU": max_colocate_count}``), so on a one-GPU Ray node
the rollout pool never schedules. Instead of changing verl, the recipe gives Ray two GPU slots on the one device:
``ray_init.num_gpus: 2`` with ``CUDA_VISIBLE_DEVICES`` listing the device twice (:func:`shared_visible_devices`).
Ray hands each GPU actor the *listed* id of its slot (``Worker.get_accelerator_ids_for_accelerator_resource``
indexes the list the worker started with), so both the trainer (slot 0) and verl's rollout worker (slot 1) see
``CUDA_VISIBLE_DEVICES=0``, and ``vLLMReplica.launch_servers`` pins the vLLM server to the same id. Actors without
a GPU keep the doubled list, which CUDA reads as no device (they use none).

**Memory.** vLLM takes ``gpu_memory_utilization x total`` for its weights, activations and KV cache and refuses to
start when less is free (vLLM 0.24 ``request_memory``); the trainer, verl's rollout worker (CUDA context and weight
bucket) and vLLM's own CUDA context share the rest. :func:`plan_split` does that arithmetic for a recipe and a
model and refuses a split that does not fit, naming the utilization range that would.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

GIB = 2**30
RAY_GPU_SLOTS = 2
"""Ray GPU slots on the one device: the trainer's pool and the rollout pool take one each."""
CUDA_PROCESS_BYTES = int(1.5 * GIB)
"""A process's CUDA context, cuBLAS workspace and allocator slack: the H200 run of ``gpu_check --one-gpu`` had
1.6 GiB in nvidia-smi for 0.19 GB allocated by the trainer."""
VLLM_NON_TORCH_BYTES = 1 * GIB
"""What vLLM's profiling counts as non-torch growth after its start-up snapshot (NCCL, cuBLAS, graph pools)."""
HEADROOM_BYTES = 1 * GIB
"""Left free on the device on top of every estimate."""
DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2}


class SplitError(ValueError):
    """The trainer and the rollout server do not both fit on the GPU."""


def shared_visible_devices(visible: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for the shared-GPU recipe: the first visible device listed once per Ray slot.

    ``None`` or empty (every device visible) means device 0; ``"3"`` or ``"3,5"`` give ``"3,3"``.
    """
    first = (visible or "").split(",")[0].strip() or "0"
    return ",".join([first] * RAY_GPU_SLOTS)


@dataclass(frozen=True)
class ModelShape:
    """What the memory split needs to know about the model.

    Attributes:
        params: parameters of the whole model (vision tower included).
        layers, hidden, intermediate, vocab: the language model's sizes (activations and logits).
        kv_heads, head_dim: its attention's key/value sizes (the KV cache).
    """

    params: int
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    kv_heads: int
    head_dim: int

    @classmethod
    def from_pretrained(cls, path: str | Path) -> ModelShape:
        """Read a Hugging Face model folder: sizes from ``config.json``, parameters counted on the meta device."""
        import torch
        from transformers import AutoConfig, AutoModelForImageTextToText

        config = AutoConfig.from_pretrained(path)
        with torch.device("meta"):
            model = AutoModelForImageTextToText.from_config(config)
        text = json.loads((Path(path) / "config.json").read_text()).get("text_config") or config.to_dict()
        return cls(
            params=sum(p.numel() for p in model.parameters()),
            layers=text["num_hidden_layers"],
            hidden=text["hidden_size"],
            intermediate=text["intermediate_size"],
            vocab=text["vocab_size"],
            kv_heads=text["num_key_value_heads"],
            head_dim=text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"],
        )


@dataclass(frozen=True)
class SplitInputs:
    """The recipe's numbers that size the split (:meth:`from_config`).

    Attributes:
        utilization: vLLM's ``gpu_memory_utilization``.
        rollout_dtype_bytes, trainer_param_bytes: bytes per weight in vLLM and in the actor's compute dtype.
        max_model_len, max_num_batched_tokens: vLLM's longest sequence and its profiling batch.
        sequences: sequences in flight on the server (groups in flight x ``rollout.n``, at most ``max_num_seqs``).
        trainer_tokens: the actor's micro-batch token budget (``ppo_max_token_len_per_gpu``).
        bucket_bytes: verl's weight-sync bucket on the GPU (``update_weights_bucket_megabytes``).
    """

    utilization: float
    rollout_dtype_bytes: int
    trainer_param_bytes: int
    max_model_len: int
    max_num_batched_tokens: int
    sequences: int
    trainer_tokens: int
    bucket_bytes: int

    @classmethod
    def from_config(cls, cfg) -> SplitInputs:
        rollout, actor = cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.actor
        groups = cfg.data.train_batch_size
        if cfg.asyncweb.rollout_mode != "sync":
            groups *= cfg.asyncweb.staleness + 1
        mixed = actor.fsdp_config.get("mixed_precision") or {}
        return cls(
            utilization=float(rollout.gpu_memory_utilization),
            rollout_dtype_bytes=DTYPE_BYTES[str(rollout.dtype)],
            trainer_param_bytes=DTYPE_BYTES[str(mixed.get("param_dtype", "bf16"))],
            max_model_len=int(rollout.max_model_len),
            max_num_batched_tokens=int(rollout.max_num_batched_tokens),
            sequences=min(groups * rollout.n, rollout.max_num_seqs),
            trainer_tokens=int(actor.ppo_max_token_len_per_gpu),
            bucket_bytes=int(rollout.checkpoint_engine.update_weights_bucket_megabytes) << 20,
        )


@dataclass(frozen=True)
class GpuSplit:
    """Bytes of the one GPU for each process, from :func:`plan_split`.

    Attributes:
        total: the GPU's memory.
        utilization: vLLM's share (``gpu_memory_utilization``).
        trainer: the FSDP2 trainer's peak (weights, gradients, Adam, activations, CUDA context).
        sync_worker: verl's rollout worker (CUDA context and weight bucket).
        vllm_pool: vLLM's pool (``utilization x total``; its CUDA context comes on top).
        vllm_need: what vLLM's pool must hold besides KV cache, plus the KV cache of every sequence in flight.
        kv_cache: the KV cache vLLM will find in its pool.
        fits_between: the utilizations for which both sides fit (low > high when none does).
    """

    total: int
    utilization: float
    trainer: int
    sync_worker: int
    vllm_pool: int
    vllm_need: int
    kv_cache: int
    fits_between: tuple[float, float]

    def describe(self) -> str:
        low, high = self.fits_between
        return (
            f"{self.total / GIB:.1f} GiB: vLLM {self.utilization:g} x total = {self.vllm_pool / GIB:.1f} GiB "
            f"(needs {self.vllm_need / GIB:.2f}, KV cache {self.kv_cache / GIB:.2f}; CUDA context "
            f"{CUDA_PROCESS_BYTES / GIB:g} on top), trainer "
            f"{self.trainer / GIB:.2f}, weight-sync worker {self.sync_worker / GIB:.2f} GiB; "
            f"gpu_memory_utilization from {low:.3f} to {high:.3f} fits"
        )


def trainer_peak_bytes(model: ModelShape, inputs: SplitInputs) -> int:
    """FSDP2 on one rank: fp32 master weights, gradients and Adam's two moments (16 B per parameter) plus the
    compute copy when it is not fp32, the activations of one micro-batch kept for backward (per token and layer:
    ~6 x hidden + 3 x intermediate values) and its fp32 logits (logits, log-softmax, their gradient, entropy:
    4 x vocab per token), and a CUDA context. The vision tower's activations are left to the headroom."""
    states = model.params * (16 + (inputs.trainer_param_bytes if inputs.trainer_param_bytes != 4 else 0))
    per_token = model.layers * (6 * model.hidden + 3 * model.intermediate) * inputs.trainer_param_bytes
    per_token += 4 * model.vocab * 4
    return states + inputs.trainer_tokens * per_token + CUDA_PROCESS_BYTES


def vllm_need_bytes(model: ModelShape, inputs: SplitInputs) -> tuple[int, int]:
    """(what vLLM's pool holds besides KV cache, the KV cache of every sequence in flight at full length).

    Besides KV cache: the weights in the rollout dtype, the profiling forward of ``max_num_batched_tokens``
    (~2 x intermediate + 4 x hidden values per token, the activations of one layer alive at a time) and the
    non-torch growth vLLM measures."""
    weights = model.params * inputs.rollout_dtype_bytes
    activations = inputs.max_num_batched_tokens * (2 * model.intermediate + 4 * model.hidden)
    activations *= inputs.rollout_dtype_bytes
    kv_per_token = 2 * model.layers * model.kv_heads * model.head_dim * inputs.rollout_dtype_bytes
    kv = inputs.sequences * inputs.max_model_len * kv_per_token
    return weights + activations + VLLM_NON_TORCH_BYTES, kv


def plan_split(total: int, model: ModelShape, inputs: SplitInputs) -> GpuSplit:
    """Split ``total`` bytes between vLLM and the trainer; raises :class:`SplitError` when they do not fit.

    Two conditions, from vLLM's start-up and the training step that follows it: vLLM's pool
    (``utilization x total``) holds its weights, activations and the KV cache of every sequence in flight, and what
    is left once vLLM, verl's rollout worker and the headroom are counted holds the trainer's peak (the trainer
    holds part of it when vLLM starts, so vLLM's free-memory check at start-up is implied).
    """
    static, kv_need = vllm_need_bytes(model, inputs)
    trainer = trainer_peak_bytes(model, inputs)
    sync_worker = CUDA_PROCESS_BYTES + inputs.bucket_bytes
    pool = math.ceil(total * inputs.utilization)
    others = CUDA_PROCESS_BYTES + sync_worker + HEADROOM_BYTES
    low = (static + kv_need) / total
    high = (total - others - trainer) / total
    split = GpuSplit(
        total=total,
        utilization=inputs.utilization,
        trainer=trainer,
        sync_worker=sync_worker,
        vllm_pool=pool,
        vllm_need=static + kv_need,
        kv_cache=pool - static,
        fits_between=(low, high),
    )
    problems = []
    if pool < static + kv_need:
        problems.append(
            f"vLLM's {inputs.utilization:g} x {total / GIB:.1f} GiB = {pool / GIB:.2f} GiB cannot hold its "
            f"{static / GIB:.2f} GiB of weights and activations and {kv_need / GIB:.2f} GiB of KV cache for "
            f"{inputs.sequences} sequences of {inputs.max_model_len} tokens"
        )
    if total - pool - others < trainer:
        problems.append(
            f"the trainer's peak of {trainer / GIB:.2f} GiB does not fit in the "
            f"{max(total - pool - others, 0) / GIB:.2f} GiB left beside vLLM, the weight-sync worker and "
            f"{HEADROOM_BYTES / GIB:g} GiB of headroom"
        )
    if problems:
        advice = (
            f"set actor_rollout_ref.rollout.gpu_memory_utilization between {low:.3f} and {high:.3f}"
            if low <= high
            else "no gpu_memory_utilization fits: the model is too large for one GPU of this size"
        )
        raise SplitError("; ".join(problems) + f" ({advice})")
    return split
