"""Evaluating a run's checkpoints one by one, and the wall-time axis of a run that was resumed."""

import json
import math

import pytest
from scipy import stats

from verl_asyncweb.bench.learning.plots import plot, plot_env_steps
from verl_asyncweb.bench.learning.rl import arm_command, wall_by_step
from verl_asyncweb.learning.evaluate import checkpoint_model, checkpoint_steps, default_output, resolve


def _run_with_checkpoints(run_dir, steps, without_weights=()):
    (run_dir).mkdir(parents=True)
    (run_dir / "config.yaml").write_text("asyncweb: {}\n")
    for step in steps:
        model = run_dir / f"global_step_{step}" / "actor" / "huggingface"
        model.mkdir(parents=True)
        if step not in without_weights:
            (model / "model.safetensors").write_bytes(b"")
    return run_dir


def test_a_runs_checkpoints_are_picked_by_step_and_only_with_weights(tmp_path):
    run_dir = _run_with_checkpoints(tmp_path / "run", [10, 20, 5, 30], without_weights=[30])
    assert checkpoint_steps(run_dir) == [5, 10, 20]
    assert checkpoint_model(run_dir) == run_dir / "global_step_20" / "actor" / "huggingface"
    assert checkpoint_model(run_dir, 10) == run_dir / "global_step_10" / "actor" / "huggingface"
    with pytest.raises(FileNotFoundError, match=r"no checkpoint global_step_30 .*saved steps: \[5, 10, 20\]"):
        checkpoint_model(run_dir, 30)
    assert resolve(run_dir, "laptop_learning", step=5)[0] == run_dir / "global_step_5" / "actor" / "huggingface"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="--step picks a checkpoint of a run folder"):
        resolve(tmp_path / "model", "laptop_learning", step=5)


def test_an_evaluation_is_written_next_to_the_checkpoint_it_evaluated(tmp_path):
    model = tmp_path / "run" / "global_step_10" / "actor" / "huggingface"
    run_result = {"model": str(model), "run_dir": str(tmp_path / "run"), "seeds": "held-out", "temperature": 0.7}
    assert default_output(run_result) == tmp_path / "run" / "global_step_10" / "eval_held-out_T0.7.json"
    model_result = {"model": str(tmp_path / "warm"), "run_dir": None, "seeds": "held-out", "temperature": 1.0}
    assert default_output(model_result) == tmp_path / "warm" / "eval_held-out_T1.json"


def _metrics(path, walls: dict[int, float]):
    path.write_text("".join(json.dumps({"step": s, "data": {"asyncweb/wall_s": w}}) + "\n" for s, w in walls.items()))


def test_wall_time_goes_on_over_a_resume_whether_or_not_the_attempt_restarted_its_clock(tmp_path):
    restarted, carried = tmp_path / "restarted", tmp_path / "carried"
    for run_dir in (restarted, carried):
        run_dir.mkdir()
        _metrics(run_dir / "metrics.jsonl", {1: 100.0, 2: 130.0, 3: 160.0})
    # Resumed from the step-2 checkpoint after step 3 was logged: steps 3 and 4 again.
    _metrics(restarted / "metrics.attempt-1.jsonl", {3: 90.0, 4: 120.0})
    _metrics(carried / "metrics.attempt-1.jsonl", {3: 220.0, 4: 250.0})
    with (restarted / "metrics.attempt-1.jsonl").open("a") as cut:  # the last line of a killed attempt
        cut.write('{"step": 5, "data": {"asyncweb/wa')
    assert wall_by_step(restarted) == {1: 100.0, 2: 130.0, 3: 220.0, 4: 250.0}
    assert wall_by_step(carried) == {1: 100.0, 2: 130.0, 3: 220.0, 4: 250.0}


