"""The experiment's arms: what each trains on top of the recipe and the warm start, its seeds' overrides and
run folders, and the check that a recorded or continued run was trained as its arm now says."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from verl_asyncweb.run_folder import RunFolder

SYNC_REINFORCE = [
    "asyncweb.rollout_mode=sync",
    "asyncweb.algo.estimator=multistep_reinforce",
    "algorithm.adv_estimator=multistep_reinforce",
    "asyncweb.algo.step_norm=traj",
]
"""Sync rollout, REINFORCE on the raw trajectory reward with 1/|tau|: the overrides both REINFORCE arms share."""

BRANCH = ["asyncweb.agent.branch_step=1", "asyncweb.agent.branch_members=2"]
"""Branch rollouts from step 1 with two members a group (of ``rollout.n`` = 4): the branch arms' rollouts."""

ARMS = {
    "rl": [],
    "control": ["asyncweb.algo.negate_advantage=true"],
    "traj": ["asyncweb.algo.step_norm=traj"],
    "const": ["asyncweb.algo.step_norm=const"],
    "vanilla": ["asyncweb.algo.loss_mode=vanilla", "algorithm.rollout_correction.bypass_mode=true"],
    # WebGym's synchronous baseline, as recipe demo_sync_reinforce: sync rollout, REINFORCE on the raw reward, every
    # group trained (no dynamic sampling: a group whose members all succeeded carries signal without a baseline).
    "sync_reinforce": [*SYNC_REINFORCE, "asyncweb.algo.dynamic_sampling=false"],
    # The same with the recipe's dynamic sampling (mixed groups only): on binary rewards RAFT++'s update, in sync.
    "sync_reinforce_filtered": [*SYNC_REINFORCE],
    "sync_grpo": ["asyncweb.rollout_mode=sync"],
    "raftpp": ["asyncweb.algo.estimator=raftpp", "algorithm.adv_estimator=raftpp"],
    # Branch rollouts: two of each group's other members play on from the state its first member reached after one
    # action and the last plays a whole episode, with episode-level credit (branch) or with the actions taken from
    # that shared state also compared among the three that left it (branch_credit). With every member restoring the
    # point (branch_members 0) the two levels coincide and step credit only reweighs that step (algorithms.md).
    "branch": BRANCH,
    "branch_credit": [*BRANCH, "asyncweb.algo.step_credit=branch"],
}
"""RL arms: ``verl_asyncweb.main`` overrides on top of the recipe and the warm start."""

REDEFINED_ARMS = {"sync_reinforce": "2026-12-06", "branch": "2026-12-06", "branch_credit": "2026-12-06"}
"""Arms whose overrides changed, and when: a ``results.json`` entry of theirs that does not record its overrides
(written before entries did) and has no run folder to read them from is refused, not reported as the new arm."""


def seed_overrides(seed: int) -> list[str]:
    """Overrides of seed ``seed`` of an arm: the rollout's sampling seed, the dataloader's order and the training
    instances' base seed (seed 0 is the recipe's own)."""
    if seed == 0:
        return []
    return [f"actor_rollout_ref.rollout.seed={42 + seed}", f"data.seed={seed}", f"asyncweb.tasks.seed={seed}"]


def arm_run_name(arm: str, seed: int) -> str:
    """Run folder of an arm's seed under ``--out``: the arm's name for seed 0, ``ARM_seedN`` for the others."""
    return arm if seed == 0 else f"{arm}_seed{seed}"


def _same_value(got, text: str) -> bool:
    """Whether a resolved config value is what the override ``key=text`` sets."""
    want = yaml.safe_load(text)
    if isinstance(got, int | float) and not isinstance(got, bool):
        try:
            return float(got) == float(want)
        except (TypeError, ValueError):
            return False
    return got == want


def check_arm_settings(arm: str, run_name: str, overrides: Sequence[str], recorded: dict | None, run_dir: Path) -> None:
    """Refuse to report a recorded run or continue a run folder under an arm whose overrides it was not trained
    with (an arm's definition changed since, e.g. ``sync_reinforce`` trains every group since 2026-12-06): the
    ``results.json`` entry's ``arm_overrides`` must set what ``overrides`` set (in any order), and the run folder's
    resolved ``config.yaml`` must hold each of them. An entry recorded before ``arm_overrides`` existed, without its
    folder, is refused for an arm of :data:`REDEFINED_ARMS` and not checked otherwise."""
    config_path = RunFolder(run_dir).config_path
    if recorded is not None and "arm_overrides" in recorded:
        if _as_settings(recorded["arm_overrides"]) != _as_settings(overrides):
            raise SystemExit(
                f"{run_name} is recorded with the overrides {recorded['arm_overrides']}, but its arm now sets "
                f"{list(overrides)}: rename its folder and results.json entry, or use another --out"
            )
    elif recorded is not None and arm in REDEFINED_ARMS and not config_path.exists():
        raise SystemExit(
            f"{run_name} is recorded without the overrides it was trained with and its folder is not in "
            f"{run_dir.parent}; arm {arm} changed on {REDEFINED_ARMS[arm]}: rename its results.json entry (a "
            f"sync_reinforce run from before is sync_reinforce_filtered's), or use another --out"
        )
    if not config_path.exists():
        return
    config = OmegaConf.load(config_path)
    for override in overrides:
        key, _, text = override.partition("=")
        got = OmegaConf.select(config, key, default="<unset>")
        if not _same_value(got, text):
            raise SystemExit(
                f"{run_dir} was trained with {key}={got}, but its arm now sets {override}: rename the folder and "
                "its results.json entry, or use another --out"
            )


def _as_settings(overrides: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` overrides as the settings they make (the last of a key wins, as on the command line)."""
    return dict(override.partition("=")[::2] for override in overrides)
