"""The staleness bound on verl's own sampler: why ``main`` sets ``max_off_policy_threshold`` to eta + 1.

verl counts the weight versions a trajectory spans (``global_steps - submitted + 1``); AsyncWebRL's eta counts how
many versions the trained weights may be ahead of the ones a group was submitted under. A group submitted at
step s must still be trainable at step s + eta and be dropped at s + eta + 1.
"""

import pytest
from trainer_helpers import replay_buffer_for

SUBMITTED = 5


@pytest.mark.parametrize("eta", [0, 1, 2])
def test_a_group_is_kept_for_eta_steps_and_dropped_after(eta):
    buffer = replay_buffer_for([f"asyncweb.staleness={eta}"])
    buffer.prompt_global_steps["train"]["group"] = SUBMITTED
    buffer.finished_keys["train"].add("group")
    for step in range(SUBMITTED, SUBMITTED + eta + 1):
        assert buffer._stale_terminal_keys(step, "train") == set(), f"dropped at step {step} with eta {eta}"
    assert buffer._stale_terminal_keys(SUBMITTED + eta + 1, "train") == {"group"}
