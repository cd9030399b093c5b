"""Branch rollouts: a group's members play on from the state its first member reached (issue #16, item 3).

Three ``web_agent`` loops of one group run concurrently with scripted policies behind verl's generate interface,
on a real Chromium and MiniWoB++'s click-test, meeting on the real branch-board Ray actor. The anchor writes
an invalid action at step 0 and clicks at step 1; one member clicks at its first step (the anchor's step 1) and
succeeds, the other waits until the step cap and fails. Members restore the anchor's page and agent state, so
their step-1 prompts are the anchor's step-1 prompt token for token. ``python -m verl_asyncweb.replay`` then
restores the kept point and replays each trajectory's recorded responses from step 1: every outcome is reproduced.
"""

import asyncio
import json
import os
import pickle
import time
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from test_loop_scripted import WAIT, ScriptedPolicyServer, _button_coordinate, _close_shared_pool, _loop
from transformers import AutoProcessor

from verl_asyncweb.agent import branch
from verl_asyncweb.agent.branch import BranchPoint, load_point
from verl_asyncweb.agent.config import AgentConfig
from verl_asyncweb.agent.loop import EpisodeState, WebAgentLoop
from verl_asyncweb.env import load_tasks
from verl_asyncweb.env.oracle import tool_call
from verl_asyncweb.env.snapshot import EnvSnapshot
from verl_asyncweb.main import load_config
from verl_asyncweb.replay import format_result, replay
from verl_asyncweb.replay import main as replay_main
from verl_asyncweb.run_folder import RUN_DIR_ENV
from verl_asyncweb.task_dataset import task_to_json

pytestmark = [pytest.mark.browser, pytest.mark.ray]

JOIN_TIMEOUT_S = 120.0
INVALID = "Memory: {}\nIntention: look around.\nI am not sure which action to take."


