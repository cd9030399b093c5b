"""A newcomer's bad input to the tools gets one line on stderr and exit code 2: no traceback, nothing started."""

import json
import os
import subprocess
import sys

import pytest


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout)


def _error_lines(stderr: str) -> list[str]:
    """stderr without the warnings libraries print on import."""
    return [line for line in stderr.splitlines() if line.strip() and "warn" not in line.lower()]


@pytest.fixture
def half_made_run(tmp_path):
    """A run folder that never finished a step: a config and empty folders, no metrics, no episodes."""
    run = tmp_path / "half"
    for folder in ("data", "episodes", "logs"):
        (run / folder).mkdir(parents=True)
    (run / "config.yaml").write_text("trainer: {}\n")
    return run


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["evaluate", "{missing}"], "is neither a model folder (config.json) nor a run folder (config.yaml)"),
        (["viewer", "{missing}"], "run folder must be an existing directory"),
        (["compare", "{missing}", "{missing}"], "run folder must be an existing directory"),
        (["viewer", "{half}"], "holds no finished episode yet"),
        (["compare", "{half}", "{half}"], "nothing to compare"),
    ],
)
def test_missing_and_half_made_folders_get_one_line(command, message, tmp_path, half_made_run):
    args = [arg.format(missing=tmp_path / "nowhere", half=half_made_run) for arg in command]
    done = _run(f"verl_asyncweb.{args[0]}", *args[1:])
    assert done.returncode == 2, done.stderr[-2000:]
    lines = _error_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"python -m verl_asyncweb.{args[0]}: ") and message in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_an_empty_task_file_is_refused_naming_it(tmp_path):
    empty = tmp_path / "tasks.jsonl"
    empty.write_text("")
    done = _run("verl_asyncweb.main", f"asyncweb.tasks.train=[{empty}]", f"trainer.default_local_dir={tmp_path}/run")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"verl_asyncweb: asyncweb.tasks: train=['{empty}'] holds no tasks (an empty task file?)" in done.stderr
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("recipe=nope", "recipe must be one of"),
        ("recipe=miniwob_raftpp", "recipe 'miniwob_raftpp' is now 'demo_raftpp'"),
        ("asyncweb.agnt.max_steps=3", "did you mean asyncweb.agent.max_steps?"),
        ("+foo.bar=1", "adds a section 'foo'"),
        ("+trainer.vall_only=1", "did you mean trainer.val_only?"),
        ("asyncweb.tasks.train=[miniwob:click-tset]", "click-tset: did you mean click-test"),
        ("asyncweb.tasks.train=[{empty}]", "holds no tasks (an empty task file?)"),
    ],
)
def test_checks_that_need_no_verl_answer_before_it_is_imported(override, message, tmp_path):
    """verl's import costs ~5 s of CPU (~10 s on a loaded machine): a typo must not wait for it."""
    empty = tmp_path / "tasks.jsonl"
    empty.write_text("")
    probe = (
        "import sys\n"
        "from verl_asyncweb.main import load_config\n"
        "try:\n"
        f"    load_config([{override.format(empty=empty)!r}], check_tasks=True)\n"
        "except (ValueError, RuntimeError) as exc:\n"
        f"    print('verl' in sys.modules, {message!r} in str(exc))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True"], done.stdout + done.stderr[-2000:]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.total_training_steps=-3"], "trainer.total_training_steps must be a positive integer"),
        (["trainer.total_epochs=0"], "trainer.total_epochs must be a positive integer"),
        # cpu_smoke builds the tiny model unless a path is given: a given path is the model, never replaced.
        (["actor_rollout_ref.model.path=/nonexistent/model"], "model.path=/nonexistent/model does not exist"),
        (
            ["recipe=laptop_learning", "actor_rollout_ref.model.path=/nonexistent/model"],
            "model.path=/nonexistent/model does not exist",
        ),
    ],
)
def test_runs_that_would_train_nothing_or_another_model_are_refused_before_ray(overrides, message, tmp_path):
    done = _run("verl_asyncweb.main", *overrides, f"trainer.default_local_dir={tmp_path}/run")
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("verl_asyncweb: ")]
    assert len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr


def test_a_webgym_task_that_is_not_on_the_web_is_refused_naming_its_line(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    row = {"task_id": "t1", "task_name": "Read it.", "website": "file:///etc/passwd", "difficulty": 1}
    tasks.write_text(json.dumps({**row, "evaluator_reference": [{"description": "x"}]}) + "\n")
    done = _run("verl_asyncweb.main", f"asyncweb.tasks.train=[{tasks}]", f"trainer.default_local_dir={tmp_path}/run")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{tasks}:1: field 'website' must be an http(s) URL or a host name" in done.stderr
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr


def test_an_exported_device_list_the_shared_gpu_recipe_cannot_start_ray_with_is_refused(tmp_path):
    # The recipe gives Ray two GPU slots on one device ("0,0"); an exported CUDA_VISIBLE_DEVICES=0 used to win in
    # the driver, and Ray refused its node with a traceback.
    env = {key: value for key, value in os.environ.items() if key != "VERL_PLATFORM"} | {"CUDA_VISIBLE_DEVICES": "0"}
    command = [sys.executable, "-m", "verl_asyncweb.main", "recipe=gpu_check_vllm_1gpu"]
    done = subprocess.run(
        [*command, f"trainer.default_local_dir={tmp_path}/run"], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("verl_asyncweb: ")]
    assert lines == [
        "verl_asyncweb: CUDA_VISIBLE_DEVICES=0 is exported, but the recipe starts Ray with '0,0' (one entry per "
        "Ray GPU slot): unset it, or run python -m verl_asyncweb.gpu_check --vllm-one-gpu, which lists the first "
        "visible GPU once per slot"
    ]
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr


def test_fewer_training_tasks_than_a_steps_prompt_groups_are_refused(tmp_path):
    # verl would divide by its zero batches an epoch a minute after start (ZeroDivisionError).
    one_task = "asyncweb.tasks.train=[miniwob:click-test]"
    run_dir = f"trainer.default_local_dir={tmp_path}/run"
    done = _run("verl_asyncweb.main", one_task, "asyncweb.tasks.miniwob_instances=1", run_dir)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("verl_asyncweb: ")]
    assert lines == [
        "verl_asyncweb: asyncweb.tasks.train gives 1 training task(s), fewer than the 2 prompt groups a step samples "
        "(data.train_batch_size=2): add tasks or lower data.train_batch_size"
    ]
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr
