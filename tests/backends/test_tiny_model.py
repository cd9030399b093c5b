"""The offline tiny Qwen2.5-VL: deterministic tokenizer, Qwen-VL special tokens and chat template."""

import hashlib

from transformers import AutoConfig, AutoProcessor

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
