"""The ``web_agent`` agent loop: a multi-step visual web episode on the everlasting browser pool.

verl's agent-loop worker instantiates this class per episode and awaits :meth:`WebAgentLoop.run`. Each step
builds a prompt (system prompt, task, latest Memory/Progress, the last ``history_images`` screenshots, older
rounds as text), generates through verl's ``server_manager``, parses the response, acts in Chromium, and emits
ONE training sample (``AgentLoopOutput``) for that step. The episode's reward, set on every step, comes from the
task's evaluator. Model mistakes become invalid steps; browser failures end the episode as failed-by-environment,
which is raised so that verl drops the episode's group instead of training on it. With branch rollouts on
(``asyncweb.agent.branch_step``), a group's members play on from the state its first member reached
(:mod:`~verl_asyncweb.agent.branch`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from verl_asyncweb.agent import branch
from verl_asyncweb.agent.branch import ANCHOR, FALLBACK, MEMBER
from verl_asyncweb.agent.config import AgentConfig
from verl_asyncweb.agent.fields import IMAGE_GRID_FIELD, SCREENSHOT_KEYS_FIELD, trajectory_id
from verl_asyncweb.agent.rollout_stats import POOL_STATS_FIELD, stats_actor
from verl_asyncweb.config.build import plain_dict
from verl_asyncweb.run_folder import persist_screenshots

logger = logging.getLogger(__name__)

AGENT_NAME = "web_agent"
POOL_KEY = f"{socket.gethostname()}:{os.getpid()}"
"""This worker process's browser pool, as its counters are keyed in the rollout-stats actor."""


class EnvironmentFailure(RuntimeError):
    """The browser failed during the episode: the episode is masked (not trained on, not scored)."""


