"""The offline tiny Qwen-VL models: deterministic tokenizer, Qwen-VL special tokens and chat template, and the
Qwen3-VL family of the GPU recipes."""

import hashlib

import pytest
import torch
from PIL import Image
from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

from verl_asyncweb.backends.tiny_model import SPECIAL_TOKENS, build_tiny_model

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def _digests(path):
    return {name: hashlib.sha256((path / name).read_bytes()).hexdigest() for name in TOKENIZER_FILES}


def test_rebuilding_gives_byte_identical_tokenizer_files(tmp_path, tiny_model_path):
    rebuilt = build_tiny_model(tmp_path / "again", force=True)
    assert _digests(rebuilt) == _digests(tiny_model_path)


def test_newline_is_one_token_and_specials_are_single_tokens(tiny_model_path):
    tokenizer = AutoProcessor.from_pretrained(tiny_model_path).tokenizer
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1
    for token in SPECIAL_TOKENS:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token


def test_config_ids_match_tokenizer_and_chat_template_renders_image_pad(tiny_model_path):
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    config = AutoConfig.from_pretrained(tiny_model_path)
    assert config.model_type == "qwen2_5_vl"
    assert config.image_token_id == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert "<|vision_start|><|image_pad|><|vision_end|>hi<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_weights_are_small(tiny_model_path):
    assert (tiny_model_path / "model.safetensors").stat().st_size < 5 * 1024 * 1024


@pytest.fixture(scope="module")
def qwen3_tiny_path():
    return build_tiny_model(size="qwen3-tiny")


def test_qwen3_tiny_is_the_gpu_recipes_family_and_sees_images(qwen3_tiny_path):
    config = AutoConfig.from_pretrained(qwen3_tiny_path)
    processor = AutoProcessor.from_pretrained(qwen3_tiny_path)
    assert config.model_type == "qwen3_vl" and type(processor).__name__ == "Qwen3VLProcessor"
    assert config.vision_config.patch_size == 16 and config.vision_config.deepstack_visual_indexes == [0]
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "click"}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[Image.new("RGB", (480, 320), "white")], return_tensors="pt")
    # 480x320 in 32-pixel merged tokens: a (1, 20, 30) grid of 16-pixel patches, 150 image tokens.
    assert inputs["image_grid_thw"].tolist() == [[1, 20, 30]]
    assert int((inputs["input_ids"] == config.image_token_id).sum()) == 150
    model = AutoModelForImageTextToText.from_pretrained(qwen3_tiny_path)
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape[:2] == inputs["input_ids"].shape and torch.isfinite(logits).all()
