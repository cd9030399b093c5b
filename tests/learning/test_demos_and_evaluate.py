"""Demonstrations, warm start and evaluation on a real Chromium: the agent's own format end to end.

Demonstrations are recorded by the MiniWoB++ oracles through ``BrowserPool.step``; their prompts must tokenize
exactly as the ``web_agent`` loop tokenizes them (the warm start trains on what the policy will see), their
responses must parse into valid actions in the agent's layout, and the evaluator must run held-out instances
only.
"""

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from transformers import AutoProcessor

from verl_asyncweb.agent.loop import WebAgentLoop
from verl_asyncweb.agent.prompts import element_targets
from verl_asyncweb.agent.response import parse_response
from verl_asyncweb.config.schema import AsyncWebConfig
from verl_asyncweb.learning.demos import load_demos, record_demos
from verl_asyncweb.learning.evaluate import (
    agent_loop_kwargs,
    demo_manifest,
    demo_prompt_settings,
    evaluate,
    recorded_score_panel,
    resolve,
    trained_instances,
)
from verl_asyncweb.learning.splits import HELD_OUT_SEED
from verl_asyncweb.learning.warm_start import prompt_builder, step_sample, warm_start
from verl_asyncweb.main import load_config
from verl_asyncweb.task_dataset import load_task_sources

pytestmark = [pytest.mark.browser, pytest.mark.ray, pytest.mark.timeout(600)]

TASKS = ["miniwob:click-test,click-link"]


@pytest.fixture(scope="module")
def learning_config():
    cfg, asyncweb = load_config(["recipe=laptop_learning"])
    return cfg, asyncweb


@pytest.fixture(scope="module")
def demos(tmp_path_factory, learning_config):
    _, asyncweb = learning_config
    out = tmp_path_factory.mktemp("demos")
    tasks = load_task_sources(TASKS, seed=asyncweb.tasks.seed, miniwob_instances=2)
    manifest = record_demos(tasks, asyncweb.agent, asyncweb.env, out)
    return out, manifest


def test_demonstrations_are_successful_episodes_in_the_agents_layout(demos):
    out, manifest = demos
    assert manifest["episodes"] == 4 and not manifest["failed"]
    assert manifest["miniwob_score_panel"] is False, "the default observation hides the score panel"
    steps = load_demos(out)
    assert len(steps) == manifest["steps"] == 4
    assert {step["name"] for step in steps} == {"click-test", "click-link"}
    for step in steps:
        user_text = "\n".join(item.get("text", "") for item in step["messages"][1]["content"])
        assert "Elements on the page" in user_text, "the recipe's observation includes the element list"
        targets = element_targets(user_text, max_lines=100)
        parsed = parse_response(step["response"], viewport=(480, 320), element_targets=targets)
        assert parsed.invalid_reason is None and parsed.action.name == "left_click"
        assert parsed.memory == {} and parsed.progress == {"done": 0, "left": 1}
        assert parsed.intention.startswith("click")
        assert len(step["images"]) == 1 and (out / step["images"][0]).is_file()
    # The click-link target is a <span> in MiniWoB's page: the element list must offer it.
    link = next(step for step in steps if step["name"] == "click-link")
    target = link["response"].split('click "')[1].split('"')[0]
    elements = "".join(item.get("text", "") for item in link["messages"][1]["content"])
    assert f'span "{target}" @(' in elements


def test_element_target_demonstrations_name_the_listed_target_and_succeed(tmp_path, learning_config):
    _, asyncweb = learning_config
    agent = replace(asyncweb.agent, click_target="element")
    names = "click-test,click-button,click-link,click-tab,focus-text,click-dialog"
    tasks = load_task_sources([f"miniwob:{names}"], seed=asyncweb.tasks.seed, miniwob_instances=1)
    manifest = record_demos(tasks, agent, asyncweb.env, tmp_path)
    assert manifest["episodes"] == 6 and not manifest["failed"], manifest["failed"]
    for step in load_demos(tmp_path):
        assert '{"name": "left_click", "arguments": {"element": i}}' in step["messages"][0]["content"]
        call = json.loads(re.search(r"<tool_call>(.*)</tool_call>", step["response"]).group(1))
        assert list(call["arguments"]) == ["element"], call
        user_text = "".join(item.get("text", "") for item in step["messages"][1]["content"])
        listed = re.search(rf"^\[{call['arguments']['element']}\] (\S+) \"(.*)\" @", user_text, re.MULTILINE)
        assert listed, f"element {call['arguments']['element']} is not in the prompt's list"
        if step["name"] == "focus-text":
            assert listed.group(1).startswith("input")
        elif step["name"] != "click-dialog":
            assert step["response"].split('Intention: click "')[1].startswith(listed.group(2)), step["response"]


