"""Stuck steps: a run of ``stuck_repeat_limit`` steps with the same action on the same screenshot."""

import pytest
import verl  # noqa: F401  (loads the plugin before our modules)

from verl_asyncweb.agent.loop import EpisodeState, WebAgentLoop
from verl_asyncweb.agent.prompts import StepRecord

CLICK, TYPE = "left_click(500, 500)", "type('x')"


def _stuck_flags(steps: list[tuple[bytes, str]], limit: int) -> list[bool]:
    """Replay steps (screenshot acted on, action) the way the loop records them; the stuck flag of each."""
    state, flags = EpisodeState(traj_id="t", instruction="i"), []
    for index, (screenshot, action) in enumerate(steps):
        state.screenshots.append(screenshot)
        state.history.append(StepRecord(step_index=index, action_text=action, screenshot=screenshot))
        flags.append(WebAgentLoop._is_stuck(state, limit))
    return flags


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(2, [False, True, True, False, False]), (3, [False, False, True, False, False])],
)
def test_repeated_action_on_an_unchanged_page_is_stuck_after_the_limit(limit, expected):
    steps = [(b"A", CLICK), (b"A", CLICK), (b"A", CLICK), (b"A", TYPE), (b"B", TYPE)]
    assert _stuck_flags(steps, limit) == expected


def test_the_same_action_is_not_stuck_when_the_page_changes():
    assert _stuck_flags([(b"A", CLICK), (b"B", CLICK), (b"C", CLICK)], 2) == [False, False, False]
