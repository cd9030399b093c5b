"""``python -m verl_asyncweb.bench episodes RUN_DIR ...``: what runs played while they trained.

From each run folder's recorded training episodes (``episodes/episodes.jsonl``) and metrics, one row per run:
episodes played and how many succeeded, prompt groups and how many ended alike (every member succeeded or every
member failed: GRPO gives them no signal and dynamic sampling drops them), success by the policy version that
generated an episode's last step (``v3+`` pools the later ones), the median seconds per step and the mean policy
lag (``asyncweb/policy_lag/mean`` over the logged steps); validation episodes (``trainer.test_freq``) are not
counted. Environment-failed episodes are counted apart and left out of every rate, and a group with one is left out
of the group counts (verl drops it), as is one with fewer members recorded than the run's ``rollout.n``
(``unfinished``: still in flight when the run ended). A resumed run's file still holds the episodes its interrupted
attempt played past the checkpoint it resumed from: they are left out, as its metrics leave those steps out (records
written before they named their ``attempt`` are told apart by the step going down, which misses those of the one
step after the checkpoint when the attempt died in it).

With dynamic sampling, runs that play more episodes for the same training steps are runs whose groups more often
end alike: this reads which, and whether their episodes started out succeeding less (v0) or fell behind later.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from verl_asyncweb.agent import fields
from verl_asyncweb.compare.jsonl import CorruptLine
from verl_asyncweb.compare.metric_names import POLICY_LAG_MEAN
from verl_asyncweb.run_folder import RunFolder

LAST_VERSION = 3
"""Policy versions from this one on share a column (``v3+``)."""


def group_of(episode: dict) -> str:
    """The episode's prompt group; records written before they carried ``group`` have ``{group}-{session}`` ids."""
    return episode.get("group") or fields.group_of(episode["traj_id"])


def version_of(episode: dict) -> int | None:
    """The policy version that generated the episode's last step (None: an episode without steps)."""
    versions = [step["policy_version"] for step in episode["steps"] if step.get("policy_version") is not None]
    return max(versions) if versions else None


@dataclass
class PlayedEpisodes:
    """What one run played, as :func:`played` counts it from its episode records."""

    episodes: int = 0
    successes: int = 0
    env_failed: int = 0
    groups: int = 0
    groups_alike: int = 0
    groups_unfinished: int = 0
    """Groups with fewer recorded members than the run's ``rollout.n`` (in flight when the run ended, or cut by a
    resume): counted apart, not as ended alike."""
    by_version: dict[int, list[int]] = field(default_factory=dict)
    """Policy version (capped at :data:`LAST_VERSION`) -> [successes, episodes]."""
    seconds_per_step: float | None = None
    policy_lag: float | None = None
    cut_lines: int = 0

    def row(self, name: str) -> str:
        rate = f"{self.successes / self.episodes:.3f}" if self.episodes else "n/a"
        versions = []
        for version in range(LAST_VERSION + 1):
            won, played_ = self.by_version.get(version, (0, 0))
            versions.append(f"{won}/{played_} = {won / played_:.2f}" if played_ else "n/a")
        seconds = "n/a" if self.seconds_per_step is None else f"{self.seconds_per_step:.1f}"
        lag = "n/a" if self.policy_lag is None else f"{self.policy_lag:.2f}"
        return (
            f"| {name} | {self.episodes} | {rate} | {self.env_failed} | {self.groups} | {self.groups_alike} | "
            f"{self.groups_unfinished} | "
            f"{' | '.join(versions)} | {seconds} | {lag} |"
        )


HEADER = (
    "| run | episodes | success | env failed | groups | ended alike | unfinished | "
    + " | ".join(f"v{v}" if v < LAST_VERSION else f"v{v}+" for v in range(LAST_VERSION + 1))
    + " | s/step | policy lag |"
)


