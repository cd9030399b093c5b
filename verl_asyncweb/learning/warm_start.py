"""Supervised warm start on recorded demonstrations: a small loop over the same HF model classes verl trains.

``python -m verl_asyncweb.learning.warm_start --demos DIR --out MODEL_DIR --steps 300``

verl's SFT trainer reads single-turn or chat datasets through its own multi-modal dataset; our demonstrations
are per-step prompts that the agent loop rebuilds from episode state (one sample per step, screenshots by
file), so a plain loop is the shorter path: each step-sample is tokenised exactly as the ``web_agent`` loop
tokenises it (the processor's chat template with the generation prompt, the processor's image grid), the
response tokens (plus ``<|im_end|>``) are the labels, and the loss is the token-mean cross-entropy of a batch
of step-samples. The warm start can be left deliberately partial (``--steps``): the learning recipe measures
what RL adds on top of it. The output folder is a complete HF checkpoint (weights, processor) plus
``warm_start.json`` (demonstrations, steps, loss curve, time) and a copy of the demonstrations' manifest
(:data:`DEMOS_MANIFEST_FILE`: their instances and prompt settings), so that the folder alone says what it was
trained on wherever it is copied.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from verl_asyncweb.learning.demos import MANIFEST_FILE, load_demos

logger = logging.getLogger(__name__)

WARM_START_FILE = "warm_start.json"
DEMOS_MANIFEST_FILE = "demos_manifest.json"
"""The demonstrations' manifest, copied into the warm start's folder."""


def prompt_builder(processor: Any, model_type: str) -> Any:
    """verl's Continuous Token builder for this model: the one the agent loop renders its prompts with."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    return create_continuous_token_builder(
        processor.tokenizer,
        hf_model_type=model_type,
        chat_template_kwargs={},
        mm_processor_kwargs={},
        processor=processor,
    )


def step_sample(processor: Any, builder: Any, demo: dict, demo_dir: Path) -> dict[str, torch.Tensor]:
    """Model inputs and labels of one demonstration step: loss only on the response and its end token.

    The prompt is rendered by verl's builder exactly as ``WebAgentLoop`` renders it for generation; the pixels
    come from the processor's image processor, as the ``hf`` server and the trainer build them.
    """
    from PIL import Image

    images = [Image.open(demo_dir / name).convert("RGB") for name in demo["images"]]
    prompt_ids = builder.build_initial_tokens(demo["messages"], images=images)
    tokenizer = processor.tokenizer
    response = tokenizer.encode(demo["response"], add_special_tokens=False) + [tokenizer.eos_token_id]
    input_ids = torch.tensor([list(prompt_ids) + response])
    labels = torch.tensor([[-100] * len(prompt_ids) + response])
    sample = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
    if images:
        pixels = processor.image_processor(images=images, return_tensors="pt")
        sample["pixel_values"] = pixels["pixel_values"]
        sample["image_grid_thw"] = pixels["image_grid_thw"]
        sample["mm_token_type_ids"] = torch.tensor(processor.create_mm_token_type_ids(input_ids.tolist()))
    return sample


def response_nll(model: Any, sample: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Summed negative log-likelihood of the labelled tokens and their count."""
    labels = sample["labels"]
    inputs = {key: value for key, value in sample.items() if key != "labels"}
    logits = model(**inputs).logits[0, :-1].float()
    targets = labels[0, 1:]
    mask = targets != -100
    nll = torch.nn.functional.cross_entropy(logits[mask], targets[mask], reduction="sum")
    return nll, int(mask.sum())


def warm_start(
    base_model: str | Path,
    demo_dir: str | Path,
    out_dir: str | Path,
    steps: int,
    batch_size: int = 4,
    lr: float = 1e-3,
    seed: int = 0,
) -> dict[str, Any]:
    """Train ``base_model`` on the demonstrations for ``steps`` optimizer steps; write the checkpoint to ``out_dir``.

    Args:
        base_model: HF checkpoint folder to start from.
        demo_dir: Folder written by :mod:`verl_asyncweb.learning.demos`.
        out_dir: Output checkpoint folder.
        steps: Optimizer steps (each over ``batch_size`` step-samples drawn without replacement per epoch).
        batch_size: Step-samples per optimizer step (token-mean loss over the batch).
        lr: AdamW learning rate (constant after a 10-step warm-up).
        seed: Seed of sample order and initialisation of the optimizer state.

    Returns:
        The record written to ``warm_start.json``.
    """
    from transformers import AutoModelForImageTextToText, AutoProcessor

    demo_dir, out_dir = Path(demo_dir), Path(out_dir)
    demos = load_demos(demo_dir)
    if not demos:
        raise ValueError(f"{demo_dir} holds no demonstration steps")
    torch.manual_seed(seed)
    processor = AutoProcessor.from_pretrained(base_model)
    builder = prompt_builder(processor, json.loads((Path(base_model) / "config.json").read_text())["model_type"])
    model = AutoModelForImageTextToText.from_pretrained(base_model, dtype=torch.float32)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))
    order: list[int] = []
    rng = random.Random(seed)
    losses: list[float] = []
    started = time.time()
    for _ in tqdm(range(steps), desc="warm start", unit="step"):
        batch = []
        for _ in range(batch_size):
            if not order:
                order = list(range(len(demos)))
                rng.shuffle(order)
            batch.append(step_sample(processor, builder, demos[order.pop()], demo_dir))
        total, count = torch.zeros(()), 0
        for sample in batch:
            nll, tokens = response_nll(model, sample)
            total, count = total + nll, count + tokens
        loss = total / max(count, 1)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(round(loss.item(), 4))
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    processor.save_pretrained(out_dir)
    manifest_path = demo_dir / MANIFEST_FILE
    record = {
        "base_model": str(base_model),
        "demos": str(demo_dir),
        "demo_steps": len(demos),
        "demo_episodes": json.loads(manifest_path.read_text())["episodes"] if manifest_path.exists() else None,
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "losses": losses,
        "train_s": round(time.time() - started, 1),
    }
    (out_dir / WARM_START_FILE).write_text(json.dumps(record, indent=1))
    if manifest_path.exists():
        shutil.copyfile(manifest_path, out_dir / DEMOS_MANIFEST_FILE)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.learning.warm_start", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--demos", required=True, help="folder written by verl_asyncweb.learning.demos")
    parser.add_argument("--out", required=True, help="output checkpoint folder")
    parser.add_argument("--base", default=None, help="base checkpoint (default: the offline model of --size)")
    parser.add_argument("--size", default="small", help="offline model size when --base is not given")
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps (a partial warm start: fewer)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.steps < 1 or args.batch_size < 1:
        raise SystemExit(f"--steps and --batch-size must be >= 1, got {args.steps} and {args.batch_size}")
    base = args.base
    if base is None:
        from verl_asyncweb.backends.tiny_model import build_tiny_model

        base = build_tiny_model(size=args.size)
    record = warm_start(base, args.demos, args.out, args.steps, args.batch_size, args.lr, args.seed)
    print(
        f"warm start: {record['steps']} steps on {record['demo_steps']} demonstration steps in {record['train_s']} s, "
        f"loss {record['loss_first']} -> {record['loss_last']}; checkpoint at {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
