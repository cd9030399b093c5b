"""``bench learning``'s results.json carried to another machine: kept only from the same warm-start weights and
held-out evaluation, and its runs not run again."""

import json
from pathlib import Path

import pytest

from verl_asyncweb.bench import learning
from verl_asyncweb.bench.learning.arms import ARMS, check_arm_settings
from verl_asyncweb.bench.learning.record import (
    check_score_panel,
    check_weights,
    earlier_record,
    evaluation_settings,
    weights_digest,
    write_record,
)
from verl_asyncweb.recipes_registry import compose_recipe

EVALUATION = {
    "recipe": "laptop_multistep",
    "recipe_overrides": [],
    "eval_instances": 20,
    "temperature": 0.7,
    "miniwob_score_panel": False,
}


def _warm_start(folder, weights: bytes):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text("{}")  # not weights: outside the digest
    return folder


def test_the_digest_follows_the_weights_and_nothing_else(tmp_path):
    one = _warm_start(tmp_path / "one", b"\x00" * 4096)
    two = _warm_start(tmp_path / "two", b"\x00" * 4096)
    (two / "config.json").write_text('{"other": 1}')
    assert weights_digest(one) == weights_digest(two)
    (two / "model.safetensors").write_bytes(b"\x00" * 4095 + b"\x01")
    assert weights_digest(one) != weights_digest(two)
    (two / "model-00002.safetensors").write_bytes(b"")
    (two / "model.safetensors").write_bytes(b"\x00" * 4096)
    assert weights_digest(one) != weights_digest(two), "a second shard is part of the weights"


def test_a_record_from_other_weights_or_another_evaluation_is_refused(tmp_path):
    results = tmp_path / "results.json"
    assert earlier_record(results, EVALUATION) == {}
    results.write_text(json.dumps({"warm_start_digest": "a" * 64, **EVALUATION, "arms": []}))
    assert earlier_record(results, EVALUATION)["arms"] == []
    check_weights({"warm_start_digest": "a" * 64}, "a" * 64, results)
    with pytest.raises(SystemExit, match="other warm-start weights .*aaaaaaaaaaaa, these bbbbbbbbbbbb"):
        check_weights({"warm_start_digest": "a" * 64}, "b" * 64, results)
    with pytest.raises(SystemExit, match="eval_instances: 20 there, 10 here"):
        earlier_record(results, {**EVALUATION, "eval_instances": 10})
    # Written before the digest and the recipe were recorded: kept unchecked, as laptop_learning's.
    old = {key: EVALUATION[key] for key in ("eval_instances", "temperature")}
    results.write_text(json.dumps({**old, "arms": [{"arm": "rl"}]}))
    then = {**EVALUATION, "recipe": "laptop_learning", "miniwob_score_panel": True}
    assert earlier_record(results, then)["arms"]
    with pytest.raises(SystemExit, match="recipe: 'laptop_learning' there, 'laptop_multistep' here"):
        earlier_record(results, {**then, "recipe": "laptop_multistep"})
    check_weights({}, "b" * 64, results)


def test_a_record_is_written_whole_or_not_at_all_and_a_cut_one_is_refused_clearly(tmp_path, monkeypatch):
    results = tmp_path / "results.json"
    kept = {**EVALUATION, "arms": [{"arm": "rl"}]}
    write_record(results, kept)

    def killed(self, target):
        raise OSError("killed before the new record replaced the old")

    with monkeypatch.context() as patch:
        patch.setattr(Path, "replace", killed)
        with pytest.raises(OSError, match="killed"):
            write_record(results, {**kept, "arms": [{"arm": "rl"}, {"arm": "const"}]})
    assert json.loads(results.read_text()) == kept, "the record before the failed write is intact"
    results.write_text(results.read_text()[:40])
    with pytest.raises(SystemExit, match="results.json is not JSON .*a copy cut short"):
        earlier_record(results, EVALUATION)


def _settings(overrides: list[str]) -> dict:
    """The evaluation settings of ``laptop_multistep`` with ``overrides``, 20 instances at temperature 0.7."""
    return evaluation_settings(compose_recipe("laptop_multistep", overrides), "laptop_multistep", overrides, 20, 0.7)