class _Recorder(WebAgentLoop):
    """Keeps its episode report and the prompts it generated from."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.report = None

    def report_episode(self, summary):
        self.report = summary


def _config(tiny_model_path, group_size: int):
    cfg, _ = load_config(
        [
            "recipe=cpu_smoke",
            "data.max_response_length=256",
            "asyncweb.agent.max_steps=3",
            "asyncweb.agent.branch_step=1",
            "asyncweb.agent.branch_wait_s=60",
            f"actor_rollout_ref.rollout.n={group_size}",
        ]
    )
    OmegaConf.set_struct(cfg, False)
    cfg.actor_rollout_ref.model.path = str(tiny_model_path)
    return cfg


async def _start_anchor(loop, group: str, task):
    """Start the anchor and return once it has joined the board (it is the group's first member)."""
    run = asyncio.create_task(loop.run({"temperature": 1.0}, uid=group, extra_info={"task": task_to_json(task)}))
    board = branch.board_actor()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while not (await board.open_groups.remote()).get(group):
        assert time.monotonic() < deadline and not run.done(), "the anchor never joined the board"
        await asyncio.sleep(0.05)
    return run


async def test_members_play_on_from_the_anchors_state(ray_cluster, tiny_model_path, tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    cfg = _config(tiny_model_path, group_size=3)
    task = load_tasks("miniwob", names=["click-test"], seed=21)[0]
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    from verl_asyncweb.config.schema import AsyncWebConfig

    target = await _button_coordinate(AsyncWebConfig.from_config(cfg.asyncweb).env, task)
    click = 'Memory: {"button": "Click Me!"}\nIntention: press the button.\n' + tool_call(
        "left_click", coordinate=target
    )
    servers = [
        ScriptedPolicyServer(processor.tokenizer, [INVALID, click], [{"global_steps": 3}] * 2),  # the anchor
        ScriptedPolicyServer(processor.tokenizer, [click], [{"global_steps": 3}]),
        ScriptedPolicyServer(processor.tokenizer, [WAIT, WAIT], [{"global_steps": 3}] * 2),
    ]
    loops = [_loop(_Recorder, cfg, server) for server in servers]
    group = "branch-group-1"
    try:
        anchor_run = await _start_anchor(loops[0], group, task)
        member_runs = [
            loop.run({"temperature": 1.0}, uid=group, extra_info={"task": task_to_json(task)}) for loop in loops[1:]
        ]
        anchor, winner, loser = await asyncio.gather(anchor_run, *member_runs)
    finally:
        await _close_shared_pool()

    point = f"{loops[0].report['traj_id']}@1"
    assert [loop.report["branch"] for loop in loops] == [
        {"role": "anchor", "point": point, "step": 1},
        {"role": "member", "point": point, "step": 1},
        {"role": "member", "point": point, "step": 1},
    ]
    assert [o.extra_fields["step_index"] for o in anchor] == [0, 1]
    assert [o.extra_fields["branch_point"] for o in anchor] == ["", point]
    assert [o.extra_fields["step_index"] for o in winner] == [1]
    assert [o.extra_fields["step_index"] for o in loser] == [1, 2]
    # Only the step taken from the shared state carries the point (the step credit goes on that row alone).
    assert [o.extra_fields["branch_point"] for o in winner] == [point]
    assert [o.extra_fields["branch_point"] for o in loser] == [point, ""]
    for outputs in (winner, loser):
        assert outputs[0].extra_fields["traj_num_steps"] == len(outputs)
    assert [anchor[0].reward_score, winner[0].reward_score, loser[0].reward_score] == [1.0, 1.0, 0.0]
    # Counts describe a trajectory's own steps: the anchor's invalid step 0 is not the members'.
    assert [loop.report["summary"].invalid_actions for loop in loops] == [1, 0, 0]
    # The members saw the anchor's step-1 prompt: the same Memory, history line and image tokens.
    assert winner[0].prompt_ids == anchor[1].prompt_ids == loser[0].prompt_ids
    assert [len(server.calls) for server in servers] == [2, 1, 2]
    assert group not in await branch.board_actor().open_groups.remote(), "a group all members fetched is forgotten"

    saved = load_point(tmp_path / "episodes" / "branch_points" / f"{point}.json", tmp_path / "episodes")
    assert saved.id == point and saved.step == 1 and saved.snapshot.kind == "miniwob"
    assert saved.snapshot.task["task_id"] == task.task_id
    assert len(saved.history) == len(saved.screenshots) == 1 and saved.history[0].screenshot == saved.screenshots[0]
    assert saved.memory == {} and saved.history[0].invalid_reason

    # The run folder as the trainer leaves it: episode records and the resolved config.
    with (tmp_path / "episodes" / "episodes.jsonl").open("w") as out:
        for loop in loops:
            out.write(json.dumps({k: v for k, v in loop.report.items() if k != "summary"}, default=str) + "\n")
    OmegaConf.save(cfg, tmp_path / "config.yaml")
    monkeypatch.delenv(RUN_DIR_ENV)
    for loop, reward in zip(loops[1:], (1.0, 0.0), strict=True):
        result = await asyncio.to_thread(replay, tmp_path, loop.report["traj_id"], 1)
        assert result["point"] == point and result["mode"] == "recorded"
        assert (result["reward"], result["reproduced"]) == (reward, True), format_result(result)
        assert [step["step_index"] for step in result["steps"]] == [s["step_index"] for s in loop.report["steps"]]
    # Had the anchor waited at step 1 instead of clicking, the episode would have failed: the replay says so.
    anchor_record = json.loads(json.dumps(loops[0].report, default=str))
    anchor_record["steps"][1]["response"] = WAIT
    with (tmp_path / "episodes" / "episodes.jsonl").open("a") as out:
        out.write(json.dumps({**anchor_record, "traj_id": "edited", "summary": None}) + "\n")
    os.link(
        tmp_path / "episodes" / "branch_points" / f"{point}.json",
        tmp_path / "episodes" / "branch_points" / "edited@1.json",
    )
    assert await asyncio.to_thread(replay_main, [str(tmp_path), "edited", "1"]) == 1, "a diverged replay exits 1"
    played = await asyncio.to_thread(replay, tmp_path, loops[2].report["traj_id"], 1, str(tiny_model_path))
    assert played["mode"] == "model" and "reproduced" not in played
    assert [step["step_index"] for step in played["steps"]][:1] == [1] and len(played["steps"]) <= 2
    assert replay_main([str(tmp_path), loops[0].report["traj_id"], "0"]) == 2, "step 0 has no kept point"


async def test_members_play_whole_episodes_when_the_anchor_ends_before_the_branch_step_and_validation_never_branches(
    ray_cluster, tiny_model_path, tmp_path, monkeypatch
):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    cfg = _config(tiny_model_path, group_size=2)
    task = load_tasks("miniwob", names=["click-test"], seed=22)[0]
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    from verl_asyncweb.config.schema import AsyncWebConfig

    target = await _button_coordinate(AsyncWebConfig.from_config(cfg.asyncweb).env, task)
    click = "Memory: {}\nIntention: press the button.\n" + tool_call("left_click", coordinate=target)
    loops = [
        _loop(_Recorder, cfg, ScriptedPolicyServer(processor.tokenizer, [click], [{"global_steps": 1}]))
        for _ in range(3)
    ]
    try:
        anchor_run = await _start_anchor(loops[0], "branch-group-2", task)
        member = loops[1].run({"temperature": 1.0}, uid="branch-group-2", extra_info={"task": task_to_json(task)})
        anchor, fallback = await asyncio.gather(anchor_run, member)
        val_info = {"task": task_to_json(task), "split": "val"}
        await loops[2].run({"temperature": 0.0}, uid="branch-group-3", extra_info=val_info)
    finally:
        await _close_shared_pool()

    assert [loop.report["branch"]["role"] for loop in loops[:2]] == ["anchor", "fallback"]
    assert loops[2].report["branch"] is None, "validation episodes never branch"
    assert "branch-group-3" not in await branch.board_actor().open_groups.remote()
    assert [o.extra_fields["step_index"] for o in fallback] == [0], "a fallback member plays from the start"
    assert {o.extra_fields["branch_point"] for o in anchor + fallback} == {""}
    assert not (tmp_path / "episodes" / "branch_points").exists()


@pytest.mark.ray
def test_a_member_without_an_anchor_point_gives_up_after_its_wait(ray_cluster):
    board = branch.BranchBoard.remote(ttl_s=60.0)
    assert ray_cluster.get(board.join.remote("g", 2, 1)) == 0
    assert ray_cluster.get(board.join.remote("g", 2, 1)) == 1
    assert ray_cluster.get(board.wait.remote("g", 0.2)) is None
    assert ray_cluster.get(board.wait.remote("unknown-group", 0.2)) is None
    ray_cluster.get(board.publish.remote("g", b"point"))
    ray_cluster.get(board.publish.remote("g", b"a second point is ignored"))
    assert ray_cluster.get(board.wait.remote("g", 5.0)) == b"point"
    assert ray_cluster.get(board.open_groups.remote()) == {}
    ray_cluster.kill(board)


@pytest.mark.ray
def test_with_fewer_members_the_rest_of_the_group_plays_whole_episodes(ray_cluster):
    # rollout.n = 4, branch_members = 1: the anchor, one member from its point, two whole episodes. The board keeps
    # the group until all four joined (a late one would otherwise open it again as a new anchor).
    agent = AgentConfig(branch_step=1, branch_members=1, branch_wait_s=5.0)
    loop = SimpleNamespace(agent_config=agent, rollout_config=SimpleNamespace(n=4))
    states = [EpisodeState(traj_id=f"t{i}", instruction="", group="few-members") for i in range(4)]

    async def episodes():
        join = WebAgentLoop._join_branch
        assert await join(loop, states[0]) is None
        point = SimpleNamespace(id="t0@1", step=1)  # what a member takes from a BranchPoint
        await branch.board_actor().publish.remote("few-members", pickle.dumps(point))
        points = [await join(loop, state) for state in states[1:]]
        return points, await branch.board_actor().open_groups.remote()

    points, open_groups = asyncio.run(episodes())
    assert [point and point.id for point in points] == ["t0@1", None, None]
    assert [(state.branch_role, state.branch_point, state.branch_step) for state in states] == [
        (branch.ANCHOR, "", 1),
        (branch.MEMBER, "t0@1", 1),
        (None, "", 0),
        (None, "", 0),
    ]
    assert "few-members" not in open_groups


@pytest.mark.ray
def test_the_board_forgets_a_group_once_every_episode_joined_and_every_member_fetched(ray_cluster):
    board = branch.BranchBoard.remote(ttl_s=60.0)
    assert [ray_cluster.get(board.join.remote("g", 4, 2)) for _ in range(2)] == [0, 1]
    ray_cluster.get(board.publish.remote("g", b"point"))
    assert ray_cluster.get(board.wait.remote("g", 5.0)) == b"point"
    assert ray_cluster.get(board.join.remote("g", 4, 2)) == 2
    assert ray_cluster.get(board.wait.remote("g", 5.0)) == b"point"
    assert ray_cluster.get(board.open_groups.remote()) == {"g": 3}, "both members fetched, one episode to come"
    assert ray_cluster.get(board.join.remote("g", 4, 2)) == 3, "the late episode joins the group, not a new one"
    assert ray_cluster.get(board.open_groups.remote()) == {}
    ray_cluster.kill(board)


def test_branch_point_record_names_screenshots_by_key_and_round_trips():
    from verl_asyncweb.agent.prompts import StepRecord
    from verl_asyncweb.agent.screenshots import screenshot_key

    snapshot = EnvSnapshot(task={"task_id": "t"}, kind="site", exact=True, reason="site", url="/a", viewport=(8, 8))
    point = BranchPoint(
        traj_id="u-1",
        step=1,
        snapshot=snapshot,
        instruction="do it",
        memory={"k": "v"},
        history=[StepRecord(step_index=0, intention="look", action_text="wait", screenshot=b"jpeg-0")],
        screenshots=[b"jpeg-0"],
    )
    record = json.loads(json.dumps(point.to_record()))
    assert record["screenshots"] == [screenshot_key(b"jpeg-0")] and record["history"][0]["screenshot"] == (
        screenshot_key(b"jpeg-0")
    )
    assert BranchPoint.from_record(record, {screenshot_key(b"jpeg-0"): b"jpeg-0"}.__getitem__) == point
    with pytest.raises(ValueError, match="format version"):
        BranchPoint.from_record({**record, "version": 99}, lambda key: b"")