@dataclass
class EpisodeState:
    """What one episode accumulates step by step."""

    traj_id: str
    instruction: str
    group: str = ""
    memory: dict | None = None
    progress: dict | None = None
    history: list = field(default_factory=list)
    outputs: list[AgentLoopOutput] = field(default_factory=list)
    versions: list[tuple[int, int]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    screenshots: list[bytes] = field(default_factory=list)
    invalid_actions: int = 0
    stuck_steps: int = 0
    context_overflow: bool = False
    answer: str | None = None
    branch_role: str | None = None
    branch_point: str = ""
    branch_step: int = 0
    split: str = "train"
    """``val`` for an episode of verl's validation (``trainer.test_freq``), ``train`` otherwise."""


class _SharedPool:
    """One BrowserPool per agent-loop worker process, started on first use and kept for the whole run."""

    pool = None
    lock: asyncio.Lock | None = None

    @classmethod
    async def get(cls, env_config, judge_config=None):
        from verl_asyncweb.env import BrowserPool, RubricJudge

        if cls.lock is None:
            cls.lock = asyncio.Lock()
        async with cls.lock:
            if cls.pool is None:
                pool = BrowserPool(env_config, judge=RubricJudge(judge_config) if judge_config else None)
                await pool.start()
                cls.pool = pool
        return cls.pool


class _SharedScreenshots:
    """One ScreenshotStore client per worker process (its actor handle is acquired once and cached)."""

    client = None

    @classmethod
    def get(cls, agent_config: AgentConfig):
        if cls.client is None:
            from verl_asyncweb.agent.screenshots import ScreenshotClient

            cls.client = ScreenshotClient.from_config(agent_config)
        return cls.client


def _action_overlay(parsed) -> dict[str, Any]:
    """Where the action landed, for the trajectory viewer: click position (pixels) and typed text."""
    action = getattr(parsed, "action", None)
    x, y = getattr(action, "x", None), getattr(action, "y", None)
    at = getattr(action, "at", None)
    click = [x, y] if x is not None and y is not None else (list(at) if at else None)
    return {
        "action": {"name": parsed.name, "arguments": {}} if action is not None else None,
        "click_xy": click,
        "typed_text": getattr(action, "text", None),
    }


def _save_branch_point(point) -> None:
    """Keep the anchor's branch point in the run folder, where ``python -m verl_asyncweb.replay`` finds it."""
    from verl_asyncweb.run_folder import branch_point_path

    path = branch_point_path(point.id)
    if path is not None:
        branch.save_point(point, path)


def _image(data: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(data)).convert("RGB")


def step_messages(agent_config: AgentConfig, state: EpisodeState, observation) -> tuple[list[dict], list[Any]]:
    """The chat messages of this step and the screenshots they reference (see :func:`.prompts.build_messages`)."""
    from verl_asyncweb.agent.prompts import build_messages, system_prompt

    return build_messages(
        state.instruction,
        state.memory,
        state.progress,
        state.history,
        observation.screenshot,
        history_images=agent_config.history_images,
        max_history_text_rounds=agent_config.max_history_text_rounds,
        system_prompt=system_prompt(agent_config.system_prompt, agent_config.click_target),
        elements=observation.accessibility_text if agent_config.shows_elements else None,
        max_element_lines=agent_config.max_element_lines,
    )


def _resume_state(state: EpisodeState, point) -> None:
    """Carry the anchor's agent state at the branch point into this member's episode.

    What the prompts and the evaluator see carries over; the counts (invalid and stuck steps) start at zero, as
    they describe the member's own steps, the only ones it reports and trains on.
    """
    state.instruction, state.memory, state.progress = point.instruction, point.memory, point.progress
    state.history, state.screenshots, state.answer = list(point.history), list(point.screenshots), point.answer


def shown_element_targets(agent_config: AgentConfig, observation) -> dict[int, tuple[int, int]] | None:
    """Centres of the elements this step's prompt lists (what ``{"element": i}`` clicks); ``None`` if it lists none."""
    from verl_asyncweb.agent.prompts import element_targets

    if not agent_config.shows_elements:
        return None
    return element_targets(observation.accessibility_text, agent_config.max_element_lines)


def advance_state(state: EpisodeState, step_index: int, parsed, observation, result) -> None:
    """Fold one executed step into the episode: Memory/Progress, invalid count, final answer, history line."""
    from verl_asyncweb.agent.prompts import StepRecord
    from verl_asyncweb.agent.response import merge_memory

    state.memory = merge_memory(state.memory, parsed.memory)
    state.progress = parsed.progress if parsed.progress is not None else state.progress
    state.invalid_actions += int(result.invalid_action)
    action = parsed.action
    if action is not None and type(action.action).__name__ == "Answer":
        state.answer = action.action.text
    state.history.append(
        StepRecord(
            step_index=step_index,
            intention=parsed.intention,
            action_text=parsed.action_text or parsed.tool_call_text,
            action_result=result.info,
            screenshot=observation.screenshot,
            invalid_reason=result.info if result.invalid_action else None,
        )
    )


def generation_versions(extra_fields: dict[str, Any]) -> tuple[int, int]:
    """Earliest and latest weight version of one generation (a weight update may land in the middle of it).

    verl's server client reports ``min_global_steps``/``max_global_steps`` (defaulting both to ``global_steps``);
    the staleness filter and ``asyncweb/policy_lag`` must see the earliest.
    """
    latest = int(extra_fields.get("max_global_steps", extra_fields.get("global_steps")) or 0)
    earliest = extra_fields.get("min_global_steps")
    return (latest if earliest is None else min(int(earliest), latest)), latest


def vision_start_token_id(processor) -> int | None:
    """``<|vision_start|>``'s id, looked up as verl's Qwen2-VL rope index does; ``None`` without one."""
    tokenizer = getattr(processor, "tokenizer", None)
    token_id = tokenizer.convert_tokens_to_ids("<|vision_start|>") if tokenizer is not None else None
    return token_id if isinstance(token_id, int) and token_id != tokenizer.unk_token_id else None


def drop_dangling_vision_start(
    response_ids: list[int], log_probs: list[float], vision_start_id: int | None
) -> tuple[list[int], list[float]]:
    """A response cut off right after ``<|vision_start|>`` loses that token.

    As the sample's last token it opens a vision block with nothing behind it, and Qwen-VL's rope index (verl's
    ``get_rope_index``, run on every multi-modal sample) reads past the sequence's end: an IndexError that fails
    the whole group. verl's vLLM server bans only the placeholders, so the token can be sampled.
    """
    if vision_start_id is not None and response_ids and response_ids[-1] == vision_start_id:
        return response_ids[:-1], log_probs[: len(response_ids) - 1]
    return response_ids, log_probs


@register(AGENT_NAME)
class WebAgentLoop(AgentLoopBase):
    """Runs one web episode and returns one ``AgentLoopOutput`` per step (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from verl_asyncweb.config.schema import AsyncWebConfig

        node = self.config.get("asyncweb") if hasattr(self.config, "get") else None
        asyncweb = AsyncWebConfig.from_config(node if node is not None else OmegaConf.create({}))
        self.env_config = asyncweb.env
        self.judge_config = asyncweb.judge
        self.agent_config: AgentConfig = asyncweb.agent
        self.prompt_length = self.rollout_config.prompt_length
        self.response_length = self.rollout_config.response_length
        self.vision_start_id = vision_start_token_id(self.processor)

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> list[AgentLoopOutput]:
        from verl_asyncweb.env import EvalResult
        from verl_asyncweb.task_dataset import task_from_json

        extra_info = kwargs.get("extra_info") or {}
        task = task_from_json(extra_info["task"])
        pool = await _SharedPool.get(self.env_config, self.judge_config)
        group = str(kwargs.get("uid", "traj"))
        split = str(extra_info.get("split") or "train")
        traj_id = trajectory_id(group, uuid.uuid4().hex[:8])
        state = EpisodeState(traj_id=traj_id, instruction="", group=group, split=split)
        point = kwargs.get("branch_from")  # a BranchPoint to play on from (``python -m verl_asyncweb.replay``)
        if point is not None:
            state.branch_role, state.branch_point, state.branch_step = MEMBER, point.id, point.step
        else:
            point = await self._join_branch(state) if split != "val" else None
        started = time.time()
        session = await pool.acquire()
        try:
            evaluation = await self._run_episode(pool, session, task, state, sampling_params, point)
        except Exception as exc:
            failure = EvalResult(env_failed=True, reasons=[f"episode error: {type(exc).__name__}: {exc}"[:500]])
            self.report_episode({**self._summary(task, state, failure, started), "error": type(exc).__name__})
            await self._release_screenshots(state)
            raise
        finally:
            await pool.release(session)
            if state.branch_role == ANCHOR:
                await branch.publish(group, None)  # no-op once the point went out; else members play whole episodes
        summary = self._summary(task, state, evaluation, started)
        self.report_episode({**summary, POOL_STATS_FIELD: {"pool": POOL_KEY, "counters": pool.stats()}})
        if evaluation.env_failed or evaluation.masked:
            await self._release_screenshots(state)
            raise EnvironmentFailure(f"episode {state.traj_id} on {task.task_id}: {'; '.join(evaluation.reasons)}")
        return self._finalize(state, task, evaluation)

    async def _release_screenshots(self, state: EpisodeState) -> None:
        """A failed episode gives no samples: its screenshots leave the store at once (a full store waits on them),
        their copies in the run folder stay."""
        try:
            await _SharedScreenshots.get(self.agent_config).arelease(state.traj_id)
        except Exception as exc:  # the trainer's sweep releases them once the group leaves TransferQueue
            logger.warning("could not release the screenshots of failed episode %s: %s", state.traj_id, exc)

    def report_episode(self, summary: dict[str, Any]) -> None:
        """Send the finished episode's report to the run's rollout-stats actor (the evaluator collects it)."""
        stats_actor().report_episode.remote(summary)

    async def _join_branch(self, state: EpisodeState):
        """Take this episode's part in its group's branch rollout; returns the point to start from, if any."""
        step, size = self.agent_config.branch_step, int(self.rollout_config.n)
        if not step or size < 2:
            return None
        members = self.agent_config.branch_members or size - 1
        index = await branch.join(state.group, size, members)
        if index == 0:
            state.branch_role, state.branch_step = ANCHOR, step
            return None
        if index > members:
            return None  # a whole episode by design: the group's baseline beyond the point's trajectories
        point = await branch.wait_for_point(state.group, self.agent_config.branch_wait_s)
        if point is None:
            state.branch_role = FALLBACK
            return None
        state.branch_role, state.branch_point, state.branch_step = MEMBER, point.id, point.step
        return point

    @staticmethod
    async def _publish_branch_point(pool, session, state: EpisodeState, step: int) -> None:
        """The anchor reached the branch step: snapshot the page and hand the state to the group's members."""
        point = branch.BranchPoint(
            traj_id=state.traj_id,
            step=step,
            snapshot=await pool.snapshot(session),
            instruction=state.instruction,
            memory=state.memory,
            progress=state.progress,
            history=list(state.history),
            screenshots=list(state.screenshots),
            answer=state.answer,
        )
        state.branch_point = point.id
        await branch.publish(state.group, point)
        _save_branch_point(point)

    async def _run_episode(self, pool, session, task, state: EpisodeState, sampling_params, point=None):
        from verl_asyncweb.env import EvalResult

        if point is None:
            observation, first_step = await pool.reset(session, task), 0
        else:
            observation, first_step = await pool.restore(session, point.snapshot), point.step
            _resume_state(state, point)
        if observation.env_failed:
            return EvalResult(env_failed=True, reasons=[observation.error or "reset failed"])
        state.instruction = state.instruction or observation.instruction or task.instruction
        result = None
        cap = self.agent_config.max_steps
        for step_index in range(first_step, min(task.max_steps, cap) if cap else task.max_steps):
            if state.branch_role == ANCHOR and step_index == state.branch_step:
                await self._publish_branch_point(pool, session, state, step_index)
            result = await self._step(pool, session, task, state, observation, step_index, sampling_params)
            if result is None or result.env_failed:
                break
            observation = result.observation
            if result.done:
                break
        if result is not None and result.env_failed:
            return EvalResult(env_failed=True, reasons=[result.error or "environment failed"])
        if state.context_overflow:
            return EvalResult(reward=0.0, success=False, reasons=["context overflow"])
        if result is not None and result.reward is not None:
            reward, raw = float(result.reward), result.raw_score
            return EvalResult(reward=reward, success=reward > 0, reasons=[result.info], raw_score=raw)
        return await pool.evaluate(session, task, state.answer, state.screenshots)

    async def _step(self, pool, session, task, state: EpisodeState, observation, step_index: int, sampling_params):
        from verl_asyncweb.agent.response import parse_response

        state.screenshots.append(observation.screenshot)
        messages, image_bytes = step_messages(self.agent_config, state, observation)
        images = [_image(blob) for blob in image_bytes]
        mm_inputs: dict[str, Any] = {}
        prompt_ids = await self._prompt_ids(messages, images, mm_inputs)
        if prompt_ids is None:
            state.context_overflow = True
            return None
        generate_started = time.perf_counter()
        output = await self.server_manager.generate(
            request_id=uuid.uuid4().hex,
            prompt_ids=prompt_ids,
            sampling_params={**sampling_params, "max_tokens": self.response_length},
            image_data=images,
            # The prompt's image tokens were built with these; the server must process the images the same way.
            **({"mm_processor_kwargs": plain_dict(self.mm_processor_kwargs)} if self.mm_processor_kwargs else {}),
        )
        generate_s = time.perf_counter() - generate_started
        response_ids = list(output.token_ids)[: self.response_length]
        log_probs = list(output.log_probs or [])[: len(response_ids)]
        response_ids, log_probs = drop_dangling_vision_start(response_ids, log_probs, self.vision_start_id)
        text = self._decode(response_ids)
        parsed = parse_response(
            text,
            coordinate_mode=self.env_config.coordinate_mode,
            viewport=(self.env_config.viewport_width, self.env_config.viewport_height),
            element_targets=shown_element_targets(self.agent_config, observation),
        )
        earliest, version = generation_versions(output.extra_fields)
        state.versions.append((earliest, version))
        action = parsed.action
        result = await pool.step(session, action)
        advance_state(state, step_index, parsed, observation, result)
        stuck = self._is_stuck(state, self.agent_config.stuck_repeat_limit)
        state.stuck_steps += int(stuck)
        state.steps.append(
            {
                "step_index": step_index,
                "policy_version": version,
                "policy_version_min": earliest,
                "intention": parsed.intention,
                "memory": parsed.memory if parsed.memory is not None else parsed.memory_raw,
                "progress": parsed.progress if parsed.progress is not None else parsed.progress_raw,
                "action_text": parsed.tool_call_text,
                "action_result": result.info,
                "invalid_reason": result.info if result.invalid_action else None,
                "response_tokens": len(response_ids),
                # The server call's wall time (queueing behind other requests included): bench rollout_servers.
                "generate_s": round(generate_s, 4),
                "response": text,
                "elements": observation.accessibility_text if self.agent_config.shows_elements else None,
                "stuck": stuck,
                "viewport": [self.env_config.viewport_width, self.env_config.viewport_height],
                **_action_overlay(action),
            }
        )
        # Screenshots travel by reference: the store keeps the bytes, the sample carries keys and the image grid.
        screenshots = _SharedScreenshots.get(self.agent_config)
        keys = [await screenshots.aput(blob, state.traj_id) for blob in image_bytes]
        await asyncio.to_thread(persist_screenshots, keys, image_bytes)  # file writes off the event loop
        state.steps[-1]["screenshot_key"] = keys[-1] if keys else None
        state.outputs.append(
            AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=response_ids,
                response_mask=[1] * len(response_ids),
                response_logprobs=log_probs if len(log_probs) == len(response_ids) else None,
                num_turns=2,
                metrics=AgentLoopMetrics(),
                extra_fields={
                    "step_index": step_index,
                    "policy_version": version,
                    "policy_version_min": earliest,
                    # The exact state this step was taken from is shared with the group's branch members.
                    "branch_point": state.branch_point if step_index == state.branch_step else "",
                    SCREENSHOT_KEYS_FIELD: keys,
                    IMAGE_GRID_FIELD: mm_inputs["image_grid_thw"].tolist(),
                    "screenshot_store": screenshots.incarnation,
                },
            )
        )
        return result

    def _decode(self, response_ids: list[int]) -> str:
        """Response text with the tool-call markers kept (some tokenizers register them as special tokens)."""
        text = self.tokenizer.decode(response_ids, skip_special_tokens=False)
        for token in {self.tokenizer.eos_token, self.tokenizer.pad_token} - {None}:
            text = text.replace(token, "")
        return text

    async def _prompt_ids(self, messages: list[dict], images: list, mm_inputs: dict) -> list[int] | None:
        try:
            prompt_ids = await self.ct_build_initial_tokens(messages, images=images, mm_inputs_out=mm_inputs)
        except ValueError as exc:
            if "exceeding" in str(exc):
                return None
            raise
        limit = min(self.prompt_length, self.agent_config.max_prompt_tokens)
        return None if len(prompt_ids) > limit else prompt_ids

    @staticmethod
    def _is_stuck(state: EpisodeState, repeat_limit: int) -> bool:
        """The last ``repeat_limit`` steps took the same action on the same screenshot (DESIGN section 6)."""
        if len(state.history) < repeat_limit:
            return False
        same_page = len(set(state.screenshots[-repeat_limit:])) == 1
        return same_page and len({record.action_text for record in state.history[-repeat_limit:]}) == 1

    def _finalize(self, state: EpisodeState, task, evaluation) -> list[AgentLoopOutput]:
        """Same reward and trajectory fields on every step-sample; versions span the whole episode."""
        num_steps = len(state.outputs)
        for output in state.outputs:
            output.reward_score = float(evaluation.reward)
            output.extra_fields.update(
                {
                    "traj_id": state.traj_id,
                    "traj_num_steps": num_steps,
                    "task_id": task.task_id,
                    "difficulty": task.difficulty,
                    "min_global_steps": min((earliest for earliest, _ in state.versions), default=0),
                    "max_global_steps": max((latest for _, latest in state.versions), default=0),
                    "reward_extra_info": {"success": float(evaluation.success)},
                }
            )
        return state.outputs

    def _summary(self, task, state: EpisodeState, evaluation, started: float) -> dict[str, Any]:
        """The episode report: metrics inputs (``summary``) plus what the trajectory viewer shows."""
        from verl_asyncweb.agent.memory import analyze_memory
        from verl_asyncweb.agent.metrics import TrajectorySummary

        summary = TrajectorySummary(
            traj_id=state.traj_id,
            task_id=task.task_id,
            difficulty_slice=task.slice,
            success=bool(evaluation.success),
            reward=float(evaluation.reward),
            env_failed=bool(evaluation.masked),
            num_steps=len(state.steps),
            response_tokens=[step["response_tokens"] for step in state.steps],
            invalid_actions=state.invalid_actions,
            stuck_steps=state.stuck_steps,
            memory_stats=[analyze_memory(step["memory"]) for step in state.steps],
            policy_versions=[earliest for earliest, _ in state.versions],
            context_overflow=state.context_overflow,
        )
        return {
            "summary": summary,
            "traj_id": state.traj_id,
            "group": state.group,
            "split": state.split,
            "task_id": task.task_id,
            "instruction": state.instruction,
            "source": task.source,
            "difficulty": task.difficulty,
            "difficulty_slice": task.slice,
            "reward": float(evaluation.reward),
            "success": bool(evaluation.success),
            "env_failed": bool(evaluation.masked),
            "evaluator_reasons": list(evaluation.reasons),
            "steps": state.steps,
            "branch": {"role": state.branch_role, "point": state.branch_point, "step": state.branch_step}
            if state.branch_role
            else None,
            "started_at": started,
            "finished_at": time.time(),
        }
