"""What ``bench learning`` reads from a finished arm (environment steps, branch members) and its warm-start default."""

import json

import pytest

from verl_asyncweb.bench.learning.rl import checked_trainer, run_arm
from verl_asyncweb.bench.learning.stages import warm_start_args
from verl_asyncweb.bench.learning.tables import arm_figure_rows, results_table
from verl_asyncweb.compare.metric_names import BRANCH_MEMBERS, ENV_STEPS, TRAINED_TRAJECTORIES, WALL_S
from verl_asyncweb.recipes_registry import compose_recipe


def _finished_run(run_dir, rows: dict[int, dict]):
    run_dir.mkdir(parents=True)
    lines = [json.dumps({"step": step, "data": {WALL_S: 60.0 * step, **data}}) for step, data in rows.items()]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "summary.json").write_text(json.dumps({"last_step": max(rows)}))
    (run_dir / "bench_memory.json").write_text(json.dumps({"peak_used_mib": 2048}))


def _arm(tmp_path, name, rows):
    """``run_arm`` on a run folder that already reached its steps: it reads the figures and runs nothing."""
    _finished_run(tmp_path / name, rows)
    return run_arm(name, [], tmp_path / "warm", tmp_path, max(rows), [])


def test_an_arm_reports_its_environment_steps_and_branch_members_per_step(tmp_path):
    rows = {
        1: {ENV_STEPS: 30.0, BRANCH_MEMBERS: 6.0, TRAINED_TRAJECTORIES: 8.0},
        2: {ENV_STEPS: 22.0, BRANCH_MEMBERS: 4.0, TRAINED_TRAJECTORIES: 8.0},
        3: {ENV_STEPS: 5.0, BRANCH_MEMBERS: 2.0, TRAINED_TRAJECTORIES: 4.0},
    }
    result = _arm(tmp_path, "branch_credit", rows)
    assert result["env_steps"] == 57.0
    assert result["env_steps_by_step"] == [[1, 30.0], [2, 52.0], [3, 57.0]]  # played up to each step
    assert result["branch_members_per_step"] == pytest.approx(4.0)
    assert (result["steps"], result["rl_wall_s"], result["trained_trajs_per_hour"]) == (3, 180.0, 400.0)


def test_a_run_without_branching_or_from_before_the_env_steps_metric_shows_none(tmp_path):
    plain = _arm(tmp_path, "rl", {1: {ENV_STEPS: 9.0}, 2: {ENV_STEPS: 7.0}})
    assert (plain["env_steps"], plain["branch_members_per_step"]) == (16.0, None)
    # One step without the metric (an older attempt's): a partial sum would undercount, so none is given.
    older = _arm(tmp_path, "old", {1: {}, 2: {ENV_STEPS: 7.0}})
    assert (older["env_steps"], older["env_steps_by_step"]) == (None, None)
    record = {
        "demo_episodes": 10, "demo_steps": 20, "demo_s": 5, "warm_start_steps": 100, "warm_start_s": 60,
        "warm_start_loss_first": 2.0, "warm_start_loss_last": 0.5, "held_out_before": 0.25, "eval_instances": 4,
        "temperature": 0.7,
        "arms": [{**plain, "held_out_after": 0.5, "seed": 0}, {**older, "held_out_after": 0.25, "seed": 1}],
    }  # fmt: skip
    runs_table = results_table(record).split("\n\n")[1]  # the per-run table, before the per-arm ones
    rows = [line for line in runs_table.splitlines() if line.startswith(("| rl | 0 |", "| old | 1 |"))]
    assert [row.split(" | ")[3] for row in rows] == ["16", "n/a"]  # the env steps column
    assert [row.split(" | ")[-2] for row in rows] == ["n/a", "n/a"]  # members/step


@pytest.mark.parametrize(
    ("recipe", "steps", "expected"),
    [
        ("laptop_multistep", None, 1000),
        ("laptop_learning", None, 200),
        ("my_recipe", None, 200),
        ("laptop_multistep", 50, 50),
    ],
)
def test_the_warm_start_runs_the_recipes_default_steps_unless_given(tmp_path, recipe, steps, expected):
    demos, warm = tmp_path / "demos", tmp_path / "warm"
    args = warm_start_args(demos, warm, "small", steps, recipe)
    assert args == [f"--demos={demos}", f"--out={warm}", "--size=small", f"--steps={expected}"]


@pytest.mark.parametrize(
    ("recipe", "overrides", "steps"),
    [
        ("laptop_learning", [], 40),
        ("laptop_multistep", [], 50),
        ("laptop_multistep", ["trainer.total_training_steps=7"], 7),
    ],
)
def test_an_arm_runs_the_recipes_training_steps_unless_given(recipe, overrides, steps):
    assert checked_trainer(compose_recipe(recipe, overrides), recipe, overrides).total_training_steps == steps


