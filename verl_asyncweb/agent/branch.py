"""Branch rollouts: the members of a group share one mid-episode state.

With ``asyncweb.agent.branch_step = K`` the first member of a group to start (the *anchor*) runs its episode as
usual and, when it reaches step K, snapshots the page (:meth:`BrowserPool.snapshot`) together with the agent's
own state (instruction, Memory, Progress, history, screenshots so far) into a :class:`BranchPoint`. The group's
other members wait for that point, restore it on a page of their own pool and play steps K, K+1, ... from there.
A member whose anchor ends before step K, fails, or does not publish within ``branch_wait_s`` plays a whole
episode from the start instead (counted as a fallback).

Members usually run in different agent-loop worker processes, so they meet on :class:`BranchBoard`, a small
named Ray actor that only passes opaque bytes (it never imports the agent or the browser code). The anchor also
writes the point to the run folder (``episodes/branch_points/<point id>.json``, screenshots by store key), where
``python -m verl_asyncweb.replay`` finds it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from verl_asyncweb.agent.named_actor import named_actor
from verl_asyncweb.agent.prompts import StepRecord
from verl_asyncweb.agent.screenshots import screenshot_key
from verl_asyncweb.env.snapshot import EnvSnapshot

logger = logging.getLogger(__name__)

BOARD_ACTOR_NAME = "asyncweb_branch_board"
BRANCH_POINT_VERSION = 1
ANCHOR, MEMBER, FALLBACK = "anchor", "member", "fallback"


def point_id(traj_id: str, step: int) -> str:
    """Id of the state the anchor ``traj_id`` was in before its step ``step``."""
    return f"{traj_id}@{step}"


@dataclass
class BranchPoint:
    """A mid-episode state of the web agent: the page (``snapshot``) and what the agent carried to it.

    Args:
        traj_id: The anchor trajectory that reached this state.
        step: Index of the next step to play (the anchor had taken ``step`` steps).
        snapshot: The page state (:class:`~verl_asyncweb.env.snapshot.EnvSnapshot`).
        instruction: The task instruction as the page showed it.
        memory: The agent's Memory after ``step`` steps.
        progress: The agent's Progress after ``step`` steps.
        history: The finished rounds (their ``screenshot`` as encoded bytes).
        screenshots: The observation screenshot of each finished step, oldest first.
        answer: The answer given so far.
    """

    traj_id: str
    step: int
    snapshot: EnvSnapshot
    instruction: str
    memory: dict | None = None
    progress: dict | None = None
    history: list[StepRecord] = field(default_factory=list)
    screenshots: list[bytes] = field(default_factory=list)
    answer: str | None = None

    @property
    def id(self) -> str:
        return point_id(self.traj_id, self.step)

    def to_record(self) -> dict[str, Any]:
        """A JSON object; screenshots are named by their store key (the run folder keeps the bytes)."""
        history = [
            {**record.__dict__, "screenshot": screenshot_key(record.screenshot) if record.screenshot else None}
            for record in self.history
        ]
        return {
            "version": BRANCH_POINT_VERSION,
            "point": self.id,
            "traj_id": self.traj_id,
            "step": self.step,
            "snapshot": json.loads(self.snapshot.to_json()),
            "instruction": self.instruction,
            "memory": self.memory,
            "progress": self.progress,
            "history": history,
            "screenshots": [screenshot_key(blob) for blob in self.screenshots],
            "answer": self.answer,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], load_screenshot: Callable[[str], bytes]) -> BranchPoint:
        """Rebuild a point from :meth:`to_record`, reading each screenshot with ``load_screenshot(key)``.

        Raises:
            ValueError: On a record of another format version or a malformed snapshot.
        """
        if record.get("version") != BRANCH_POINT_VERSION:
            raise ValueError(
                f"branch point {record.get('point')!r} has format version {record.get('version')!r}, "
                f"this verl_asyncweb reads version {BRANCH_POINT_VERSION}"
            )
        history = [
            StepRecord(**{**item, "screenshot": load_screenshot(item["screenshot"]) if item["screenshot"] else None})
            for item in record["history"]
        ]
        return cls(
            traj_id=record["traj_id"],
            step=int(record["step"]),
            snapshot=EnvSnapshot.from_json(json.dumps(record["snapshot"])),
            instruction=record["instruction"],
            memory=record["memory"],
            progress=record["progress"],
            history=history,
            screenshots=[load_screenshot(key) for key in record["screenshots"]],
            answer=record["answer"],
        )


def save_point(point: BranchPoint, path: Path) -> None:
    """Write ``point`` as JSON (atomically: a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(point.to_record(), separators=(",", ":")))
    partial.replace(path)


