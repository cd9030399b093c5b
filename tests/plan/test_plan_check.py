"""``bench plan_check``: the planner, with costs recorded from ``bench e2e`` arms, against every arm's measurement."""

import json

import pytest
from conftest import override, predict, write_run

from verl_asyncweb.bench import __main__ as bench_main
from verl_asyncweb.bench import plan_check
from verl_asyncweb.bench.profile import (
    DEFAULT_ENV_STEP_S,
    ENV_STEP_SOURCE,
    fit_rollout_contention,
    profile_from_run,
    used_steps,
)
from verl_asyncweb.plan.profile_file import load_profile


@pytest.fixture
def e2e_dir(tmp_path):
    """A ``bench e2e --out`` folder with an async and a sync arm: the sync one trained on fewer trajectories, the
    async one never waited and computed 1.5x slower (rollout generating all the while)."""
    write_run(_mkdir(tmp_path / "async"), mode="async", trained=4, trainer_idle=0.0, compute_scale=1.5)
    write_run(_mkdir(tmp_path / "sync"), mode="sync", trained=2)
    (tmp_path / "results.json").write_text(json.dumps([{"arm": "async"}, {"arm": "sync"}]))
    return tmp_path


def _mkdir(path):
    path.mkdir()
    return path


def test_plan_check_is_a_registered_bench_command():
    assert "plan_check" in bench_main._available()


def test_contention_is_fitted_from_the_compute_slowdown_over_the_overlap(e2e_dir):
    # pi_prox + update per token 1.5x the sync run's, rollout generating during all of it: (1.5 - 1) / 1.
    sync, async_ = used_steps(e2e_dir / "sync", 1), used_steps(e2e_dir / "async", 1)
    contention, source = fit_rollout_contention(sync, async_)
    assert contention == pytest.approx(0.5)
    assert "1.500x" in source and "during 1.00 of the trainer's compute" in source
    # The sync run as the contended one: rollout generated only while the trainer waited in step 2, during 10 of
    # step 3's 14 compute seconds: overlap (0 + 10/14) / 2, no slowdown.
    assert fit_rollout_contention(sync, sync)[0] == 0.0


def test_every_arm_is_predicted_from_the_profile_arms_costs_with_its_own_shape(e2e_dir, capsys):
    assert plan_check.main(["--e2e-dir", str(e2e_dir)]) == 0
    report = json.loads((e2e_dir / "plan_check.json").read_text())
    assert [arm["arm"] for arm in report["arms"]] == ["async", "sync"]
    costs, _, _ = profile_from_run(
        e2e_dir / "sync", 1, DEFAULT_ENV_STEP_S, ENV_STEP_SOURCE, 0.0, contended_run_dir=e2e_dir / "async"
    )
    assert costs.trainer.rollout_contention == pytest.approx(0.5)
    steady = override(costs, **{"sim.train_steps": 1 + plan_check.PREDICTED_STEPS})
    expected = {"async": predict(override(steady, **{"pipeline.mode": "async"})), "sync": predict(steady)}
    assert expected["sync"].trained_trajs_per_hour != expected["async"].trained_trajs_per_hour
    for arm in report["arms"]:
        predicted = expected[arm["arm"]]
        assert arm["predicted"]["trained_trajs_per_hour"] == pytest.approx(predicted.trained_trajs_per_hour)
        assert arm["predicted"]["trainer_idle_frac"] == pytest.approx(predicted.trainer_idle_frac)
    # Each arm's own measurement: 4 (async) and 2 (sync) trained trajectories per step over steps 2-3 (100 s).
    measured = {arm["arm"]: arm["measured"]["trained_trajs_per_hour"] for arm in report["arms"]}
    assert measured == pytest.approx({"async": 8 / 100 * 3600, "sync": 4 / 100 * 3600})
    for arm in report["arms"]:
        error = arm["predicted"]["trained_trajs_per_hour"] / arm["measured"]["trained_trajs_per_hour"] - 1
        idle_error = arm["predicted"]["trainer_idle_frac"] - arm["measured"]["trainer_idle_frac_mean"]
        assert arm["trained_trajs_per_hour_error"] == pytest.approx(error)
        assert arm["within_tolerance"] == (abs(error) <= 0.15 and abs(idle_error) <= 0.1)
    table = capsys.readouterr().out
    assert "costs recorded from the sync arm, rollout contention 0.50 from the async arm" in table
    assert "| async |" in table and "| sync |" in table
    assert (e2e_dir / "plan_profile.yaml").read_text().count("# sources: ") > 20


def test_bad_folders_and_arms_exit_2_naming_them(e2e_dir, tmp_path, capsys):
    assert plan_check.main(["--e2e-dir", str(e2e_dir), "--profile-arm", "async+latency"]) == 2
    assert "not an arm of" in capsys.readouterr().err
    empty = _mkdir(tmp_path / "empty")
    assert plan_check.main(["--e2e-dir", str(empty)]) == 2
    assert "has no results.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("mode", "latency", "trained_per_hour", "trainer_idle", "lag_mean"),
    [
        ("async", False, 1128.9, 0.000, 2.00),
        ("sync", False, 829.5, 0.332, 0.00),
        ("async", True, 1108.5, 0.011, 1.64),
        ("sync", True, 487.3, 0.607, 0.00),
    ],
)
def test_recorded_bench_e2e_profile_gives_the_pinned_figures(mode, latency, trained_per_hour, trainer_idle, lag_mean):
    # The model's own figures on the profile recorded from runs/bench_e2e_s12b (seed 0, 300 steady steps); the
    # arms measured 1,106 / 795 / 1,069 / 518 trained trajectories/h and trainer idle 0.00 / 0.38 / 0.00 / 0.66.
    profile = override(
        load_profile("cpu_smoke_e2e"),
        **{"pipeline.mode": mode, "env.latency.enable": latency, "sim.train_steps": 1 + plan_check.PREDICTED_STEPS},
    )
    assert profile.trainer.rollout_contention == pytest.approx(0.204, abs=0.001)
    prediction = predict(profile)
    assert prediction.trained_trajs_per_hour == pytest.approx(trained_per_hour, rel=0.001)
    assert prediction.trainer_idle_frac == pytest.approx(trainer_idle, abs=0.001)
    assert prediction.policy_lag_mean == pytest.approx(lag_mean, abs=0.01)