def test_an_arm_saves_at_the_recipes_frequency_and_keeps_every_checkpoint_only_when_each_is_evaluated(tmp_path):
    def saving(every_checkpoint, overrides=()):
        command = arm_command(tmp_path, tmp_path / "warm", 30, list(overrides), "laptop_multistep", every_checkpoint)
        return [arg for arg in command if arg.startswith(("trainer.save_freq=", "trainer.max_actor_ckpt_to_keep="))]

    # The recipe's save_freq (10 in laptop_multistep) always applies: an interrupted arm goes on from its latest
    # checkpoint. --eval-checkpoints evaluates each, so all are kept; otherwise only the latest.
    assert saving(every_checkpoint=True) == []
    assert saving(every_checkpoint=False) == ["trainer.max_actor_ckpt_to_keep=1"]
    # A user's --set comes after the bench's and wins (Hydra applies the last).
    assert saving(False, ["trainer.max_actor_ckpt_to_keep=3"])[-1] == "trainer.max_actor_ckpt_to_keep=3"


def test_the_plot_draws_the_held_out_points_of_every_checkpoint(tmp_path):
    arm = {
        "arm": "rl",
        "curve": [(60.0, 0.2), (120.0, None), (180.0, 0.5)],
        "held_out_curve": [(0.0, 0, 0.35), (120.0, 10, 0.45), (180.0, 20, 0.6)],
    }
    figure = plot([arm], 0.35, tmp_path / "success_vs_wall.png")
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    held_out = lines["rl: held-out, warm start and checkpoints"]
    # One point per evaluated checkpoint plus the warm start, at its wall time in minutes.
    assert list(held_out.get_xdata()) == [0.0, 2.0, 3.0] and list(held_out.get_ydata()) == [0.35, 0.45, 0.6]
    training = lines["rl: training episodes"]
    assert list(training.get_xdata()) == [1.0, 3.0] and list(training.get_ydata()) == [0.2, 0.5]  # None left out
    assert (tmp_path / "success_vs_wall.png").is_file()


def test_the_held_out_points_are_plotted_at_the_environment_steps_played_by_their_checkpoint(tmp_path):
    branch = {
        "arm": "branch",
        "held_out_curve": [(0.0, 0, 0.2), (600.0, 10, 0.3), (1200.0, 20, 0.4)],
        "env_steps_by_step": [[step, 50.0 * step] for step in range(1, 21)],
    }
    older = {"arm": "rl", "held_out_curve": [(0.0, 0, 0.2), (900.0, 20, 0.5)]}  # recorded without env steps
    figure = plot_env_steps([branch, older], 0.2, tmp_path / "success_vs_env_steps.png")
    (line,) = [line for line in figure.axes[0].get_lines() if line.get_marker() == "*"]
    assert line.get_label() == "branch: held-out" and line.get_color() == "C0"
    later = plot_env_steps([older, branch], 0.2, tmp_path / "later.png")  # rl is C0 in every plot of these runs
    assert [line.get_color() for line in later.axes[0].get_lines()] == ["C1"]
    assert list(line.get_xdata()) == [0, 500.0, 1000.0] and list(line.get_ydata()) == [0.2, 0.3, 0.4]
    assert (tmp_path / "success_vs_env_steps.png").is_file()


def test_the_seeds_of_an_arm_share_its_colour_and_one_legend_entry(tmp_path):
    def run(arm, seed, held_out):
        name = arm if seed == 0 else f"{arm}_seed{seed}"
        return {"arm": arm, "seed": seed, "run": name, "curve": [(60.0, 0.3)], "held_out_curve": held_out}

    runs = [run("rl", 0, [(0.0, 0, 0.2), (60.0, 20, 0.3)]), run("rl", 1, [(0.0, 0, 0.2), (90.0, 20, 0.4)])]
    runs.append(run("sync", 0, [(0.0, 0, 0.2), (120.0, 20, 0.5)]))
    figure = plot(runs, 0.2, tmp_path / "plot.png")
    held_out = [line for line in figure.axes[0].get_lines() if line.get_marker() == "*"]
    assert [list(line.get_ydata()) for line in held_out] == [[0.2, 0.3], [0.2, 0.4], [0.2, 0.5]]  # every seed drawn
    colors = [line.get_color() for line in held_out]
    assert colors[0] == colors[1] != colors[2]
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend == [
        "rl: training episodes",
        "rl: held-out, warm start and checkpoints",
        "sync: training episodes",
        "sync: held-out, warm start and checkpoints",
    ]