async def test_demo_prompts_tokenize_as_the_agent_loop_tokenizes_them(demos, learning_config, tiny_model_path):
    out, _ = demos
    cfg, _ = learning_config
    cfg = OmegaConf.merge(cfg, {"actor_rollout_ref": {"model": {"path": str(tiny_model_path)}}})
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    loop = WebAgentLoop(**agent_loop_kwargs(cfg, Path(tiny_model_path), server_manager=None))
    builder = prompt_builder(processor, "qwen2_5_vl")
    from PIL import Image

    for step in load_demos(out):
        images = [Image.open(out / name).convert("RGB") for name in step["images"]]
        loop_ids = await loop.ct_build_initial_tokens(step["messages"], images=images, mm_inputs_out={})
        sample = step_sample(processor, builder, step, out)
        prompt_len = int((sample["labels"][0] == -100).sum())
        assert sample["input_ids"][0, :prompt_len].tolist() == list(loop_ids)
        response = processor.tokenizer.decode(sample["input_ids"][0, prompt_len:])
        assert response == step["response"] + "<|im_end|>"


def test_warm_start_lowers_the_loss_and_writes_a_loadable_checkpoint(demos, tiny_model_path, tmp_path):
    out, _ = demos
    record = warm_start(tiny_model_path, out, tmp_path / "model", steps=6, batch_size=2, lr=3e-3)
    assert record["demo_steps"] == 4 and record["demo_episodes"] == 4 and len(record["losses"]) == 6
    assert record["loss_last"] < record["loss_first"]
    assert (tmp_path / "model" / "config.json").is_file() and (tmp_path / "model" / "warm_start.json").is_file()
    copied = json.loads((tmp_path / "model" / "demos_manifest.json").read_text())
    assert copied == json.loads((out / "manifest.json").read_text()), "the folder carries what it was trained on"


def test_evaluate_runs_held_out_instances_with_the_web_agent_loop(
    demos, tiny_model_path, tmp_path, ray_cluster, learning_config
):
    out, _ = demos
    max_steps = learning_config[1].agent.max_steps
    warm_start(tiny_model_path, out, tmp_path / "model", steps=1, batch_size=1)
    # The same task through our loader and through BrowserGym's task class (a BrowserGym benchmark as its papers
    # score it), in one evaluation.
    specs = ["miniwob:click-test", "browsergym:miniwob.click-test"]
    result = evaluate(tmp_path / "model", task_specs=specs, instances=2, temperature=1.0)
    assert result["episodes"] == 4 and result["instances"] == 4 and result["seeds"] == "held-out"
    assert set(result["success_by_task"]) == {"click-test", "miniwob.click-test"}
    assert set(result["success_by_difficulty"]) == {"easy"} and result["env_failures"] == 0
    assert 0.0 <= result["success"] <= 1.0
    steps = result["metrics"]["asyncweb/steps_per_traj/failure"] if result["success"] < 1 else 1
    assert 1 <= steps <= max_steps, "episodes end within the recipe's step cap"


def test_held_out_episodes_of_a_branching_run_play_whole_as_validation(tiny_model_path, ray_cluster):
    # A branch arm's checkpoint is evaluated with the config it trained with, branch_step included: its held-out
    # episodes must not join branch rollouts (no anchor snapshots, no member restoring another episode's state).
    from verl_asyncweb.learning.evaluate import run_episodes

    cfg, _ = load_config(
        ["recipe=laptop_learning", "asyncweb.agent.branch_step=1", "asyncweb.env.deterministic_clock=true"]
    )
    assert cfg.actor_rollout_ref.rollout.n >= 2, "a group to branch in"
    tasks = load_task_sources(["miniwob:click-test"], seed=HELD_OUT_SEED, miniwob_instances=2)
    reports = asyncio.run(run_episodes(cfg, tiny_model_path, tasks, temperature=1.0))
    assert len(reports) == 2 and not any(report["env_failed"] for report in reports)
    assert [(report["split"], report["branch"]) for report in reports] == [("val", None)] * 2


def test_evaluate_refuses_a_model_trained_on_held_out_instances(tmp_path, learning_config):
    _, asyncweb = learning_config
    demos_dir, model_dir = tmp_path / "demos", tmp_path / "model"
    demos_dir.mkdir()
    model_dir.mkdir()
    held_out = load_task_sources(["miniwob:click-test"], seed=HELD_OUT_SEED, miniwob_instances=1)[0]
    (demos_dir / "manifest.json").write_text(json.dumps({"episodes": 1, "instances": [["click-test", held_out.seed]]}))
    (model_dir / "config.json").write_text("{}")
    (model_dir / "warm_start.json").write_text(json.dumps({"demos": str(demos_dir)}))
    with pytest.raises(ValueError, match="1 held-out instances were also used for training"):
        evaluate(model_dir, task_specs=["miniwob:click-test"], instances=3)


