"""Profile files, overrides, the CLI, and ``bench profile`` (a profile from a run folder)."""

import ast
import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from conftest import override, predict, write_run

import verl_asyncweb.env.config as env_config_module
from verl_asyncweb.bench import __main__ as bench_main
from verl_asyncweb.bench import profile as bench_profile
from verl_asyncweb.plan import cli
from verl_asyncweb.plan.profile_file import PROFILE_DIR, dump_profile, load_profile, profile_from_dict
from verl_asyncweb.plan.workload import expected_discard_prob


def _leaf_lines(path: Path) -> list[str]:
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [line for line in lines if not line.rstrip().endswith(":")]  # section headers carry no value


@pytest.mark.parametrize("name", ["gpu_paper", "cpu_laptop_learning", "cpu_smoke_e2e"])
def test_packaged_profile_loads_and_every_value_cites_its_source(name):
    path = PROFILE_DIR / f"{name}.yaml"
    load_profile(name)
    missing = [line for line in _leaf_lines(path) if not line.startswith("name:") and "# sources: " not in line]
    assert not missing, f"values without a '# sources:' comment in {path}: {missing}"


def _latency_config_defaults() -> dict:
    """LatencyConfig's defaults read from the source (importing it would import verl)."""
    tree = ast.parse(Path(env_config_module.__file__).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LatencyConfig")
    return {n.target.id: ast.literal_eval(n.value) for n in cls.body if isinstance(n, ast.AnnAssign) and n.value}


def test_gpu_paper_web_latency_is_the_env_latency_model_default(gpu_paper):
    defaults = _latency_config_defaults()
    latency = gpu_paper.env.latency
    assert (latency.median_s, latency.sigma, latency.max_delay_s) == (
        defaults["median_s"],
        defaults["sigma"],
        defaults["max_delay_s"],
    )


def test_profile_errors_name_the_key(gpu_paper):
    data = dataclasses.asdict(gpu_paper)
    data["trainer"]["gpu"] = 3
    with pytest.raises(ValueError, match=r"unknown profile key trainer\.gpu; valid keys here: .*'gpus'"):
        profile_from_dict(data)
    data = dataclasses.asdict(gpu_paper)
    del data["rollout"]["prefill_s"]
    with pytest.raises(ValueError, match=r"rollout\.prefill_s is missing"):
        profile_from_dict(data)
    data = dataclasses.asdict(gpu_paper)
    data["pipeline"]["staleness"] = -1
    with pytest.raises(ValueError, match=r"pipeline\.staleness must be >= 0, got -1"):
        profile_from_dict(data)
    data["pipeline"]["staleness"] = 1.5
    with pytest.raises(ValueError, match=r"pipeline\.staleness must be an integer, got 1\.5"):
        profile_from_dict(data)


def test_overrides_set_nested_fields_and_the_gpu_split(gpu_paper):
    changed = override(gpu_paper, **{"env.latency.enable": "false", "gpu_split": "24:40", "workload.max_steps": 40})
    assert changed.env.latency.enable is False
    assert (changed.rollout.gpus, changed.trainer.gpus, changed.workload.max_steps) == (24, 40, 40)
    assert changed.rollout.replicas == 24
    with pytest.raises(ValueError, match=r"unknown profile key 'rollout'; valid keys: .*rollout\.gpus"):
        override(gpu_paper, rollout=3)
    with pytest.raises(ValueError, match=r"rollout\.gpus must be a multiple of rollout\.gpus_per_replica"):
        override(gpu_paper, **{"rollout.gpus_per_replica": 5})


def test_dumped_profile_reads_back_equal(gpu_paper):
    text = dump_profile(gpu_paper, {"rollout.gpus": "a note"}, ["header"])
    assert "gpus: 48  # sources: a note" in text
    assert profile_from_dict(yaml.safe_load(text)) == gpu_paper


def test_cli_prints_the_prediction(capsys):
    argv = ["--profile", "cpu_laptop_learning", "sim.train_steps=6", "--mode", "sync", "sim.seed=2"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu_laptop_learning mode=sync sim.train_steps=6 sim.seed=2\n")  # overrides on both sides
    assert "trained trajectories / hour" in out and "policy lag of trained step-samples" in out
    assert "measured training steps              5" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--profile", "gpu_paper", "trainer.gpu=3"], "unknown profile key 'trainer.gpu'"),
        (["--profile", "gpu_paper", "pipeline.staleness=two"], "pipeline.staleness must be an integer, got 'two'"),
        (["--profile", "gpu_paper", "pipeline.mode=offline"], "pipeline.mode must be one of ['async', 'sync']"),
        (["--profile", "gpu_paper", "--sweep", "rollout.gpus=48,x"], "rollout.gpus must be an integer, got 'x'"),
        (["--profile", "gpu_paper", "--sweep", "gpu_split=48"], "gpu_split must be ROLLOUT_GPUS:TRAINER_GPUS"),
        (["--profile", "no_such_profile"], "--profile must be a profile file or one of"),
        (["--profile", "gpu_paper", "staleness"], "overrides must be KEY=VALUE, got 'staleness'"),
        # Answered at once: a million replicas would simulate for hours without a line of output.
        (["--profile", "gpu_paper", "rollout.gpus=1000000"], "rollout.gpus must be at most 4096 (4096 replicas"),
    ],
)
def test_cli_bad_input_exits_2_naming_the_key(capsys, argv, message):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_cli_plot_without_sweep_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--profile", "gpu_paper", "--plot", "x.png"])
    assert exit_info.value.code == 2
    assert "--plot needs --sweep" in capsys.readouterr().err