def load_point(path: Path, episodes_dir: Path) -> BranchPoint:
    """Read a point written by :func:`save_point`; its screenshots come from the run folder's ``episodes_dir``.

    Raises:
        FileNotFoundError: If the point or one of its screenshots is missing.
        ValueError: If the file is not a branch point of this format.
    """
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a branch point (invalid JSON: {exc})") from None
    from verl_asyncweb.run_folder import find_screenshot

    return BranchPoint.from_record(record, lambda key: find_screenshot(episodes_dir, key).read_bytes())


@ray.remote(num_cpus=0)
class BranchBoard:
    """Where the members of a group meet: the first to join is the anchor, the others wait for its point.

    Points travel as opaque bytes. A group is forgotten once every expected member has fetched it, or
    ``ttl_s`` after it was opened (members that never came).
    """

    def __init__(self, ttl_s: float = 3600.0) -> None:
        self.ttl_s = ttl_s
        self._groups: dict[str, dict[str, Any]] = {}

    def _prune(self) -> None:
        now = time.monotonic()
        for group in [g for g, entry in self._groups.items() if now - entry["opened"] > self.ttl_s]:
            del self._groups[group]

    async def join(self, group: str, size: int, members: int) -> int:
        """Register one episode of ``group`` (``size`` expected, ``members`` of them to fetch the anchor's point);
        returns its arrival index (0: the anchor; 1 to ``members``: members)."""
        self._prune()
        entry = self._groups.setdefault(
            group,
            {
                "opened": time.monotonic(),
                "size": size,
                "members": members,
                "joined": 0,
                "fetched": 0,
                "event": asyncio.Event(),
            },
        )
        entry["joined"] += 1
        self._forget_when_done(group, entry)
        return entry["joined"] - 1

    async def publish(self, group: str, point: bytes | None) -> None:
        """The anchor's point (``None``: no branch point, the members play whole episodes)."""
        entry = self._groups.get(group)
        if entry is not None and not entry["event"].is_set():
            entry["point"] = point
            entry["event"].set()

    async def wait(self, group: str, timeout_s: float) -> bytes | None:
        """The anchor's point, or ``None`` if it gave none or published nothing within ``timeout_s``."""
        entry = self._groups.get(group)
        if entry is None:
            return None
        try:
            await asyncio.wait_for(entry["event"].wait(), timeout_s)
        except asyncio.TimeoutError:
            return None
        entry["fetched"] += 1
        self._forget_when_done(group, entry)
        return entry.get("point")

    def _forget_when_done(self, group: str, entry: dict[str, Any]) -> None:
        """Forget ``group`` once all its episodes joined and its members fetched the point: an episode joining
        later would open it again as a new anchor."""
        if entry["joined"] >= entry["size"] and entry["fetched"] >= entry["members"]:
            self._groups.pop(group, None)

    async def open_groups(self) -> dict[str, int]:
        """Members joined so far of each group not forgotten yet (for progress checks and leak checks)."""
        self._prune()
        return {group: entry["joined"] for group, entry in self._groups.items()}


def board_actor():
    """Get or create the job's branch board; the handle is cached per process."""
    return named_actor(BranchBoard, BOARD_ACTOR_NAME)


async def join(group: str, size: int, members: int) -> int:
    """This episode's arrival index in ``group`` (0: it is the anchor; up to ``members``: a member)."""
    return await board_actor().join.remote(group, size, members)


async def publish(group: str, point: BranchPoint | None) -> None:
    """Hand ``point`` (or no point) to the group's waiting members."""
    await board_actor().publish.remote(group, None if point is None else pickle.dumps(point))


async def wait_for_point(group: str, timeout_s: float) -> BranchPoint | None:
    """The group's branch point, or ``None`` (no point, or none within ``timeout_s``)."""
    data = await board_actor().wait.remote(group, timeout_s)
    return None if data is None else pickle.loads(data)
