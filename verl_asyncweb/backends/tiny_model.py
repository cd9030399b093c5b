"""Small Qwen-VL models built offline: deterministic byte-level BPE tokenizer, random weights, Qwen-VL processor.

They stand in for a real checkpoint on machines without a GPU or a model hub (CI, laptops). Nothing is downloaded:
the tokenizer is trained from ``corpus/web_agent_corpus.txt`` shipped in this package, the weights are drawn
from a fixed seed. Sizes (:data:`MODEL_SIZES`): ``tiny`` (Qwen2.5-VL, hidden 64, 2 layers: the pipeline's smoke
model), ``small`` (hidden 256, 4 layers, a wider vision tower: large enough to learn MiniWoB++ tasks from
demonstrations and RL on a CPU) and ``qwen3-tiny`` (the GPU recipes' family, Qwen3-VL: 16-pixel patches, deepstack
visual features, interleaved mrope; hidden 64, 2 layers), and ``tiny-vllm`` / ``qwen3-tiny-vllm``, the same two
with 32-wide attention heads, which vLLM's CPU attention serves. ``python -m verl_asyncweb.backends.tiny_model [DIR]
[--size small]`` builds one and prints the path.
"""

import argparse
import hashlib
import logging
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

logger = logging.getLogger(__name__)

CORPUS_FILE = "web_agent_corpus.txt"
DEFAULT_CACHE_DIR = Path(os.environ.get("VERL_ASYNCWEB_CACHE", Path.home() / ".cache" / "verl_asyncweb"))

# Qwen-VL special tokens, in Qwen's order, so prompts and chat templates read exactly as for a real checkpoint.
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
]

# Qwen2-VL chat template semantics: a default system turn, images/videos as pad tokens between vision markers.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class TinyModelSpec:
    """Sizes of the tiny model; the defaults give ~2.5 MB of weights and sub-second train steps on 2 cores."""

    vocab_size: int = 4096
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vision_depth: int = 2
    vision_hidden_size: int = 32
    vision_intermediate_size: int = 64
    vision_num_heads: int = 2
    max_pixels: int = 256 * 28 * 28
    min_pixels: int = 4 * 28 * 28
    max_position_embeddings: int = 32768
    seed: int = 0
    family: str = "qwen2_5_vl"

    def fingerprint(self) -> str:
        corpus = resources.files(__package__).joinpath("corpus", CORPUS_FILE).read_bytes()
        text = repr(self).encode() + corpus + CHAT_TEMPLATE.encode()
        return hashlib.sha256(text).hexdigest()[:16]


MODEL_SIZES = {
    "tiny": TinyModelSpec(),
    "small": TinyModelSpec(
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        vision_hidden_size=64,
        vision_intermediate_size=128,
    ),
    # Qwen3-VL merges 2x2 patches of 16 pixels: the same pixel budget in 32-pixel tokens.
    "qwen3-tiny": TinyModelSpec(family="qwen3_vl", max_pixels=256 * 32 * 32, min_pixels=4 * 32 * 32),
    # vLLM's CPU attention takes heads of 32 and more (it refuses 16: "Unsupported CPU attention configuration"):
    # the same weight shapes as tiny and qwen3-tiny, split into 2 query heads and 1 KV head of 32.
    "tiny-vllm": TinyModelSpec(num_attention_heads=2, num_key_value_heads=1),
    "qwen3-tiny-vllm": TinyModelSpec(
        family="qwen3_vl",
        max_pixels=256 * 32 * 32,
        min_pixels=4 * 32 * 32,
        num_attention_heads=2,
        num_key_value_heads=1,
    ),
}
"""Named model sizes; every size shares the tokenizer and processor settings."""


FAMILY_DIR_NAMES = {"qwen2_5_vl": "qwen2.5-vl", "qwen3_vl": "qwen3-vl"}


def model_spec(size: str) -> TinyModelSpec:
    """The spec of a named size; raises ``ValueError`` listing the sizes."""
    if size not in MODEL_SIZES:
        raise ValueError(f"model size must be one of {list(MODEL_SIZES)}, got {size!r}")
    return MODEL_SIZES[size]


def default_model_dir(size: str = "tiny") -> Path:
    """Where :func:`build_tiny_model` puts a named size in the cache (its name carries the spec's fingerprint)."""
    spec = model_spec(size)
    return DEFAULT_CACHE_DIR / f"{size}-{FAMILY_DIR_NAMES[spec.family]}-{spec.fingerprint()}"