def test_runs_of_an_earlier_invocation_are_named_by_their_folders(tmp_path):
    from verl_asyncweb.bench.learning.record import recorded_runs

    assert recorded_runs({}) == {}
    # Reported before seeds existed: no "run" field, the arm's name is its folder.
    old = {"arm": "rl", "steps": 30, "rl_wall_s": 1070.0, "held_out_after": 0.6, "curve": [(1070.0, 0.7)]}
    seeded = {**old, "arm": "rl", "seed": 1, "run": "rl_seed1"}
    runs = recorded_runs({"arms": [old, {**old, "arm": "control"}, seeded]})
    assert list(runs) == ["rl", "control", "rl_seed1"] and runs["rl_seed1"]["seed"] == 1
    # Reported before checkpoints were evaluated: drawn from the warm start to its last checkpoint.
    figure = plot(list(runs.values()), 0.35, tmp_path / "plot.png")
    held_out = [line for line in figure.axes[0].get_lines() if line.get_marker() == "*"]
    assert [list(line.get_ydata()) for line in held_out] == [[0.35, 0.6]] * 3


def test_the_bench_passes_its_demonstrated_tasks_and_overrides_to_the_demonstrations(tmp_path):
    from verl_asyncweb.bench.learning.stages import demos_args
    from verl_asyncweb.learning.demos import build_parser

    overrides = ["asyncweb.agent.click_target=coordinate"]
    chosen = build_parser().parse_args(demos_args(100, tmp_path, "miniwob:click-button,click-tab", overrides))
    assert (chosen.tasks, chosen.instances, chosen.out) == (["miniwob:click-button,click-tab"], 100, str(tmp_path))
    assert chosen.overrides == overrides
    default = build_parser().parse_args(demos_args(40, tmp_path, None, overrides))
    assert default.tasks is None and default.overrides == overrides  # the recipe's training tasks
    assert default.recipe == "laptop_learning"
    assert (
        build_parser().parse_args(demos_args(40, tmp_path, None, [], "laptop_multistep")).recipe == "laptop_multistep"
    )


