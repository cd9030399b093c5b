"""``python -m verl_asyncweb.bench learning``: does RL improve the agent on this machine, and is it the RL signal?

The whole experiment in one invocation, every stage in its own folder under ``--out`` (a stage whose output
exists is reused, so an interrupted experiment continues):

1. demonstrations of the oracles on the recipe's training instances (:mod:`verl_asyncweb.learning.demos`) of the
   tasks named by ``--demo-tasks`` (by default three of the six, :data:`.stages.DEMO_TASKS`; ``all`` for every one);
2. a deliberately partial supervised warm start of the offline ``small`` model on them;
3. held-out evaluation of the warm start (:mod:`verl_asyncweb.learning.evaluate`);
4. one RL run per arm and seed through ``verl_asyncweb.main`` (``--recipe``, ``laptop_learning`` by default,
   from the warm start), each evaluated on the same held-out instances: ``rl`` (the recipe), ``control`` (the
   same run with the advantage sign flipped, ``asyncweb.algo.negate_advantage=true``) and the loss variants of
   :data:`.arms.ARMS`. ``--seeds N`` runs every arm with N sampling/data seeds (:func:`.arms.seed_overrides`), all
   from the one warm start; the table then gives each arm's mean held-out success with a 95% confidence interval
   (bootstrap over held-out episodes and seeds) and which differences between arms exclude zero.

Reported: demonstration count and recording time, warm-start time, environment (policy) steps and RL wall
time, held-out success before and after (overall and per task; ``--eval-checkpoints`` also at every saved
checkpoint), trajectories per hour, peak memory, and for branch rollouts the episodes played on from a restored
branch point per step; with seeds, each arm's mean of its per-run figures with a 95% interval over its seeds
(:func:`.tables.arm_figure_rows`); ``success_vs_wall.png`` plots each arm's training success rate against wall time
with the held-out points, ``success_vs_env_steps.png`` the held-out points against the policy steps played by then.
An interrupted arm, or a larger ``--rl-steps`` than an arm's finished run, continues from its latest checkpoint
(:func:`.rl.arm_command`).

``results.json`` carries the experiment to another machine: copied into a fresh ``--out``, only the runs it does not
hold are run there (:func:`.record.earlier_record`), from weights checked to be the same
(:func:`.record.weights_digest`); other weights are refused. Its ``warm_start`` folder copied beside it is used as
it is; without it the warm start is made again and kept only if it comes out as the same weights (it does when the
demonstrations are recorded again identically: score panel hidden, deterministic page clock). A recorded run is run
again only when its folder is there, or after its entry is removed from ``results.json``. Records, demonstrations
and warm starts that do not say whether MiniWoB++'s score panel was shown were made with it shown (``--set
asyncweb.env.miniwob_score_panel=true`` continues them; :func:`.record.evaluation_settings`,
:func:`.record.check_score_panel`).

This module runs the stages in order; the package's modules hold what they run: :mod:`.arms` (what each arm
trains), :mod:`.stages` (demonstrations, warm start, held-out evaluation), :mod:`.rl` (an arm's RL run),
:mod:`.record` (``results.json``), :mod:`.tables` and :mod:`.plots` (what is printed and drawn).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from verl_asyncweb.bench.learning.arms import ARMS, arm_run_name, check_arm_settings, seed_overrides
from verl_asyncweb.bench.learning.plots import plot, plot_env_steps
from verl_asyncweb.bench.learning.record import (
    HELD_OUT_BEFORE,
    by_arm_and_seed,
    check_score_panel,
    check_weights,
    earlier_record,
    evaluation_settings,
    recorded_outcomes,
    recorded_runs,
    weights_digest,
    write_record,
)
from verl_asyncweb.bench.learning.rl import checked_trainer, run_arm, wall_by_step
from verl_asyncweb.bench.learning.stages import (
    DEMO_TASKS,
    WARM_STEPS,
    demos_args,
    evaluate_held_out,
    run_python,
    warm_start_args,
)
from verl_asyncweb.bench.learning.tables import results_table
from verl_asyncweb.compare.metric_names import INVALID_ACTION_RATE, STEPS_PER_TRAJ_SUCCESS
from verl_asyncweb.learning.evaluate import checkpoint_steps
from verl_asyncweb.recipes_registry import compose_recipe

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench learning", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench_learning"))
    parser.add_argument("--size", default="small", help="offline model size of the warm start")
    parser.add_argument("--instances", type=int, default=100, help="demonstrated instances per task")
    parser.add_argument(
        "--demo-tasks",
        default=None,
        help="task sources to demonstrate, or 'all' (the recipe's training tasks); RL always trains on the recipe's, "
        f"so tasks left out here are learned from the reward alone (default, per recipe: {DEMO_TASKS})",
    )
    parser.add_argument(
        "--warm-steps",
        type=int,
        default=None,
        help=f"supervised warm-start steps (default, per recipe: {WARM_STEPS}; a partial warm start for one-action "
        "episodes, five passes over the demonstrations for multi-step ones)",
    )
    parser.add_argument(
        "--rl-steps",
        type=int,
        default=None,
        help="RL steps per arm (default: the recipe's trainer.total_training_steps)",
    )
    parser.add_argument("--eval-instances", type=int, default=10, help="held-out instances per task")
    parser.add_argument("--temperature", type=float, default=0.7, help="evaluation temperature (the rollout's)")
    parser.add_argument("--arms", default="rl,control", help=f"comma-separated, from {list(ARMS)}")
    parser.add_argument(
        "--seeds", type=int, default=1, help="sampling/data seeds per arm, all from the one warm start (default: 1)"
    )
    parser.add_argument(
        "--recipe",
        default="laptop_learning",
        help="the RL recipe (its tasks and agent settings are demonstrated and evaluated): laptop_learning "
        "(one action per episode) or laptop_multistep (default: %(default)s)",
    )
    parser.add_argument(
        "--eval-checkpoints",
        action="store_true",
        help="keep and evaluate every saved checkpoint of each arm (trainer.save_freq), not only the last",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override of the recipe for the demonstrations, evaluations and every arm (repeatable), e.g. "
        "asyncweb.agent.click_target=coordinate",
    )
    return parser


def _make_warm_start(args: argparse.Namespace, earlier: dict, evaluation: dict) -> None:
    """Demonstrations (unless ``--out`` holds them) and the warm start on them, in ``--out``; demonstrations whose
    score panel differs from ``evaluation``'s are refused before the warm start trains on them."""
    demos, model = args.out / "demos", args.out / "warm_start"
    if "warm_start_digest" in earlier:
        logger.info(
            "%s holds runs of the warm start sha256 %s, which %s does not hold: making it again (kept only if it "
            "comes out as the same weights)",
            args.out / "results.json",
            earlier["warm_start_digest"][:12],
            model,
        )
    if not (demos / "manifest.json").exists():
        demo_tasks = args.demo_tasks or DEMO_TASKS.get(args.recipe, "all")
        demo_tasks = None if demo_tasks == "all" else demo_tasks
        logger.info("demonstrations -> %s (log: %s)", demos, args.out / "demos.log")
        run_python(
            "verl_asyncweb.learning.demos",
            *demos_args(args.instances, demos, demo_tasks, args.set, args.recipe),
            log=args.out / "demos.log",
        )
    # Refused before training a warm start on them.
    check_score_panel(json.loads((demos / "manifest.json").read_text()), evaluation, demos)
    logger.info("warm start -> %s (log: %s)", model, args.out / "warm_start.log")
    run_python(
        "verl_asyncweb.learning.warm_start",
        *warm_start_args(demos, model, args.size, args.warm_steps, args.recipe),
        log=args.out / "warm_start.log",
    )


