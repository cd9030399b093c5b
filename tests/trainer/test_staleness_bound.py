"""The staleness bound on verl's own sampler: why ``main`` sets ``max_off_policy_threshold`` to eta + 1.

verl counts the weight versions a trajectory spans (``global_steps - submitted + 1``); AsyncWebRL's eta counts how
many versions the trained weights may be ahead of the ones a group was submitted under. A group submitted at
step s must still be trainable at step s + eta and be dropped at s + eta + 1.
"""

import pytest
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

from verl_asyncweb.main import load_config

SUBMITTED = 5


@pytest.mark.parametrize("eta", [0, 1, 2])
def test_a_group_is_kept_for_eta_steps_and_dropped_after(eta):
    cfg, asyncweb = load_config([f"asyncweb.staleness={eta}"])
    sampler = cfg.trainer.v1.sampler
    buffer = ReplayBufferAsync(
        trainer_mode="separate_async",
        trainer_config=cfg,
        max_off_policy_threshold=sampler.max_off_policy_threshold,
        max_off_policy_strategy=sampler.max_off_policy_strategy,
        sampler_kwargs={},
    )
    buffer.prompt_global_steps["train"]["group"] = SUBMITTED
    buffer.finished_keys["train"].add("group")
    for step in range(SUBMITTED, SUBMITTED + eta + 1):
        assert buffer._stale_terminal_keys(step, "train") == set(), f"dropped at step {step} with eta {eta}"
    assert buffer._stale_terminal_keys(SUBMITTED + eta + 1, "train") == {"group"}
