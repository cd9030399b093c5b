"""The trainer masks what the rollout servers never sample: the trained policy is the sampled one (issue #36, 3)."""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from verl_asyncweb.agent.loop import drop_dangling_vision_start, vision_start_token_id
from verl_asyncweb.algo.sampler_mask import TRAINER_MASKED_LOGIT, banned_token_ids, install_trainer_mask, mask_logits

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def tiny(tiny_model_path):
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_path, dtype=torch.float32)
    return model, AutoProcessor.from_pretrained(tiny_model_path)


def test_the_banned_ids_are_the_placeholders_and_the_tail_beyond_the_tokenizer(tiny):
    model, processor = tiny
    placeholders = sorted([model.config.image_token_id, model.config.video_token_id])
    assert banned_token_ids(processor, 965, 965) == placeholders
    assert banned_token_ids(processor, 963, 965) == sorted({*placeholders, 963, 964})
    assert banned_token_ids(None, 10, 12) == [10, 11], "text-only models: only the tail"


def test_the_masked_trainer_model_is_the_renormalised_sampler_distribution_and_trains_no_banned_logit(tiny):
    model, processor = tiny
    banned = banned_token_ids(processor, len(processor.tokenizer), model.get_output_embeddings().out_features)
    input_ids = torch.randint(0, 900, (2, 12))
    with torch.no_grad():
        unmasked = torch.log_softmax(model(input_ids=input_ids).logits / TEMPERATURE, dim=-1)
    handle = install_trainer_mask(model, banned)
    try:
        logits = model(input_ids=input_ids).logits
        masked = torch.log_softmax(logits / TEMPERATURE, dim=-1)
        kept = [token for token in range(logits.shape[-1]) if token not in banned]
        kept_mass = unmasked[..., kept].exp().sum(-1, keepdim=True)
        torch.testing.assert_close(masked[..., kept], unmasked[..., kept] - kept_mass.log(), atol=1e-5, rtol=0)
        assert (logits[..., banned] == TRAINER_MASKED_LOGIT).all()
        assert (masked[..., banned].exp() == 0).all()
        probs = masked.exp()
        entropy = -(probs * masked).sum(-1)
        assert torch.isfinite(entropy).all(), "a finite mask keeps verl's entropy (sum p * logit) finite"
        # Teacher-forced log-prob of an image placeholder at a prompt position stays finite (masked from the loss).
        assert torch.isfinite(masked[..., banned]).all()
        model.zero_grad()
        masked.gather(-1, input_ids.roll(-1, dims=1).unsqueeze(-1)).sum().backward()
        head_grad = model.get_output_embeddings().weight.grad
        assert head_grad[banned].abs().max() == 0, "no gradient moves mass onto a token the sampler cannot pick"
        assert head_grad[kept].abs().max() > 0
        in_place = head_grad.clone()
    finally:
        handle.remove()
        model.zero_grad()
    # The hook masks in place (no copy of the logits): the gradients are those of masking a copy.
    reference = torch.log_softmax(mask_logits(model(input_ids=input_ids).logits, banned) / TEMPERATURE, dim=-1)
    reference.gather(-1, input_ids.roll(-1, dims=1).unsqueeze(-1)).sum().backward()
    torch.testing.assert_close(model.get_output_embeddings().weight.grad, in_place, atol=1e-6, rtol=1e-5)
    model.zero_grad()


def test_a_response_cut_after_vision_start_drops_it_so_verls_rope_index_reads_inside_the_sample(tiny):
    from verl.models.transformers.qwen2_vl import get_rope_index

    model, processor = tiny
    vision_start = vision_start_token_id(processor)
    assert vision_start == model.config.vision_start_token_id
    vision_end = processor.tokenizer.convert_tokens_to_ids("<|vision_end|>")
    prompt = [vision_start, *[processor.image_token_id] * 4, vision_end, 5]
    grid = torch.tensor([[1, 4, 4]])  # 16 patches, merged 2 x 2: four placeholders
    response, log_probs = [7, 8, vision_start], [-0.1, -0.2, -0.3]

    def rope(ids: list[int]) -> torch.Tensor:
        sample = torch.tensor(ids)
        return get_rope_index(processor, sample, image_grid_thw=grid, attention_mask=torch.ones_like(sample))

    with pytest.raises(IndexError):
        rope(prompt + response)
    kept, kept_log_probs = drop_dangling_vision_start(response, log_probs, vision_start)
    assert (kept, kept_log_probs) == ([7, 8], [-0.1, -0.2])
    assert rope(prompt + kept).shape == (3, len(prompt) + 2)
    inside = [7, vision_start, 8]
    assert drop_dangling_vision_start(inside, log_probs, vision_start) == (inside, log_probs)
    assert rope(prompt + inside).shape == (3, len(prompt) + 3), "a vision start inside the response is harmless"


def test_the_trainer_workers_of_a_run_get_the_mask(tmp_path: Path):
    from verl_asyncweb.algo.sampler_mask import SAMPLER_MASK_ENV
    from verl_asyncweb.main import worker_env
    from verl_asyncweb.run_folder import RunFolder

    env = worker_env(None, tmp_path / "metrics.jsonl", RunFolder(tmp_path))
    assert env[SAMPLER_MASK_ENV] == "1"
