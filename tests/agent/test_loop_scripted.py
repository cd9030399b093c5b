"""The web_agent loop with a scripted policy behind verl's generate interface, on a real Chromium and MiniWoB++.

The policy plays the server's role (``generate(request_id, prompt_ids, sampling_params, image_data)`` → token ids,
log-probs, weight versions); it first waits, then clicks the click-test button. The episode must succeed with raw
reward 1 and yield exactly one sample per step with consistent trajectory fields. The first generation is split
across a weight update (versions 6 to 7, as verl's client reports it): the trajectory's earliest version is 6.
"""

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from transformers import AutoProcessor
from verl.workers.rollout.replica import TokenOutput

from verl_asyncweb.agent.fields import IMAGE_GRID_FIELD, SCREENSHOT_KEYS_FIELD
from verl_asyncweb.agent.loop import WebAgentLoop, _SharedPool, _SharedScreenshots
from verl_asyncweb.env import BrowserPool, load_tasks
from verl_asyncweb.env.oracle import find, tool_call
from verl_asyncweb.learning.evaluate import agent_loop_kwargs
from verl_asyncweb.main import load_config
from verl_asyncweb.task_dataset import task_to_json

pytestmark = [pytest.mark.browser, pytest.mark.ray]

WAIT = "Memory: {}\nIntention: let the page settle.\n" + tool_call("wait", seconds=0.1)


class ScriptedPolicyServer:
    """verl's server_manager.generate contract, answering with a fixed script of responses."""

    def __init__(self, tokenizer, responses: list[str], versions: list[dict]):
        self.tokenizer, self.responses, self.versions = tokenizer, list(responses), list(versions)
        self.calls: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs) -> TokenOutput:
        self.calls.append({"prompt_len": len(prompt_ids), "images": len(image_data or [])})
        response = self.responses.pop(0)
        if isinstance(response, Exception):
            raise response
        token_ids = self.tokenizer.encode(response, add_special_tokens=False)
        return TokenOutput(
            token_ids=token_ids,
            log_probs=[-0.5] * len(token_ids),
            stop_reason="completed",
            extra_fields=dict(self.versions.pop(0)),
        )


@pytest.fixture
def trainer_config(tiny_model_path):
    cfg, _ = load_config(["recipe=cpu_smoke", "data.max_response_length=256", "asyncweb.agent.max_steps=0"])
    OmegaConf.set_struct(cfg, False)
    cfg.actor_rollout_ref.model.path = str(tiny_model_path)
    return cfg


async def _button_coordinate(env_config, task) -> list[int]:
    """Where click-test's button is at this viewport (the page is static), found from the accessibility text."""
    probe_config = type(env_config)(**{**env_config.__dict__, "accessibility_text": True})
    async with BrowserPool(probe_config) as pool, pool.session() as session:
        return find(await pool.reset(session, task), "Click Me!")


def _loop(loop_cls, trainer_config, server):
    """A loop as verl's agent-loop worker builds it, on the config's model."""
    return loop_cls(**agent_loop_kwargs(trainer_config, Path(trainer_config.actor_rollout_ref.model.path), server))


async def _close_shared_pool():
    if _SharedPool.pool is not None:
        await _SharedPool.pool.close()
        _SharedPool.pool = None


async def test_scripted_policy_succeeds_with_one_sample_per_step(ray_cluster, trainer_config, tiny_model_path):
    from verl_asyncweb.config.schema import AsyncWebConfig

    env_config = AsyncWebConfig.from_config(trainer_config.asyncweb).env
    task = load_tasks("miniwob", names=["click-test"], seed=5)[0]
    target = await _button_coordinate(env_config, task)
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    click = 'Memory: {"button": "Click Me!"}\nIntention: press the button.\n' + tool_call(
        "left_click", coordinate=target
    )
    split_generation = {"global_steps": 7, "min_global_steps": 6, "max_global_steps": 7}
    server = ScriptedPolicyServer(processor.tokenizer, [WAIT, click], [split_generation, {"global_steps": 7}])
    loop = _loop(WebAgentLoop, trainer_config, server)
    try:
        outputs = await loop.run({"temperature": 1.0}, uid="u1", extra_info={"task": task_to_json(task)})
    finally:
        await _close_shared_pool()

    assert len(outputs) == len(server.calls) == 2
    assert all(call["images"] == 1 for call in server.calls)
    for index, output in enumerate(outputs):
        fields = output.extra_fields
        assert output.reward_score == 1.0
        assert fields["step_index"] == index and fields["traj_num_steps"] == 2
        assert fields["traj_id"] == outputs[0].extra_fields["traj_id"]
        assert fields["min_global_steps"] == 6 and fields["max_global_steps"] == 7
        assert (fields["policy_version_min"], fields["policy_version"]) == ((6, 7), (7, 7))[index]
        assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs) > 0
        assert len(fields[SCREENSHOT_KEYS_FIELD]) == 1 and len(fields[SCREENSHOT_KEYS_FIELD][0]) == 64
        assert fields[IMAGE_GRID_FIELD] and output.multi_modal_data is None


class _ReportingLoop(WebAgentLoop):
    """Keeps its episode reports instead of sending them to the run's stats actor."""

    reports: list[dict] = []

    def report_episode(self, summary):
        self.reports.append(summary)


async def test_an_episode_that_raises_is_reported_and_its_screenshots_leave_the_store_at_once(
    ray_cluster, trainer_config, tiny_model_path
):
    # A failed episode gives no samples: the loop reports it (its steps go to the run folder) and releases its
    # screenshots itself, so that a full store waiting on them does not wait for its group to leave TransferQueue.
    task = load_tasks("miniwob", names=["click-test"], seed=11)[0]
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    server = ScriptedPolicyServer(processor.tokenizer, [WAIT, RuntimeError("rollout server lost")], [{}, {}])
    loop = _loop(_ReportingLoop, trainer_config, server)
    try:
        with pytest.raises(RuntimeError, match="rollout server lost"):
            await loop.run({"temperature": 1.0}, uid="u2", extra_info={"task": task_to_json(task)})
    finally:
        await _close_shared_pool()

    (report,) = loop.reports
    assert report["error"] == "RuntimeError" and report["env_failed"] and not report["success"]
    assert len(report["steps"]) == 1 and "rollout server lost" in report["evaluator_reasons"][0]
    store = _SharedScreenshots.get(loop.agent_config)
    key = report["steps"][0]["screenshot_key"]
    assert not store.check([key], store.current_incarnation())
    assert await store.arelease(report["traj_id"]) == 0, "nothing left to release"