def test_a_model_folder_is_evaluated_with_the_overrides_and_a_run_folder_with_its_own_config(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    cfg = resolve(tmp_path / "model", "laptop_learning", overrides=["asyncweb.agent.max_steps=3"]).cfg
    assert cfg.asyncweb.agent.max_steps == 3
    assert resolve(tmp_path / "model", "laptop_learning")[1].asyncweb.agent.max_steps == 1
    run_dir = _run_with_checkpoints(tmp_path / "run", [10])
    with pytest.raises(ValueError, match="evaluated with the config it trained with"):
        resolve(run_dir, "laptop_learning", overrides=["asyncweb.agent.max_steps=3"])


def test_the_bench_reuses_an_evaluation_only_when_it_ran_with_the_same_overrides(tmp_path, monkeypatch):
    from verl_asyncweb.bench.learning import stages

    calls = []

    def fake_evaluate_command(*args, log):
        calls.append(args)
        out = next(arg.split("=", 1)[1] for arg in args if arg.startswith("--out="))
        overrides = [arg.split("=", 1)[1] for arg in args if arg.startswith("--set=")]
        (tmp_path / out).write_text(json.dumps({"success": 0.5, "overrides": overrides}))

    monkeypatch.setattr(stages, "run_python", fake_evaluate_command)
    (tmp_path / "model").mkdir()
    log = tmp_path / "eval.log"
    assert stages.evaluate_held_out(tmp_path / "model", 10, 0.7, log)["overrides"] == []
    stages.evaluate_held_out(tmp_path / "model", 10, 0.7, log)
    assert len(calls) == 1, "the same evaluation again is read from its file"
    result = stages.evaluate_held_out(tmp_path / "model", 10, 0.7, log, overrides=["asyncweb.agent.max_steps=3"])
    assert len(calls) == 2 and result["overrides"] == ["asyncweb.agent.max_steps=3"]
    assert "--set=asyncweb.agent.max_steps=3" in calls[1]


def test_the_bench_pools_seeds_per_arm_and_marks_the_differences_its_intervals_resolve():
    from verl_asyncweb.bench.learning.tables import arm_summaries

    def run(arm: str, successes: int) -> dict:
        outcomes = [1] * successes + [0] * (20 - successes)
        return {"arm": arm, "held_out_after": successes / 20, "held_out_after_outcomes": outcomes}

    record = {
        "held_out_before": 0.1,
        "held_out_before_outcomes": [1] * 2 + [0] * 18,
        "arms": [run("rl", 12), run("rl", 14), run("rl", 13), run("control", 0), run("control", 2), run("vanilla", 9)],
    }
    lines = arm_summaries(record)
    row = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    # rl: three seeds (0.60, 0.70, 0.65) against the warm start evaluated once (2/20): the seeds' spread (0.05^2)
    # floored at a seed's binomial spread, plus the warm start's binomial variance; Welch-Satterthwaite degrees; the
    # smaller p of the two gains with seeds, so Holm's level is 1 - 0.05 / 2.
    seeds_part = max(0.05**2, sum(p * (1 - p) / 20 for p in (0.6, 0.7, 0.65)) / 3) / 3
    before_part = 0.1 * 0.9 / 20
    freedom = (seeds_part + before_part) ** 2 / (seeds_part**2 / 2 + before_part**2 / 19)
    half = stats.t.ppf(1 - 0.05 / 4, freedom) * math.sqrt(seeds_part + before_part)
    assert f"| [{0.55 - half:+.3f}, {0.55 + half:+.3f}] (Holm, 2) | yes |" in row["rl"]
    assert row["rl"].startswith("| rl | 0.650 [") and "(3 seeds) | +0.550 [" in row["rl"]
    # control: two seeds (0.00, 0.10), one degree of freedom: its drop of 0.05 is not resolved.
    assert row["control"].endswith("| no |") and "(2 seeds) | -0.050 [" in row["control"]
    # vanilla: one seed resolves nothing, whatever its bootstrap interval over episodes says.
    assert row["vanilla"].endswith("| one seed | no |")
    # The only pair with two seeds a side: a family of one, no correction.
    assert row["rl − control"].endswith("] | yes | n/a | n/a |") and "Holm" not in row["rl − control"]
    assert row["rl − vanilla"].endswith("| one seed | no | n/a | n/a |")
    assert sum("| yes |" in line for line in lines) == 2


def test_the_bench_tabulates_each_tasks_success_and_steps_per_arm_over_its_seeds():
    from verl_asyncweb.bench.learning.tables import task_rows

    def run(arm, by_task, steps):
        return {"arm": arm, "held_out_after_by_task": by_task, "held_out_after_steps_by_task": steps}

    record = {
        "held_out_before_by_task": {"a": 0.5, "b": 0.0},
        "held_out_before_steps_by_task": {"a": 3.0},
        "arms": [
            run("rl", {"a": 1.0, "b": 0.2}, {"a": 2.0, "b": 4.0}),
            run("rl", {"a": 0.5, "b": 0.0}, {"a": 3.0}),
            run("const", {"a": 0.0, "b": 0.0}, {}),
            {"arm": "old", "held_out_after": 0.4},  # reported before per-task figures: no column
        ],
    }
    assert task_rows(record) == [
        "",
        "| task | warm start | rl (2 seeds) | const (1 seed) |",
        "| --- | ---: | ---: | ---: |",
        "| a | 0.50 (3.0 steps) | 0.75 (2.5 steps) | 0.00 |",
        "| b | 0.00 | 0.10 (4.0 steps) | 0.00 |",
    ]
    assert task_rows({"held_out_before_by_task": {}, "arms": record["arms"]}) == []