def test_a_recipe_that_saves_no_checkpoint_is_refused_before_anything_runs():
    with pytest.raises(SystemExit, match="trainer.save_freq is 0 in laptop_multistep .*needs saved checkpoints"):
        overrides = ["trainer.save_freq=0"]
        checked_trainer(compose_recipe("laptop_multistep", overrides), "laptop_multistep", overrides)


def test_each_arms_figures_are_pooled_over_its_seeds_with_an_interval():
    def run(arm, seed, steps_to_success, wall_min, env_steps=None):
        return {
            "arm": arm, "seed": seed, "held_out_steps_to_success": steps_to_success,
            "held_out_invalid_action_rate": 0.5, "env_steps": env_steps, "trained_trajs_per_hour": 300.0,
            "rl_wall_s": wall_min * 60,
        }  # fmt: skip

    record = {"arms": [run("rl", 0, 2.0, 20), run("rl", 1, 4.0, 30), run("rl", 2, 3.0, 40), run("const", 0, 3.5, 25)]}
    record["arms"] += [run("raftpp", 0, 2.0, 20, env_steps=900.0), run("raftpp", 1, 2.0, 20, env_steps=1100.0)]
    record["arms"] += [run("raftpp", 2, 2.0, 20)]  # recorded before env_steps
    header, _, *rows = ([cell.strip() for cell in line.strip("|").split("|")] for line in arm_figure_rows(record)[1:])
    by_arm = {cells[0]: dict(zip(header, cells, strict=True)) for cells in rows}
    rl, const = by_arm["rl"], by_arm["const"]
    assert rl["seeds"] == "3" and const["seeds"] == "1"
    # The seeds' mean 3 with Student's t interval: 3 ± t(0.975, 2) · 1 / √3 = 3 ± 2.48, wider than their range.
    assert rl["steps to success"] == "3.00 [0.52, 5.48]"
    assert rl["RL wall min"] == "30.0 [5.2, 54.8]"  # seconds shown as minutes
    assert rl["invalid-action rate"] == "0.50 [0.50, 0.50]"
    assert rl["env steps"] == "n/a"  # no seed recorded it
    assert const["steps to success"] == "3.50"  # one seed: no interval
    # A figure two of three seeds recorded: their mean, and how many it pools.
    assert by_arm["raftpp"]["seeds"] == "3" and by_arm["raftpp"]["env steps"].endswith(" (of 2)")
    assert by_arm["raftpp"]["env steps"].startswith("1000 [")
    # An interval is cut to the values the figure can take: 1 ± 12.7 · 1 / √2 passes zero, 0.5 ± 6.4 passes 1.
    record = {"arms": [run("vanilla", 0, 0.0, 10), run("vanilla", 1, 2.0, 20)]}
    record["arms"][0]["held_out_invalid_action_rate"] = 0.0
    header, _, row = ([cell.strip() for cell in line.strip("|").split("|")] for line in arm_figure_rows(record)[1:])
    vanilla = dict(zip(header, row, strict=True))
    assert vanilla["steps to success"] == "1.00 [0.00, 13.71]"
    assert vanilla["invalid-action rate"] == "0.25 [0.00, 1.00]"
    assert vanilla["RL wall min"] == "15.0 [0.0, 78.5]"


def test_the_checkpoint_lines_name_the_environment_steps_played_by_each_checkpoint():
    curve = [(0.0, 0, 0.25), (600.0, 10, 0.3), (1200.0, 20, 0.4)]
    run = {
        "arm": "branch", "seed": 0, "steps": 20, "rl_wall_s": 1200.0, "held_out_after": 0.4,
        "trained_trajs_per_hour": 300.0, "peak_used_mib": 1024, "held_out_curve": curve,
    }  # fmt: skip
    record = {
        "demo_episodes": 10, "demo_steps": 20, "demo_s": 5, "warm_start_steps": 100, "warm_start_s": 60,
        "warm_start_loss_first": 2.0, "warm_start_loss_last": 0.5, "held_out_before": 0.25, "eval_instances": 4,
        "temperature": 0.7,
        "arms": [
            {**run, "env_steps_by_step": [[step, 50.0 * step] for step in range(1, 21)]},
            {**run, "arm": "old", "run": "old"},  # recorded before the per-step environment steps
        ],
    }  # fmt: skip
    lines = [line for line in results_table(record).splitlines() if "held-out by checkpoint" in line]
    assert lines == [
        "branch, held-out by checkpoint: step 0 (0.0 min) 0.250, step 10 (10.0 min, 500 env steps) 0.300, "
        "step 20 (20.0 min, 1000 env steps) 0.400",
        "old, held-out by checkpoint: step 0 (0.0 min) 0.250, step 10 (10.0 min) 0.300, step 20 (20.0 min) 0.400",
    ]
