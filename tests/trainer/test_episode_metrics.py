"""Trainer-side rollout bookkeeping: generation busy time, screenshot releases after the staleness window."""

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from verl_asyncweb.trainer.episode_metrics import busy_fraction, release_screenshots


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([], 0.0),
        ([(0.0, 10.0)], 1.0),
        ([(2.0, 4.0), (3.0, 6.0)], 0.4),  # overlapping intervals count once
        ([(-5.0, 1.0), (9.0, 20.0)], 0.2),  # clipped to the window
        ([(11.0, 12.0)], 0.0),
    ],
)
def test_busy_fraction_is_the_covered_share_of_the_window(intervals, expected):
    assert busy_fraction(intervals, 0.0, 10.0) == pytest.approx(expected)


class _Store:
    def __init__(self):
        self.released = []

    def release(self, owner):
        self.released.append(owner)
        return 1


def test_screenshots_are_released_only_after_the_staleness_window():
    config = OmegaConf.create({"trainer": {"v1": {"sampler": {"max_off_policy_threshold": 2}}}})
    trainer = SimpleNamespace(config=config, screenshots=_Store(), _pending_releases=[])
    release_screenshots(trainer, ["t1", "t2"], global_step=1)
    for step in (2, 3, 4):
        release_screenshots(trainer, [], global_step=step)
        assert trainer.screenshots.released == []
    release_screenshots(trainer, ["t3"], global_step=5)
    assert trainer.screenshots.released == ["t1", "t2"]
    assert trainer._pending_releases == [(9, "t3")]