def train_tokenizer(spec: TinyModelSpec):
    """Train the byte-level BPE on the shipped corpus; the same corpus and spec give byte-identical files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = resources.files(__package__).joinpath("corpus", CORPUS_FILE).read_text(encoding="utf-8")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size - len(SPECIAL_TOKENS),
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus.splitlines(keepends=True), trainer=trainer)
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return tokenizer


def build_tiny_model(
    output_dir: str | Path | None = None, spec: TinyModelSpec | None = None, force: bool = False, size: str = "tiny"
) -> Path:
    """Write tokenizer, processor and randomly initialised weights of a small Qwen-VL to ``output_dir``.

    Args:
        output_dir: target folder; defaults to ``$VERL_ASYNCWEB_CACHE/<size>-qwen2.5-vl-<fingerprint>``.
        spec: model sizes; defaults to the named ``size``.
        force: rebuild even if a complete build is already there.
        size: a name of :data:`MODEL_SIZES`, used when ``spec`` is not given.

    Returns:
        The folder, loadable with ``AutoProcessor.from_pretrained`` and
        ``AutoModelForImageTextToText.from_pretrained``.
    """
    spec = spec or model_spec(size)
    output_dir = Path(output_dir) if output_dir else default_model_dir(size)
    marker = output_dir / ".complete"
    if marker.exists() and not force:
        return output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    _write_processor(output_dir, spec)
    _write_weights(output_dir, spec)
    marker.write_text(spec.fingerprint() + "\n")
    logger.info("built %s %s at %s", size, spec.family, output_dir)
    return output_dir


def _write_processor(output_dir: Path, spec: TinyModelSpec) -> None:
    from transformers import PreTrainedTokenizerFast, Qwen2VLImageProcessor

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_tokenizer(spec),
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        model_max_length=spec.max_position_embeddings,
        chat_template=CHAT_TEMPLATE,
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
    )
    if spec.family == "qwen3_vl":
        from transformers import Qwen3VLProcessor
        from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

        size = {"shortest_edge": spec.min_pixels, "longest_edge": spec.max_pixels}
        patches = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2}
        image_processor = Qwen2VLImageProcessor(size=size, image_mean=[0.5] * 3, image_std=[0.5] * 3, **patches)
        video_processor = Qwen3VLVideoProcessor(size=size, **patches)
        processor_cls = Qwen3VLProcessor
    else:
        from transformers import Qwen2_5_VLProcessor, Qwen2VLVideoProcessor

        image_processor = Qwen2VLImageProcessor(min_pixels=spec.min_pixels, max_pixels=spec.max_pixels)
        video_processor = Qwen2VLVideoProcessor(min_pixels=spec.min_pixels, max_pixels=spec.max_pixels)
        processor_cls = Qwen2_5_VLProcessor
    processor = processor_cls(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(output_dir)


def _write_weights(output_dir: Path, spec: TinyModelSpec) -> None:
    import torch
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    head_dim = spec.hidden_size // spec.num_attention_heads
    # mrope splits head_dim / 2 rotary frequencies over (temporal, height, width).
    half = head_dim // 2
    mrope_section = [half - 2 * (half // 3), half // 3, half // 3]
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in SPECIAL_TOKENS}
    text_config = {
        "vocab_size": len(tokenizer),
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "max_position_embeddings": spec.max_position_embeddings,
        "pad_token_id": ids["<|endoftext|>"],
    }
    vision_config = {
        "depth": spec.vision_depth,
        "hidden_size": spec.vision_hidden_size,
        "intermediate_size": spec.vision_intermediate_size,
        "num_heads": spec.vision_num_heads,
        "out_hidden_size": spec.hidden_size,
    }
    vision_tokens = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }
    if spec.family == "qwen3_vl":
        from transformers import Qwen3VLConfig as config_cls
        from transformers import Qwen3VLForConditionalGeneration as model_cls

        text_config.update(
            head_dim=head_dim,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 5000000.0,
                "mrope_section": mrope_section,
                "mrope_interleaved": True,
            },
        )
        # A square grid of learned position embeddings (interpolated to each image) and one deepstack layer.
        vision_config.update(num_position_embeddings=64, deepstack_visual_indexes=[0])
    else:
        from transformers import Qwen2_5_VLConfig as config_cls
        from transformers import Qwen2_5_VLForConditionalGeneration as model_cls

        text_config.update(
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": mrope_section},
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            tie_word_embeddings=True,
        )
        vision_config.update(fullatt_block_indexes=[spec.vision_depth - 1])
    config = config_cls(text_config=text_config, vision_config=vision_config, tie_word_embeddings=True, **vision_tokens)
    torch.manual_seed(spec.seed)
    model = model_cls(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"], do_sample=True
    )
    model.save_pretrained(output_dir, safe_serialization=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.backends.tiny_model", description=__doc__.splitlines()[0]
    )
    parser.add_argument("output_dir", nargs="?", default=None, help="target folder (default: the cache folder)")
    parser.add_argument("--force", action="store_true", help="rebuild even if already built")
    parser.add_argument("--size", default="tiny", choices=sorted(MODEL_SIZES), help="model size (default: tiny)")
    args = parser.parse_args(argv)
    print(build_tiny_model(args.output_dir, force=args.force, size=args.size))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