def last_attempt(episodes: list[dict]) -> list[dict]:
    """The records in file order that the run's last attempt trained or could have: without those an interrupted
    attempt wrote past the checkpoint the next attempt resumed from, and without an earlier attempt's members of a
    group a later attempt played again (verl re-issues the groups in flight at its checkpoint whole). A record with
    another ``attempt`` than the one before it starts an attempt, which resumed from its ``attempt_from_step``; where
    neither names one (written before records did), a lower ``global_step`` starts one, from the step before it."""
    kept: list[tuple[int, dict]] = []  # (attempt number, record)
    attempt = 0
    for episode in episodes:
        step = episode.get("global_step", 0)
        previous = kept[-1][1] if kept else None
        named = previous is not None and ("attempt" in episode or "attempt" in previous)
        if previous is not None and (
            episode.get("attempt") != previous.get("attempt") if named else step < previous.get("global_step", 0)
        ):
            attempt += 1
            resumed_from = episode.get("attempt_from_step", step - 1)
            kept = [(number, earlier) for number, earlier in kept if earlier.get("global_step", 0) <= resumed_from]
        kept.append((attempt, episode))
    last_played = {group_of(episode): number for number, episode in kept}  # a group's latest attempt
    return [episode for number, episode in kept if number == last_played[group_of(episode)]]


def training_episodes(episodes: list[dict]) -> list[dict]:
    """The records of :func:`last_attempt` without verl's validation episodes (``split: val``)."""
    return [episode for episode in last_attempt(episodes) if episode.get("split") != "val"]


def run_file(path: Path) -> Path:
    """``path``, a file of a run folder that must exist.

    Raises:
        SystemExit: Naming ``path``, if it does not exist.
    """
    if not path.exists():
        raise SystemExit(f"{path} does not exist: RUN_DIR must be a run folder of verl_asyncweb.main")
    return path


def played(episodes: list[dict], metrics: dict[int, dict[str, float]], group_size: int) -> PlayedEpisodes:
    """Count a run's episode records (:class:`PlayedEpisodes`, of :func:`training_episodes`); ``metrics`` are its
    logged steps (for the lag), ``group_size`` its episodes per prompt group (``actor_rollout_ref.rollout.n``)."""
    counted = PlayedEpisodes()
    groups: dict[str, list[bool]] = defaultdict(list)
    failed_groups = set()
    seconds = []
    for episode in training_episodes(episodes):
        if episode.get("env_failed"):
            counted.env_failed += 1
            failed_groups.add(group_of(episode))
            continue
        success = bool(episode["success"])
        counted.episodes += 1
        counted.successes += success
        groups[group_of(episode)].append(success)
        version = version_of(episode)
        if version is not None:
            tally = counted.by_version.setdefault(min(version, LAST_VERSION), [0, 0])
            tally[0] += success
            tally[1] += 1
            seconds.append((episode["finished_at"] - episode["started_at"]) / len(episode["steps"]))
    whole = [outcomes for group, outcomes in groups.items() if group not in failed_groups]
    counted.groups_unfinished = sum(1 for outcomes in whole if len(outcomes) < group_size)
    whole = [outcomes for outcomes in whole if len(outcomes) >= group_size]
    counted.groups = len(whole)
    counted.groups_alike = sum(1 for outcomes in whole if len(set(outcomes)) == 1)
    counted.seconds_per_step = statistics.median(seconds) if seconds else None
    lags = [data[POLICY_LAG_MEAN] for data in metrics.values() if POLICY_LAG_MEAN in data]
    counted.policy_lag = statistics.fmean(lags) if lags else None
    return counted


def read_run(run_dir: Path) -> PlayedEpisodes:
    """:func:`played` over a run folder; a line cut by a killed run is skipped and counted."""
    folder = RunFolder(run_dir)
    run_file(folder.episodes_path)
    group_size = OmegaConf.load(run_file(folder.config_path)).actor_rollout_ref.rollout.n
    cut: list[CorruptLine] = []
    counted = played(folder.read_episodes(cut), folder.read_metrics(), group_size)
    counted.cut_lines = len(cut)
    return counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench episodes", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    args = parser.parse_args(argv)
    rows = []
    for run_dir in args.run_dirs:
        counted = read_run(run_dir)
        rows.append(counted.row(run_dir.name))
        if counted.cut_lines:
            print(f"{run_dir}: {counted.cut_lines} unreadable episode line(s) skipped", file=sys.stderr)
    print(HEADER)
    print("| --- |" + " ---: |" * (HEADER.count("|") - 2))
    print("\n".join(rows))
    return 0