def _held_out_after(args: argparse.Namespace, run_name: str, before: float) -> dict:
    """Held-out evaluation of a run's last saved checkpoint (of every saved one with ``--eval-checkpoints``): the
    figures ``results.json`` records of it, its curve starting at the warm start's success ``before``."""
    run_dir, walls = args.out / run_name, wall_by_step(args.out / run_name)
    saved = checkpoint_steps(run_dir)
    if not saved:
        raise RuntimeError(f"{run_dir} saved no checkpoint to evaluate (trainer.save_freq must be > 0)")
    curve = [(0.0, 0, before)]
    for step in saved if args.eval_checkpoints else saved[-1:]:
        logger.info("%s: held-out evaluation of step %d", run_name, step)
        after = evaluate_held_out(
            run_dir, args.eval_instances, args.temperature, args.out / f"eval_{run_name}.log", step
        )
        curve.append((walls[step], step, after["success"]))
    return dict(
        held_out_step=saved[-1],
        held_out_after=after["success"],
        held_out_after_by_task=after["success_by_task"],
        held_out_after_steps_by_task=after.get("steps_to_success_by_task"),
        held_out_after_outcomes=recorded_outcomes(after),
        held_out_steps_to_success=after["metrics"].get(STEPS_PER_TRAJ_SUCCESS),
        held_out_invalid_action_rate=after["metrics"].get(INVALID_ACTION_RATE),
        held_out_curve=curve,
    )


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    unknown = [arm for arm in args.arms.split(",") if arm not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; valid arms are {list(ARMS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args.out.mkdir(parents=True, exist_ok=True)
    demos, model = args.out / "demos", args.out / "warm_start"
    config = compose_recipe(args.recipe, args.set)
    evaluation = evaluation_settings(config, args.recipe, args.set, args.eval_instances, args.temperature)
    trainer = checked_trainer(config, args.recipe, args.set)
    earlier = earlier_record(args.out / "results.json", evaluation)

    from verl_asyncweb.learning.warm_start import DEMOS_MANIFEST_FILE, WARM_START_FILE

    made_here = not (model / WARM_START_FILE).exists()
    if made_here:
        _make_warm_start(args, earlier, evaluation)
    # The warm start keeps a copy of its demonstrations' manifest: a carried one comes without the demonstrations.
    manifest_path = model / DEMOS_MANIFEST_FILE if (model / DEMOS_MANIFEST_FILE).exists() else demos / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    check_score_panel(manifest, evaluation, model)
    warm = json.loads((model / WARM_START_FILE).read_text())
    digest = weights_digest(model)
    check_weights(earlier, digest, args.out / "results.json", made_here)
    same_weights = earlier.get("warm_start_digest") == digest
    if same_weights and all(key in earlier for key in HELD_OUT_BEFORE):
        # The same weights, evaluated when the kept runs were: their gains are read against that draw.
        held_out_before = {key: earlier[key] for key in HELD_OUT_BEFORE}
    else:
        logger.info("held-out evaluation of the warm start (log: %s)", args.out / "eval_warm_start.log")
        before = evaluate_held_out(
            model,
            args.eval_instances,
            args.temperature,
            args.out / "eval_warm_start.log",
            overrides=args.set,
            recipe=args.recipe,
        )
        figures = (before["success"], before["success_by_task"], before.get("steps_to_success_by_task"))
        held_out_before = dict(zip(HELD_OUT_BEFORE, (*figures, recorded_outcomes(before)), strict=True))
    stage_times = {"demo_s": manifest["record_s"], "warm_start_s": warm["train_s"]}
    if made_here and same_weights:
        # Made again the same: the record keeps the times of the stages its runs came from.
        logger.info("made again here in %.0f s (demonstrations) and %.0f s (warm start)", *stage_times.values())
        stage_times = {key: earlier.get(key, value) for key, value in stage_times.items()}
    runs = [(name, seed) for name in args.arms.split(",") for seed in range(args.seeds)]
    rl_steps = args.rl_steps or trainer.total_training_steps
    record = {
        "demo_episodes": manifest["episodes"],
        "demo_steps": manifest["steps"],
        "demo_s": stage_times["demo_s"],
        "demo_tasks": sorted({name for name, _ in manifest["instances"]}),
        "warm_start_steps": warm["steps"],
        "warm_start_s": stage_times["warm_start_s"],
        "warm_start_loss_first": warm["loss_first"],
        "warm_start_loss_last": warm["loss_last"],
        "warm_start_digest": digest,
        **evaluation,
        **held_out_before,
    }
    arms = recorded_runs(earlier)
    for run_name, entry in arms.items():  # every recorded run is reported, not only those of --arms
        arm, seed = entry.get("arm", run_name), int(entry.get("seed", 0))
        if arm in ARMS:
            overrides = [*ARMS[arm], *seed_overrides(seed)]
            check_arm_settings(arm, run_name, overrides, entry, args.out / run_name)
    for name, seed in runs:
        run_name = arm_run_name(name, seed)
        overrides = [*ARMS[name], *seed_overrides(seed)]
        if run_name not in arms:  # a folder this command continues (recorded runs were checked above)
            check_arm_settings(name, run_name, overrides, None, args.out / run_name)
        if run_name in arms and not (args.out / run_name).exists():
            if arms[run_name]["steps"] != rl_steps:
                raise SystemExit(
                    f"{run_name} is recorded at {arms[run_name]['steps']} steps, not {rl_steps}, and its folder is "
                    f"not in {args.out} to continue it: give --rl-steps {arms[run_name]['steps']} or another --out"
                )
            logger.info("%s: kept as results.json records it (no run folder here)", run_name)
            continue
        logger.info("%s: to %d RL steps (log: %s)", run_name, rl_steps, args.out / f"{run_name}.log")
        result = run_arm(
            run_name,
            overrides,
            model,
            args.out,
            rl_steps,
            args.set,
            args.recipe,
            every_checkpoint=args.eval_checkpoints,
        )
        result.update(
            arm=name,
            seed=seed,
            run=run_name,
            arm_overrides=overrides,
            **_held_out_after(args, run_name, record["held_out_before"]),
        )
        arms[run_name] = result
        record["arms"] = by_arm_and_seed(arms.values())
        write_record(args.out / "results.json", record)
    record["arms"] = by_arm_and_seed(arms.values())
    plot(record["arms"], record["held_out_before"], args.out / "success_vs_wall.png")
    plot_env_steps(record["arms"], record["held_out_before"], args.out / "success_vs_env_steps.png")
    print(results_table(record))
    return 0