def test_cli_two_knob_sweep_prints_a_table_and_writes_a_plot(capsys, tmp_path):
    plot = tmp_path / "sweep.png"
    argv = ["--profile", "cpu_laptop_learning", "sim.train_steps=6", "--sweep", "pipeline.staleness=0,2"]
    assert cli.main([*argv, "--sweep", "pipeline.mode=async,sync", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| pipeline.staleness | pipeline.mode | trained traj/h |")
    rows = [row.strip("| ").split(" | ") for row in table[2:]]
    assert [row[:2] for row in rows] == [["0", "async"], ["0", "sync"], ["2", "async"], ["2", "sync"]]
    best = max(rows, key=lambda row: float(row[2].replace(",", "")))
    assert f"highest trained throughput: pipeline.staleness={best[0]} pipeline.mode={best[1]} ({best[2]} " in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_recorded_cpu_profile_gives_the_pinned_figures(cpu_laptop):
    # Figures of the model on runs/bl4/rl's recorded profile (seed 0); the run measured 309 trained and 1,873
    # finished trajectories/h, trainer idle 0.45 (mean), rollout idle 0.10 (median), lag mean 0.46, 0.835 discarded.
    prediction = predict(cpu_laptop)
    assert prediction.trained_trajs_per_hour == pytest.approx(378.4, rel=0.01)
    assert prediction.finished_trajs_per_hour == pytest.approx(1994, rel=0.01)
    assert prediction.trainer_idle_frac == pytest.approx(0.505, abs=0.005)
    assert prediction.rollout_idle_frac == pytest.approx(0.025, abs=0.005)
    assert prediction.policy_lag_mean == pytest.approx(0.577, abs=0.005)
    assert prediction.group_discard_frac == pytest.approx(0.808, abs=0.005)
    assert prediction.stale_drop_frac == 0.0


def test_bench_profile_is_a_registered_bench_command():
    assert "profile" in bench_main._available()


def test_bench_profile_derives_costs_and_shape_from_a_run_folder(tmp_path):
    write_run(tmp_path)
    out = tmp_path / "profile.yaml"
    assert bench_profile.main(["--run-dir", str(tmp_path), "--out", str(out)]) == 0
    profile = load_profile(out)
    assert profile.name == "cpu_unit"
    assert (profile.pipeline.group_size, profile.pipeline.groups_per_batch, profile.pipeline.staleness) == (2, 2, 1)
    assert profile.pipeline.max_concurrent_episodes == 4
    assert profile.workload.success_prob == pytest.approx(0.2)
    assert (profile.workload.steps_success, profile.workload.steps_failure) == (1, 3)
    assert profile.workload.prompt_tokens_per_step == pytest.approx(150)
    # busy: 0.5 x 60 s + 0.75 x 40 s = 60 s over 20 trajectories x 2.6 steps; 18 response tokens per step.
    assert profile.rollout.decode_s_per_token == pytest.approx(60 / 52 / 18)
    assert profile.rollout.max_concurrency == 1
    assert profile.trainer.gpus == 2
    assert profile.trainer.recompute_gpu_s_per_token == pytest.approx(0.0015 * 2)  # median of 1/1000, 4/2000
    assert profile.trainer.update_gpu_s_per_token == pytest.approx(0.005 * 2)
    assert profile.trainer.overhead_s == pytest.approx(2.0)
    assert profile.trainer.weight_sync_s == pytest.approx(0.5)
    assert profile.workload.success_concentration is None  # no dynamic sampling in this run
    text = out.read_text()
    assert "trained trajectories/h 288, finished 720" in text
    assert all("# sources: " in line for line in _leaf_lines(out) if not line.startswith("name:"))


def test_bench_profile_without_metrics_exits_2(tmp_path, capsys):
    write_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": {"asyncweb/wall_s": 1.0}}) + "\n")
    assert bench_profile.main(["--run-dir", str(tmp_path), "--out", str(tmp_path / "p.yaml")]) == 2
    assert "leaves none" in capsys.readouterr().err


def test_fitted_success_spread_reproduces_the_measured_discard_fraction(cpu_laptop):
    kappa = bench_profile.fit_success_concentration(0.0935518, 4, 0.8350951)  # runs/bl4/rl, steps 2-40
    assert kappa == pytest.approx(cpu_laptop.workload.success_concentration, rel=1e-3)
    assert expected_discard_prob(cpu_laptop.workload, 4) == pytest.approx(0.835, abs=1e-3)
    assert bench_profile.fit_success_concentration(0.3, 4, 0.1) is None  # below p^n + (1-p)^n: independent