def test_a_copied_warm_start_is_checked_against_its_own_copy_of_the_demonstrations(tmp_path, caplog):
    held_out = load_task_sources(["miniwob:click-test"], seed=HELD_OUT_SEED, miniwob_instances=1)[0]
    model_dir = tmp_path / "copied_warm_start"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    (model_dir / "warm_start.json").write_text(json.dumps({"demos": str(tmp_path / "gone")}))
    agent = {"observation": "screenshot+elements", "click_target": "element"}
    manifest = {"instances": [["click-test", held_out.seed]], "agent": agent}
    (model_dir / "demos_manifest.json").write_text(json.dumps(manifest))
    assert trained_instances(resolve(model_dir, "laptop_learning")) == {("click-test", held_out.seed)}
    assert demo_prompt_settings(demo_manifest(model_dir))["click_target"] == "element"
    with pytest.raises(ValueError, match="1 held-out instances were also used for training"):
        evaluate(model_dir, task_specs=["miniwob:click-test"], instances=3)
    (model_dir / "demos_manifest.json").unlink()
    with caplog.at_level("WARNING"):
        resolved = resolve(model_dir, "laptop_learning")
        assert resolved.model_dir == model_dir and resolved.demos is None
        assert trained_instances(resolved) == set()
    assert caplog.text.count("held-out instances are not checked") == 1, "said once: the manifest is read once"


def test_a_warm_start_and_a_run_folder_are_evaluated_with_the_score_panel_they_were_trained_on(tmp_path, caplog):
    """Demonstrations and run folders that do not say were recorded with MiniWoB++'s score panel shown."""
    model_dir = tmp_path / "warm_start"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    (model_dir / "warm_start.json").write_text(json.dumps({"demos": str(tmp_path / "gone")}))
    (model_dir / "demos_manifest.json").write_text(json.dumps({"instances": []}))
    assert recorded_score_panel(demo_manifest(model_dir)) is True
    with pytest.raises(ValueError, match="true or false in a record, not 'false'"):
        recorded_score_panel({"miniwob_score_panel": "false"})
    with caplog.at_level("WARNING"):
        assert resolve(model_dir, "laptop_learning")[1].asyncweb.env.miniwob_score_panel is True
    assert "miniwob_score_panel=True as in its demonstrations" in caplog.text
    (model_dir / "demos_manifest.json").write_text(json.dumps({"instances": [], "miniwob_score_panel": False}))
    assert resolve(model_dir, "laptop_learning")[1].asyncweb.env.miniwob_score_panel is False
    assert demo_manifest(tmp_path) is None, "not a warm start"

    run_dir = tmp_path / "run"
    (run_dir / "global_step_1" / "actor" / "huggingface").mkdir(parents=True)
    (run_dir / "global_step_1" / "actor" / "huggingface" / "model.safetensors").write_bytes(b"")
    (run_dir / "config.yaml").write_text("asyncweb: {env: {deterministic_clock: false}}\n")
    assert resolve(run_dir, "laptop_learning")[1].asyncweb.env.miniwob_score_panel is True
    (run_dir / "config.yaml").write_text("asyncweb: {env: {miniwob_score_panel: false}}\n")
    assert resolve(run_dir, "laptop_learning")[1].asyncweb.env.miniwob_score_panel is False
    # A run from the warm start is checked against the warm start's demonstrations too.
    (model_dir / "demos_manifest.json").write_text(json.dumps({"instances": [["click-test", 7]]}))
    (run_dir / "config.yaml").write_text(f"actor_rollout_ref: {{model: {{path: {model_dir}}}}}\n")
    resolved = resolve(run_dir, "laptop_learning")
    assert resolved.run_dir == run_dir and resolved.demos == {"instances": [["click-test", 7]]}
    assert trained_instances(resolved) == {("click-test", 7)}


def test_held_out_instances_never_meet_the_learning_recipes_training_instances(learning_config):
    _, asyncweb = learning_config
    specs = asyncweb.tasks.train
    training = load_task_sources(specs, seed=asyncweb.tasks.seed, miniwob_instances=asyncweb.tasks.miniwob_instances)
    held_out = load_task_sources(specs, seed=HELD_OUT_SEED, miniwob_instances=50)
    from verl_asyncweb.learning.splits import check_disjoint, instance_keys

    assert len(instance_keys(training)) == len(training) == 6 * asyncweb.tasks.miniwob_instances
    check_disjoint(held_out, instance_keys(training))
    with pytest.raises(ValueError, match="held-out instances were also used for training"):
        check_disjoint(held_out, instance_keys(training + held_out[:1]))
    with pytest.raises(ValueError, match=f"asyncweb.tasks.seed must not be {HELD_OUT_SEED}"):
        AsyncWebConfig.from_config(OmegaConf.create({"tasks": {"seed": HELD_OUT_SEED}}))
