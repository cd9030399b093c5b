"""compare pools runs of one setup (seeds) into mean and 95% CI, and marks which differences the CIs resolve."""

import json
import re

import pytest

from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.compare.cli import main as compare_main
from verl_asyncweb.compare.confidence import difference_interval, mean_interval
from verl_asyncweb.compare.plots import _variant_points
from verl_asyncweb.compare.runs import load_runs, setup_key
from verl_asyncweb.compare.table import TableRow
from verl_asyncweb.compare.variants import group_variants, render_variants, run_samples

HELD_OUT = "eval/held-out_T0.7/success_rate"


def _run(root, name: str, step_norm: str, seed: int, train_success: list[float], held_out: list[int]):
    """A run folder: its config (seed and own paths differ between seeds), training success per step and a
    held-out evaluation of its last checkpoint with one outcome per episode."""
    run = root / name
    (run / "global_step_3").mkdir(parents=True)
    (run / "config.yaml").write_text(
        f"asyncweb:\n  recipe: laptop_multistep\n  algo:\n    step_norm: {step_norm}\n  tasks:\n    seed: {seed}\n"
        f"actor_rollout_ref:\n  rollout:\n    seed: {42 + seed}\n  actor:\n    optim:\n      lr: 5.0e-05\n"
        f"data:\n  seed: {seed}\n  train_files: {run}/data/train.parquet\n"
        f"trainer:\n  default_local_dir: {run}\n"
    )
    (run / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": step, "data": {M.SUCCESS_RATE: rate, M.WALL_S: 60.0 * step}}) + "\n"
            for step, rate in enumerate(train_success, 1)
        )
    )
    outcomes = [["login-user", success, 3] for success in held_out]
    (run / "global_step_3" / "eval_held-out_T0.7.json").write_text(
        json.dumps({"success": sum(held_out) / len(held_out), "outcomes": outcomes})
    )
    return run


@pytest.fixture
def six_runs(tmp_path):
    """traj: 3 seeds at ~70% held-out success; const: 3 seeds at ~20%, 20 episodes each; training success alike."""
    arms = {"traj": [(14, 0.5), (15, 0.55), (13, 0.45)], "const": [(4, 0.5), (3, 0.45), (5, 0.55)]}
    runs = []
    for arm, seeds in arms.items():
        for seed, (successes, train) in enumerate(seeds):
            name = arm if seed == 0 else f"{arm}_seed{seed}"
            held_out = [1] * successes + [0] * (20 - successes)
            runs.append(_run(tmp_path, name, arm, seed, [0.3, 0.4, train], held_out))
    return runs


def test_seeds_and_own_paths_do_not_make_another_setup_but_a_setting_does():
    base = {"trainer": {"default_local_dir": "/r/a"}, "data": {"seed": 1, "train_files": "/r/a/data/t.parquet"}}
    other_seed = {"trainer": {"default_local_dir": "/r/b"}, "data": {"seed": 2, "train_files": "/r/b/data/t.parquet"}}
    assert setup_key(base) == setup_key(other_seed)
    assert setup_key(base) != setup_key({**base, "actor": {"lr": 1e-4}})
    assert setup_key({"tasks": {"seed": 0}}) == setup_key({"tasks": {"seed": 3}})
    assert setup_key({"tasks": {"seeds": "held-out"}}) != setup_key({"tasks": {"seeds": "train"}})  # not a seed
    # Saving and logging are not the setup: bench learning's seed 0 may keep every checkpoint and a later seed one.
    saving = {"trainer": {"save_freq": 10, "max_actor_ckpt_to_keep": None, "experiment_name": "a"}}
    other_saving = {"trainer": {"save_freq": 20, "max_actor_ckpt_to_keep": 1, "experiment_name": "b"}}
    assert setup_key(saving) == setup_key(other_saving)
    assert setup_key(saving) != setup_key({"trainer": {**saving["trainer"], "total_training_steps": 20}})