def test_a_record_made_with_the_score_panel_shown_is_continued_only_with_it_shown(tmp_path):
    """Records from before ``miniwob_score_panel`` existed were made with MiniWoB++'s score panel shown (its
    default then): continued with the panel hidden their runs would not compare; setting the key continues them."""
    settings = _settings([])
    assert settings == EVALUATION
    shown = _settings(["asyncweb.env.miniwob_score_panel=true"])
    assert shown == {**EVALUATION, "miniwob_score_panel": True}, "the key is recorded on its own, not as an override"
    other = _settings(["asyncweb.agent.max_steps=3"])
    assert other["recipe_overrides"] == ["asyncweb.agent.max_steps=3"] and not other["miniwob_score_panel"]
    results, model = tmp_path / "results.json", _warm_start(tmp_path / "warm_start", b"w")
    (model / "warm_start.json").write_text("{}")
    before_the_key = {key: value for key, value in EVALUATION.items() if key != "miniwob_score_panel"}
    results.write_text(json.dumps({"warm_start_digest": "a" * 64, **before_the_key, "arms": [{"arm": "rl"}]}))
    hint = r"True there, False here\): run with --set asyncweb.env.miniwob_score_panel=true, or give another --out"
    with pytest.raises(SystemExit, match=hint):
        earlier_record(results, settings)
    assert earlier_record(results, shown)["arms"] == [{"arm": "rl"}]
    with pytest.raises(SystemExit, match=r"eval_instances: 20 there, 10 here\): give another --out"):
        earlier_record(results, {**shown, "eval_instances": 10})
    # Demonstrations (and the warm start trained on them) are held to the same setting.
    check_score_panel({"miniwob_score_panel": False}, settings, model)
    check_score_panel({}, shown, model)
    with pytest.raises(SystemExit, match="recorded with MiniWoB\\+\\+'s score panel shown: run with --set"):
        check_score_panel({}, settings, model)
    with pytest.raises(SystemExit, match="score panel hidden: run with --set asyncweb.env.miniwob_score_panel=false"):
        check_score_panel({"miniwob_score_panel": False}, shown, model)


def _run(arm: str, seed: int, after: float, steps: int = 20) -> dict:
    name = arm if seed == 0 else f"{arm}_seed{seed}"
    return {
        "arm": arm,
        "seed": seed,
        "run": name,
        "steps": steps,
        "rl_wall_s": 1200.0,
        "trained_trajs_per_hour": 400.0,
        "peak_used_mib": 9000,
        "curve": [(60.0, 0.3), (1200.0, 0.4)],
        "held_out_after": after,
        "held_out_after_outcomes": [1.0] * int(after * 10) + [0.0] * (10 - int(after * 10)),
        "held_out_curve": [(0.0, 0, 0.3), (1200.0, steps, after)],
    }


def _record(warm_start: Path, runs: list[dict]) -> dict:
    """A results.json of ``runs`` from ``warm_start``, which scored 0.3 held-out."""
    return {
        "warm_start_digest": weights_digest(warm_start),
        **EVALUATION,
        "held_out_before": 0.3,
        "held_out_before_by_task": {"click-option": 0.3},
        "held_out_before_steps_by_task": {"click-option": 4.0},
        "held_out_before_outcomes": [1.0] * 3 + [0.0] * 7,
        "arms": runs,
    }


