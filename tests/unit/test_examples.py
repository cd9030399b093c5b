"""Every file in examples/ is exercised: the launch script composes its config, the WebGym task file loads."""

import subprocess
import sys
from pathlib import Path

from omegaconf import OmegaConf

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_every_example_is_listed_in_the_examples_readme_and_tested_here():
    listed = (EXAMPLES / "README.md").read_text()
    files = sorted(path.name for path in EXAMPLES.iterdir() if path.name != "README.md")
    assert files == ["launch_recipe.py", "webgym_tasks_example.jsonl"]
    assert all(f"]({name})" in listed for name in files)


def test_the_launch_script_composes_what_it_says(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "launch_recipe.py"), "--cfg", "job"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cfg = OmegaConf.create(done.stdout[done.stdout.index("actor_rollout_ref:") :])
    assert cfg.asyncweb.recipe == "cpu_smoke" and cfg.asyncweb.algo.step_norm == "traj"
    assert list(cfg.asyncweb.tasks.train) == ["miniwob:click-test,click-button"]
    assert cfg.trainer.total_training_steps == 2


def test_the_webgym_task_file_loads_as_webgym_tasks():
    from verl_asyncweb.task_dataset import load_task_sources

    path = EXAMPLES / "webgym_tasks_example.jsonl"
    tasks = load_task_sources([str(path)])
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert len(tasks) == len(lines) > 0
    assert all(task.instruction and task.start_url.startswith("https://") for task in tasks)