def test_runs_of_one_setup_are_pooled_with_seeds_and_episodes_resampled(six_runs):
    runs = load_runs(six_runs)
    variants = group_variants(runs)
    assert [(v.name, [run.name for run in v.runs]) for v in variants] == [
        ("traj", ["traj", "traj_seed1", "traj_seed2"]),
        ("const", ["const", "const_seed1", "const_seed2"]),
    ]
    row = TableRow("held-out success", HELD_OUT, "final")
    assert run_samples(runs[0], row) == [1.0] * 14 + [0.0] * 6  # the episodes, not the rate
    traj = [run_samples(run, row) for run in variants[0].runs]
    interval = mean_interval(traj)
    assert interval.mean == pytest.approx((14 + 15 + 13) / 60) and interval.seeds == 3 and interval.values == 60
    assert interval.low < interval.mean < interval.high

    lines = render_variants(variants, [row, TableRow("success rate, final", M.SUCCESS_RATE, "final")])
    text = "\n".join(lines)
    assert f"| held-out success | {interval.format()} |" in text
    held_out_diff = difference_interval(traj, [run_samples(run, row) for run in variants[1].runs])
    assert held_out_diff.resolved and held_out_diff.mean == pytest.approx((42 - 12) / 60)
    interval = r"\[[-+]0\.\d+, [-+]0\.\d+\]"
    assert re.search(
        rf"\| traj − const \| held-out success \| \+0\.500 {interval} \| {interval} \(Holm, 2\) \| yes \|", text
    )
    # Training success: equal means, 3 values a side: not resolved.
    assert re.search(
        rf"\| traj − const \| success rate, final \| \+0\.000 {interval} \| {interval} \(Holm, 2\) \| no \|", text
    )


def test_the_variant_plot_draws_the_mean_and_its_interval_at_each_step(six_runs):
    traj = group_variants(load_runs(six_runs))[0]
    points = _variant_points(traj, M.SUCCESS_RATE)
    assert [step for step, *_ in points] == [1.0, 2.0, 3.0]
    assert points[0][1:] == pytest.approx((0.3, 0.3, 0.3))  # every seed alike: no spread
    step, mean, low, high = points[2]
    assert mean == pytest.approx(0.5) and low < mean < high


def test_compare_prints_the_pooled_table_when_runs_share_a_setup(six_runs, tmp_path, capsys):
    assert compare_main([str(run) for run in six_runs] + ["--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "Variants: runs of one setup (seeds) pooled" in out
    assert "| metric | traj (3 runs) | const (3 runs) |" in out
    assert (tmp_path / "cmp" / "plots" / "variants" / "asyncweb__success_rate.png").is_file()
    assert "traj − const" in (tmp_path / "cmp" / "table.md").read_text()


def test_runs_of_distinct_setups_get_no_pooled_table(six_runs, tmp_path, capsys):
    assert compare_main([str(six_runs[0]), str(six_runs[3]), "--out", str(tmp_path / "cmp")]) == 0
    assert "Variants:" not in capsys.readouterr().out


def test_variants_whose_evaluations_record_instances_are_also_compared_instance_by_instance(tmp_path):
    # Seeds spread widely (30, 10, 20 of 80 instances solved), and traj solves the same instances as const plus 8
    # more in every seed: unpaired, the seeds' spread hides the 10 points; paired by instance, it is resolved.
    runs = []
    for arm, extra in (("traj", 8), ("const", 0)):
        for seed, solved in enumerate((30, 10, 20)):
            name = arm if seed == 0 else f"{arm}_seed{seed}"
            held_out = [1] * (solved + extra) + [0] * (80 - solved - extra)
            run = _run(tmp_path, name, arm, seed, [0.3, 0.4, 0.5], held_out)
            outcomes = [
                {"task": "login-user", "seed": instance, "raw_score": 2.0 * success - 1, "success": success, "steps": 3}
                for instance, success in enumerate(held_out)
            ]
            evaluation = run / "global_step_3" / "eval_held-out_T0.7.json"
            evaluation.write_text(json.dumps({"success": sum(held_out) / 80, "outcomes": outcomes}))
            runs.append(run)
    variants = group_variants(load_runs(runs))
    text = "\n".join(render_variants(variants, [TableRow("held-out success", HELD_OUT, "final")]))
    interval = r"\[[-+]0\.\d+, [-+]0\.\d+\]"
    assert re.search(
        rf"\| traj − const \| held-out success \| \+0\.100 {interval} \| {interval} \| no "
        rf"\| \+0\.100 {interval} \| yes \|",
        text,
    ), text
    # A run whose evaluation predates per-instance records: nothing to pair with.
    evaluation = runs[0] / "global_step_3" / "eval_held-out_T0.7.json"
    evaluation.write_text(
        json.dumps({"success": 0.475, "outcomes": [["login-user", 1, 3]] * 38 + [["login-user", 0, 3]] * 42})
    )
    text = "\n".join(
        render_variants(group_variants(load_runs(runs)), [TableRow("held-out success", HELD_OUT, "final")])
    )
    assert text.rstrip().endswith("| no | n/a | n/a |"), text
