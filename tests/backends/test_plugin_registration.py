"""Every registration arrives through verl's plugin loading, in the driver and in Ray workers."""

import os
import subprocess
import sys

import pytest
import ray

from verl_asyncweb.doctor import registration_checks, worker_registration_checks

pytestmark = pytest.mark.ray


def test_registrations_present_in_driver_and_point_at_our_code():
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

    from verl_asyncweb.agent.loop import WebAgentLoop
    from verl_asyncweb.algo.losses import compute_policy_loss_decoupled_ppo
    from verl_asyncweb.trainer.asyncweb_trainer import AsyncWebTrainer

    checks = registration_checks(cpu=True)
    assert [c.name for c in checks if not c.ok] == []
    estimators = {c.name.removeprefix("advantage estimator ") for c in checks if c.name.startswith("advantage")}
    assert estimators == {"multistep_grpo", "multistep_reinforce", "raftpp"}
    assert core_algos.get_policy_loss_fn("decoupled_ppo") is compute_policy_loss_decoupled_ppo
    assert get_trainer_cls("asyncweb") is AsyncWebTrainer
    assert _agent_loop_registry["web_agent"]["_target_"] == "verl_asyncweb.agent.loop.WebAgentLoop"
    assert WebAgentLoop.__module__ == "verl_asyncweb.agent.loop"


def test_registrations_present_inside_a_ray_worker(ray_cluster):
    checks = worker_registration_checks(cpu=True, timeout_s=120)
    assert [c.name for c in checks if not c.ok] == []
    assert len(checks) >= 9


def test_ray_worker_is_another_process(ray_cluster):
    from verl_asyncweb.agent.rollout_stats import RolloutStats

    stats = RolloutStats.remote()
    try:
        worker_pid = ray.get(stats.__ray_call__.remote(lambda actor: os.getpid()), timeout=60)
    finally:
        ray.kill(stats)
    assert worker_pid != os.getpid()


def test_doctor_with_ray_runs_every_check_in_a_worker_too():
    # The worker's checks start before the driver's own (both import verl); the report still holds all of them.
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    doctor = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.doctor"], env=env, capture_output=True, text=True, timeout=300
    )
    assert doctor.returncode == 0, doctor.stdout[-3000:] + doctor.stderr[-3000:]
    lines = doctor.stdout.splitlines()
    driver = {line for line in lines if line.startswith("[ok  ] ") and "(in a Ray worker)" not in line}
    in_worker = {line.removesuffix(" (in a Ray worker)") for line in lines if line.endswith("(in a Ray worker)")}
    assert len(in_worker) == len(registration_checks(cpu=True)) > 0
    assert in_worker <= driver  # the worker found every registration the driver did
    assert lines[-1] == f"{len(driver) + len(in_worker)} ok, 0 failed"


def test_plugin_loading_off_means_no_registrations_and_doctor_fails_clearly():
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none", "VERL_PLATFORM": "cpu"}
    probe = (
        "import verl; from verl.trainer.ppo import core_algos;print('decoupled_ppo' in core_algos.POLICY_LOSS_REGISTRY)"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"

    doctor = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.doctor", "--no-ray"], env=env, capture_output=True, text=True, timeout=300
    )
    assert doctor.returncode == 1
    assert "[FAIL] policy loss decoupled_ppo: not registered" in doctor.stdout
    assert "VERL_USE_EXTERNAL_PLUGINS" in doctor.stdout


@pytest.mark.parametrize(
    "first_import", ["verl_asyncweb.agent.worker", "verl_asyncweb.trainer.asyncweb_trainer", "verl_asyncweb.main"]
)
def test_plugin_loads_whichever_of_our_modules_a_process_imports_first(first_import):
    # Ray unpickles our classes in fresh workers: their module is then the first to import verl, which loads
    # the plugin while that module is half-initialised. No plugin module may depend on such a module.
    probe = (
        f"import {first_import}; from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as r;"
        "from verl.trainer.ppo import core_algos as c;"
        "print('web_agent' in r and 'decoupled_ppo' in c.POLICY_LOSS_REGISTRY)"
    )
    env = {**os.environ, "VERL_PLATFORM": "cpu"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stderr[-2000:]


def test_doctor_for_a_gpu_platform_reports_what_this_machine_lacks():
    doctor = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.doctor", "--no-ray", "--platform", "auto"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert doctor.returncode == 1
    assert "[FAIL] CUDA devices: torch 2.14.1" in doctor.stdout and "sees no CUDA device" in doctor.stdout
    assert "[FAIL] vllm (GPU stack): not installed" in doctor.stdout
    assert "[FAIL] torch (GPU stack): 2.14.1, verl[vllm]==0.9.1 pins 2.11.0" in doctor.stdout
    assert 'fix: pip install ".[gpu]" in the checkout (or its wheel: docs/install.md)' in doctor.stdout
