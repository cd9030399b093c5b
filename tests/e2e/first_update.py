"""The first-update learning check shared by the hf and vLLM learning runs: a partial warm start of the offline tiny
model on oracle demonstrations of MiniWoB++'s click-test, and what one GRPO update from it did to the first actions
it trained on (the rewarded ones against the failed ones in each task group, read from the run folder)."""

import hashlib
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import torch
from omegaconf import OmegaConf

logger = logging.getLogger(__name__)

TASK = "miniwob:click-test"
INSTANCES = 8
# Partial on purpose: 150 steps gave the tiny model 50% held-out success at temperature 1 (mixed groups).
WARM_START_STEPS = 150
CLICK_TARGET = "coordinate"
# The recipe's 5e-5 keeps a 30-step run's tool-call format; at 2e-4 one update's effect is ~4 sd from zero.
LEARNING_RATE = 2e-4
TRAIN_BATCH_GROUPS = 2  # laptop_learning's data.train_batch_size: step 1 trains on two mixed-outcome groups


def learning_overrides(model: Path, steps: int) -> list[str]:
    """``laptop_learning`` from the warm start ``model`` on click-test, synchronous, a checkpoint every step."""
    return [
        f"actor_rollout_ref.model.path={model}",
        f"asyncweb.tasks.train=[{TASK}]",
        f"asyncweb.agent.click_target={CLICK_TARGET}",
        f"asyncweb.tasks.miniwob_instances={INSTANCES}",
        "asyncweb.rollout_mode=sync",
        f"actor_rollout_ref.actor.optim.lr={LEARNING_RATE}",
        "asyncweb.agent.max_steps=2",
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=1",
    ]


def build_warm_start(base_model: Path, output_dir: Path) -> Path:
    """Oracle demonstrations of click-test and ``WARM_START_STEPS`` supervised steps of ``base_model``, in
    ``output_dir/model``."""
    from verl_asyncweb.learning.demos import record_demos
    from verl_asyncweb.learning.warm_start import warm_start
    from verl_asyncweb.main import load_config
    from verl_asyncweb.task_dataset import load_task_sources

    # Coordinates, not the recipe's element ids: the warm start's calibration (mixed outcomes, ~50% success) was
    # measured with coordinates; on click-test an element id is one constant token.
    _, asyncweb = load_config(["recipe=laptop_learning", f"asyncweb.agent.click_target={CLICK_TARGET}"])
    tasks = load_task_sources([TASK], seed=asyncweb.tasks.seed, miniwob_instances=INSTANCES)
    demos = output_dir / "demos"
    assert record_demos(tasks, asyncweb.agent, asyncweb.env, demos)["episodes"] == INSTANCES
    model = output_dir / "model"
    warm_start(base_model, demos, model, steps=WARM_START_STEPS, batch_size=4, lr=3e-3)
    assert json.loads((model / "warm_start.json").read_text())["steps"] == WARM_START_STEPS
    return model


def _digest(model_dir: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(model_dir.glob("*.safetensors")))).hexdigest()


def _first_steps_by_group(run_dir: Path) -> dict[str, dict[bool, list[dict]]]:
    """The first step of every episode played with weight version 0 in a group of mixed outcomes, by task group and
    outcome, each with the prompt it was sampled for (rebuilt by the agent's own ``step_messages``: instruction,
    screenshot, element list; the first step has no history). In a sync run with dynamic sampling these are the
    groups step 1 trained on: its batch is rolled out with version 0 and only mixed groups are sampled."""
    from verl_asyncweb.agent.loop import EpisodeState, step_messages
    from verl_asyncweb.config.schema import AsyncWebConfig

    agent = AsyncWebConfig.from_config(OmegaConf.load(run_dir / "config.yaml").asyncweb).agent
    groups: dict[str, dict[bool, list[dict]]] = {}
    for line in (run_dir / "episodes" / "episodes.jsonl").read_text().splitlines():
        record = json.loads(line)
        step = record["steps"][0] if record["steps"] else None
        if step is None or step["policy_version"] != 0 or record["env_failed"]:
            continue
        state = EpisodeState(traj_id=record["traj_id"], instruction=record["instruction"])
        observation = SimpleNamespace(screenshot=step["screenshot"], accessibility_text=step["elements"])
        messages, images = step_messages(agent, state, observation)
        group = record["group"]
        outcomes = groups.setdefault(group, {True: [], False: []})
        outcomes[bool(record["success"])].append({"messages": messages, "images": images, "response": step["response"]})
    return {group: outcomes for group, outcomes in groups.items() if outcomes[True] and outcomes[False]}


@torch.no_grad()
def _rewarded_margin(model_dir: Path, groups: dict[str, dict[bool, list[dict]]], image_dir: Path) -> float:
    """Sum over groups of (mean log-prob of the successful first actions - mean of the failed ones) under a
    checkpoint. GRPO raises the first and lowers the second; their shared tokens (the tool-call template) cancel,
    which a mean over the rewarded responses alone does not (it drifted either way over a few steps)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from verl_asyncweb.learning.warm_start import prompt_builder, response_nll, step_sample

    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    builder = prompt_builder(processor, "qwen2_5_vl")

    def mean_logprob(samples: list[dict]) -> float:
        nll = [float(response_nll(model, step_sample(processor, builder, sample, image_dir))[0]) for sample in samples]
        return -sum(nll) / len(nll)

    return sum(mean_logprob(outcomes[True]) - mean_logprob(outcomes[False]) for outcomes in groups.values())


def first_update_effect(run_dir: Path, warm_start_dir: Path) -> float:
    """How much step 1's update raised the rewarded-minus-failed margin of the groups it trained on."""
    step_one = run_dir / "global_step_1" / "actor" / "huggingface"
    assert _digest(step_one) != _digest(warm_start_dir), "weights after step 1 equal the warm start"
    groups = _first_steps_by_group(run_dir)
    assert len(groups) == TRAIN_BATCH_GROUPS, sorted(groups)
    before = _rewarded_margin(warm_start_dir, groups, run_dir / "episodes")
    after = _rewarded_margin(step_one, groups, run_dir / "episodes")
    logger.info("%s: margin %.4f -> %.4f (effect %+.4f)", run_dir.parent.name, before, after, after - before)
    return after - before
