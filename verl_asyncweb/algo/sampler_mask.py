"""The tokens the rollout servers never sample, masked in the trainer too: the trained policy is the sampled one.

verl's vLLM server sets the logits of the vision placeholders (``<|image_pad|>``, ``<|video_pad|>``: sampling one
breaks the pairing of placeholders with image grids) and of the ids beyond the tokenizer to -inf before sampling,
and reports log-probs of that masked distribution. verl's trainer computes pi_prox and pi_theta over the whole
vocabulary, so every rollout token's log-prob differs from the trainer's by log(kept mass): negligible for an 8B
model, ~2e-3 per token for the offline tiny models (vocabulary 965), twice ``gpu_check``'s agreement bound.

The same ids are masked on both sides here: the ``hf`` server samples from and reports the masked distribution
(as vLLM does), and a forward hook on the trainer model's output embeddings masks them in every logit the actor
(and the reference model) computes, so pi_prox, pi_theta and pi_rollout are one distribution and no gradient
moves mass onto a token the sampler can never pick. Installed by ``verl_compat``'s ``sampler_mask_in_trainer``
in the workers of runs started by ``verl_asyncweb.main`` (which sets :data:`SAMPLER_MASK_ENV`).
"""

from __future__ import annotations

import os
from typing import Any

import torch

SAMPLER_MASK_ENV = "VERL_ASYNCWEB_SAMPLER_MASK"
# Finite, unlike vLLM's -inf: the trainer also reads log-probs at prompt positions whose next token is an image
# placeholder (masked out of the loss afterwards), and entropy sums p * logit; exp(-1e4) is 0 in every float dtype.
TRAINER_MASKED_LOGIT = -1.0e4


def banned_token_ids(processor: Any, tokenizer_len: int, vocab_size: int) -> list[int]:
    """The ids verl's vLLM server never samples: the vision placeholders of ``processor`` and ``[tokenizer_len,
    vocab_size)``."""
    from verl.workers.rollout.utils import get_vision_placeholder_token_ids

    placeholders = get_vision_placeholder_token_ids(processor) if processor is not None else []
    return sorted({*placeholders, *range(tokenizer_len, vocab_size)})


def mask_logits(logits: torch.Tensor, banned_ids: list[int], value: float = float("-inf")) -> torch.Tensor:
    """``logits`` (vocabulary last) with the banned ids set to ``value``; out of place, so autograd gives them no
    gradient."""
    if not banned_ids:
        return logits
    index = torch.tensor(banned_ids, dtype=torch.long, device=logits.device)
    return logits.index_fill(-1, index, value)


def install_trainer_mask(module: torch.nn.Module, banned_ids: list[int]) -> torch.utils.hooks.RemovableHandle:
    """Mask ``banned_ids`` in every logit ``module``'s output embeddings produce (verl's non-fused forward calls
    ``lm_head``; its fused kernels read the weight directly, which ``main`` refuses together with this mask)."""
    head = module.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(module).__name__} has no output embeddings to mask the sampler's banned tokens on")
    indices: dict[torch.device, torch.Tensor] = {}  # built once per device, as verl's vLLM patch does

    def mask_output(_head: torch.nn.Module, _inputs: tuple, logits: torch.Tensor) -> None:
        # In place, as in verl's vLLM patch: a copy would double the largest activation of the step (an 8B model's
        # logits over a 32k-token micro-batch are ~10 GB in bf16). The linear layer's backward does not read its
        # output, and autograd gives the filled entries no gradient.
        index = indices.get(logits.device)
        if index is None:
            index = indices[logits.device] = torch.tensor(banned_ids, dtype=torch.long, device=logits.device)
        logits.index_fill_(-1, index, TRAINER_MASKED_LOGIT)

    return head.register_forward_hook(mask_output)


def mask_built_model(module: torch.nn.Module, model_config: Any) -> bool:
    """Mask the sampler's banned ids on a model verl's engine built from ``model_config`` (its ``HFModelConfig``)
    when this process belongs to a run that asks for it (:data:`SAMPLER_MASK_ENV`); True when masked."""
    if os.environ.get(SAMPLER_MASK_ENV) != "1" or model_config.model_type != "language_model":
        return False
    if model_config.tokenizer is None:
        return False
    vocab_size = module.get_output_embeddings().out_features
    install_trainer_mask(module, banned_token_ids(model_config.processor, len(model_config.tokenizer), vocab_size))
    return True