def test_a_carried_record_keeps_its_runs_and_warm_start_figures_and_runs_only_the_missing(
    tmp_path, monkeypatch, capsys
):
    """A fresh --out holding only the copied results.json and warm_start folder: no demonstrations, no warm start
    made again, no evaluation of it; the recorded runs kept, the missing one run and merged in arm and seed order."""
    out = tmp_path / "out"
    model = _warm_start(out / "warm_start", b"weights")
    (model / "warm_start.json").write_text(
        json.dumps({"steps": 1000, "train_s": 1456.0, "loss_first": 3.1, "loss_last": 0.2})
    )
    (model / "demos_manifest.json").write_text(
        json.dumps(
            {
                "episodes": 300,
                "steps": 801,
                "record_s": 65.0,
                "instances": [["click-option", 1]],
                "miniwob_score_panel": False,
            }
        )
    )
    carried = _record(model, [_run("const", 1, 0.5), _run("rl", 0, 0.4), _run("const", 0, 0.5)])
    (out / "results.json").write_text(json.dumps(carried))

    def run_arm(name, *args, **kwargs):
        checkpoint = out / name / "global_step_20" / "actor" / "huggingface"
        checkpoint.mkdir(parents=True)
        (checkpoint / "model.safetensors").write_bytes(b"")
        figures = _run("rl", 1, 0.6)
        return {key: figures[key] for key in ("steps", "rl_wall_s", "trained_trajs_per_hour", "peak_used_mib", "curve")}

    def evaluate(path, *args, **kwargs):
        assert path == out / "rl_seed1", "only the new run is evaluated"
        outcomes = [["click-option/1", True, 2]] * 6 + [["click-option/2", False, 6]] * 4
        return {"success": 0.6, "success_by_task": {"click-option": 0.6}, "outcomes": outcomes, "metrics": {}}

    def python(*args, log):
        raise AssertionError(f"a stage ran: {args[0]}")

    monkeypatch.setattr(learning, "run_arm", run_arm)
    monkeypatch.setattr(learning, "evaluate_held_out", evaluate)
    monkeypatch.setattr(learning, "run_python", python)
    monkeypatch.setattr(learning, "wall_by_step", lambda run_dir: {20: 1200.0})
    argv = ["--out", str(out), "--recipe", "laptop_multistep", "--eval-instances", "20", "--rl-steps", "20"]
    assert learning.main([*argv, "--arms", "rl,const", "--seeds", "2"]) == 0
    written = json.loads((out / "results.json").read_text())
    assert [run["run"] for run in written["arms"]] == ["const", "const_seed1", "rl", "rl_seed1"]
    assert written["arms"][1] == json.loads(json.dumps(carried["arms"][0])), "a kept run is not rewritten"
    assert [o["success"] for o in written["arms"][3]["held_out_after_outcomes"]] == [1] * 6 + [0] * 4
    assert written["held_out_before_outcomes"] == carried["held_out_before_outcomes"]
    table = capsys.readouterr().out
    assert "held-out success of the warm start: 0.300" in table
    # The carried runs were recorded without per-task figures: the new one has a column of its own.
    assert (
        "| task | warm start | rl (1 seed) |\n| --- | ---: | ---: |\n| click-option | 0.30 (4.0 steps) | 0.60 |"
        in table
    )

    with pytest.raises(SystemExit, match="const is recorded at 20 steps, not 30"):
        learning.main([*argv[:-1], "30", "--arms", "const"])
    # A recorded run of an arm that changed since, from before entries recorded their overrides and without its
    # folder, is refused even when --arms does not name its arm (every recorded run is in the table).
    legacy = {**carried, "arms": [*carried["arms"], _run("sync_reinforce", 0, 0.5)]}
    (out / "results.json").write_text(json.dumps({**written, "arms": [*written["arms"], legacy["arms"][-1]]}))
    with pytest.raises(SystemExit, match="arm sync_reinforce changed on 2026-12-06"):
        learning.main([*argv, "--arms", "rl", "--seeds", "2"])
    (out / "results.json").write_text(json.dumps(written))
    (model / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(SystemExit, match="other warm-start weights"):
        learning.main([*argv, "--arms", "rl"])


@pytest.mark.parametrize("same_weights", [True, False])
def test_a_record_carried_without_its_warm_start_is_kept_only_if_the_one_made_again_is_the_same(
    tmp_path, monkeypatch, capsys, same_weights
):
    """results.json alone in a fresh --out: the demonstrations and warm start are made again; the same weights keep
    the recorded runs and the warm start's recorded evaluation, other weights are refused after the warm start."""
    out, stages = tmp_path / "out", []
    out.mkdir()
    recorded = _warm_start(tmp_path / "elsewhere", b"weights")
    carried = {**_record(recorded, [_run("rl", 0, 0.4)]), "demo_s": 40.0, "warm_start_s": 1786.0}
    (out / "results.json").write_text(json.dumps(carried))
    manifest = {"episodes": 300, "steps": 801, "record_s": 46.0, "instances": [["click-option", 1]]}

    def python(module, *args, log):
        stages.append(module.rsplit(".", 1)[1])
        if module.endswith("demos"):
            (out / "demos").mkdir()
            (out / "demos" / "manifest.json").write_text(json.dumps({**manifest, "miniwob_score_panel": False}))
        else:
            model = _warm_start(out / "warm_start", b"weights" if same_weights else b"other weights")
            record = {"steps": 1000, "train_s": 1500.0, "loss_first": 6.9, "loss_last": 0.27}
            (model / "warm_start.json").write_text(json.dumps(record))

    def evaluate(*args, **kwargs):
        raise AssertionError("the same weights are not evaluated again, the recorded run not at all")

    monkeypatch.setattr(learning, "run_python", python)
    monkeypatch.setattr(learning, "evaluate_held_out", evaluate)
    argv = ["--out", str(out), "--recipe", "laptop_multistep", "--eval-instances", "20", "--rl-steps", "20"]
    if not same_weights:
        with pytest.raises(SystemExit, match="the warm start made again here is other weights .* copy that warm_start"):
            learning.main([*argv, "--arms", "rl"])
        assert json.loads((out / "results.json").read_text()) == json.loads(json.dumps(carried)), "left as it was"
        return
    assert learning.main([*argv, "--arms", "rl"]) == 0
    assert stages == ["demos", "warm_start"]
    written = json.loads((out / "results.json").read_text())
    assert written["arms"] == json.loads(json.dumps(carried["arms"])) and written["held_out_before"] == 0.3
    table = capsys.readouterr().out
    assert "held-out success of the warm start: 0.300" in table
    # The stage times stay those of the warm start the runs came from, not this machine's (46 s, 1500 s).
    assert "demonstrations: 300 episodes (801 steps) in 40.0 s" in table
    assert "warm start: 1000 steps in 1786.0 s" in table


def test_a_run_trained_with_other_arm_settings_is_refused_under_the_arm(tmp_path):
    """A filtered REINFORCE run (recorded before ``sync_reinforce`` trained every group) is not reported as it."""
    run_dir = tmp_path / "sync_reinforce"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(
        "asyncweb:\n  rollout_mode: sync\n  algo: {estimator: multistep_reinforce, step_norm: traj, "
        "dynamic_sampling: true}\nalgorithm: {adv_estimator: multistep_reinforce, filter_groups: {enable: true}}\n"
    )
    with pytest.raises(SystemExit, match=r"trained with asyncweb.algo.dynamic_sampling=True, but its arm now sets"):
        check_arm_settings("sync_reinforce", "sync_reinforce", ARMS["sync_reinforce"], None, run_dir)
    check_arm_settings(
        "sync_reinforce", "sync_reinforce", ARMS["sync_reinforce_filtered"], None, run_dir
    )  # what it was trained as
    # An entry of results.json carries the overrides it was trained with; a folder-less one is checked by them.
    entry = {"run": "sync_reinforce", "arm_overrides": ARMS["sync_reinforce_filtered"]}
    with pytest.raises(SystemExit, match=r"is recorded with the overrides"):
        check_arm_settings("sync_reinforce", "sync_reinforce", ARMS["sync_reinforce"], entry, tmp_path / "absent")
    check_arm_settings("sync_reinforce", "sync_reinforce", ARMS["sync_reinforce_filtered"], entry, tmp_path / "absent")
    # In any order: the settings are what counts.
    check_arm_settings(
        "sync_reinforce",
        "sync_reinforce",
        ARMS["sync_reinforce"][::-1],
        {**entry, "arm_overrides": ARMS["sync_reinforce"]},
        tmp_path / "absent",
    )
    # An entry from before entries recorded their overrides, without its folder: refused for an arm that changed,
    # kept for one that did not.
    with pytest.raises(SystemExit, match=r"arm sync_reinforce changed on 2026-12-06"):
        check_arm_settings(
            "sync_reinforce",
            "sync_reinforce_seed1",
            ARMS["sync_reinforce"],
            {"run": "sync_reinforce_seed1"},
            tmp_path / "absent",
        )
    check_arm_settings(
        "sync_reinforce", "sync_reinforce", ARMS["sync_reinforce_filtered"], {"run": "sync_reinforce"}, run_dir
    )
    check_arm_settings("rl", "rl", ARMS["rl"], {"run": "rl"}, tmp_path / "absent")
