"""``bench learning``'s results.json carried to another machine: kept only from the same warm-start weights and
held-out evaluation, and its runs not run again."""

import json

import pytest

from verl_asyncweb.bench import learning

EVALUATION = {"recipe": "laptop_multistep", "recipe_overrides": [], "eval_instances": 20, "temperature": 0.7}


def _warm_start(folder, weights: bytes):
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text("{}")  # not weights: outside the digest
    return folder


def test_the_digest_follows_the_weights_and_nothing_else(tmp_path):
    one = _warm_start(tmp_path / "one", b"\x00" * 4096)
    two = _warm_start(tmp_path / "two", b"\x00" * 4096)
    (two / "config.json").write_text('{"other": 1}')
    assert learning.weights_digest(one) == learning.weights_digest(two)
    (two / "model.safetensors").write_bytes(b"\x00" * 4095 + b"\x01")
    assert learning.weights_digest(one) != learning.weights_digest(two)
    (two / "model-00002.safetensors").write_bytes(b"")
    (two / "model.safetensors").write_bytes(b"\x00" * 4096)
    assert learning.weights_digest(one) != learning.weights_digest(two), "a second shard is part of the weights"


def test_a_record_from_other_weights_or_another_evaluation_is_refused(tmp_path):
    results = tmp_path / "results.json"
    assert learning.earlier_record(results, "a" * 64, EVALUATION) is None
    results.write_text(json.dumps({"warm_start_digest": "a" * 64, **EVALUATION, "arms": []}))
    assert learning.earlier_record(results, "a" * 64, EVALUATION)["arms"] == []
    with pytest.raises(SystemExit, match="other warm-start weights .*aaaaaaaaaaaa, these bbbbbbbbbbbb"):
        learning.earlier_record(results, "b" * 64, EVALUATION)
    with pytest.raises(SystemExit, match="eval_instances: 20 there, 10 here"):
        learning.earlier_record(results, "a" * 64, {**EVALUATION, "eval_instances": 10})
    # Written before the digest was recorded: kept, as it always was in its own --out.
    results.write_text(json.dumps({**EVALUATION, "arms": []}))
    assert learning.earlier_record(results, "b" * 64, EVALUATION) == {**EVALUATION, "arms": []}


def _run(arm: str, seed: int, after: float) -> dict:
    name = arm if seed == 0 else f"{arm}_seed{seed}"
    return {
        "arm": arm,
        "seed": seed,
        "run": name,
        "steps": 50,
        "rl_wall_s": 3000.0,
        "trained_trajs_per_hour": 400.0,
        "peak_used_mib": 9000,
        "curve": [(60.0, 0.3), (3000.0, 0.4)],
        "held_out_after": after,
        "held_out_after_outcomes": [1.0] * int(after * 10) + [0.0] * (10 - int(after * 10)),
        "held_out_curve": [(0.0, 0, 0.3), (3000.0, 50, after)],
    }


def test_a_carried_record_keeps_its_runs_and_warm_start_figures_and_runs_only_the_missing(
    tmp_path, monkeypatch, capsys
):
    """A fresh --out holding only the copied results.json and the demonstrations and warm start made again."""
    out = tmp_path / "out"
    (out / "demos").mkdir(parents=True)
    (out / "demos" / "manifest.json").write_text(
        json.dumps({"episodes": 300, "steps": 801, "record_s": 65.0, "instances": [["click-option", 1]]})
    )
    model = _warm_start(out / "warm_start", b"weights")
    (model / "warm_start.json").write_text(
        json.dumps({"steps": 1000, "train_s": 1456.0, "loss_first": 3.1, "loss_last": 0.2})
    )
    carried = {
        "warm_start_digest": learning.weights_digest(model),
        **EVALUATION,
        "held_out_before": 0.3,
        "held_out_before_by_task": {"click-option": 0.3},
        "held_out_before_steps_by_task": {"click-option": 4.0},
        "held_out_before_outcomes": [1.0] * 3 + [0.0] * 7,
        "arms": [_run("rl", 0, 0.4), _run("const", 0, 0.5)],
    }
    (out / "results.json").write_text(json.dumps(carried))
    ran = []

    def run_arm(name, *args, **kwargs):
        ran.append(name)
        raise RuntimeError("stop after the first run started")

    def evaluate(*args, **kwargs):
        raise AssertionError("the warm start was evaluated again")

    monkeypatch.setattr(learning, "run_arm", run_arm)
    monkeypatch.setattr(learning, "_evaluate", evaluate)
    argv = ["--out", str(out), "--recipe", "laptop_multistep", "--eval-instances", "20", "--arms", "rl,const"]
    assert learning.main(argv) == 0
    assert ran == [], "both runs are in the carried record"
    table = capsys.readouterr().out
    assert "held-out success of the warm start: 0.300" in table
    assert "| rl | 0 | 50 |" in table and "| const | 0 | 50 |" in table
    assert json.loads((out / "results.json").read_text())["arms"] == json.loads(json.dumps(carried["arms"]))

    with pytest.raises(RuntimeError, match="first run started"):
        learning.main([*argv, "--seeds", "2"])
    assert ran == ["rl_seed1"], "only the run the record lacks"

    (model / "model.safetensors").write_bytes(b"other weights")
    with pytest.raises(SystemExit, match="other warm-start weights"):
        learning.main(argv)
