"""The intervals behind every "mean [95% CI]" and "resolved" in the comparison tables, against hand computations."""

import math

import pytest

from verl_asyncweb.compare.confidence import difference_interval, mean_interval


def test_seeds_are_resampled_before_their_episodes_and_weigh_alike():
    # Two seeds, one always right and one never: a seed-level resample draws both alike a quarter of the time each,
    # so the interval spans 0..1 (episodes pooled over seeds would give ~0.3..0.7).
    interval = mean_interval([[1.0] * 10, [0.0] * 10])
    assert (interval.low, interval.high) == (0.0, 1.0)
    # The mean of the seeds' means, not of their pooled episodes (0.1).
    assert mean_interval([[1.0] * 2, [0.0] * 18]).mean == pytest.approx(0.5)


def test_missing_values_are_left_out_and_a_seed_without_any_is_dropped():
    interval = mean_interval([[1.0, None, 0.0], [float("nan")]])
    assert interval.mean == pytest.approx(0.5) and interval.seeds == 1 and interval.values == 2
    with pytest.raises(ValueError, match="at least one value"):
        mean_interval([[None]])


def test_welchs_interval_over_the_seed_means_matches_the_hand_computation():
    # Seed means 0.2, 0.4, 0.3 against 0.1, 0.0, 0.2: difference 0.2, variances 0.01 each, se sqrt(0.02/3), df 4.
    first = [[0.2] * 5, [0.4] * 5, [0.3] * 5]
    second = [[0.1] * 5, [0.0] * 5, [0.2] * 5]
    interval = difference_interval(first, second)
    half = 2.776445 * math.sqrt(0.02 / 3)
    assert (interval.seed_low, interval.seed_high) == pytest.approx((0.2 - half, 0.2 + half), abs=1e-5)
    assert not interval.resolved, "Welch's interval reaches below zero"
    # Against one fixed reference (a warm start): its variance term drops, df 2.
    gain = difference_interval(first, [[0.1] * 5], fixed_second=True)
    half = 4.302653 * math.sqrt(0.01 / 3)
    assert (gain.seed_low, gain.seed_high) == pytest.approx((0.2 - half, 0.2 + half), abs=1e-5)


def test_welchs_interval_is_cut_to_the_differences_a_rate_allows():
    # Two seeds far apart (t with one degree of freedom is 12.7): uncut, Welch's reaches past what a success rate
    # allows, below -0.075 for a gain over a fixed 7.5% and past +-1 between two arms.
    spread = [[1.0] * 29 + [0.0] * 71, [1.0] * 14 + [0.0] * 86]
    uncut = difference_interval(spread, [[1.0] * 3 + [0.0] * 37], fixed_second=True)
    assert uncut.seed_low < -0.075 and uncut.seed_high > 0.925
    gain = difference_interval(spread, [[1.0] * 3 + [0.0] * 37], fixed_second=True, bounds=(0, 1))
    assert (gain.seed_low, gain.seed_high) == pytest.approx((-0.075, 0.925))
    assert (gain.mean, gain.low, gain.high, gain.resolved) == (uncut.mean, uncut.low, uncut.high, uncut.resolved)
    between = difference_interval(spread, [[1.0] * 9 + [0.0] * 91, [1.0] * 40 + [0.0] * 60], bounds=(0, 1))
    assert (between.seed_low, between.seed_high) == (-1.0, 1.0) and not between.resolved
    # A narrow interval inside the bounds is left as it is.
    close = [[1.0] * 24 + [0.0] * 76, [1.0] * 25 + [0.0] * 75]
    assert difference_interval(close, [[0.0] * 40], fixed_second=True, bounds=(0, 1)).seed_low == pytest.approx(
        difference_interval(close, [[0.0] * 40], fixed_second=True).seed_low
    )


def test_a_difference_is_resolved_only_when_the_seeds_agree_with_the_bootstrap():
    # Two seeds a side, 0.6/0.8 against 0.2/0.4 over 80 episodes each: every seed-level resample keeps the first
    # ahead, so the bootstrap excludes zero, but two seeds a side leave Welch's interval (df 2) across it.
    def seeds(*rates: float) -> list[list[float]]:
        return [[1.0] * round(80 * rate) + [0.0] * round(80 * (1 - rate)) for rate in rates]

    interval = difference_interval(seeds(0.6, 0.8), seeds(0.2, 0.4))
    assert interval.low > 0 and interval.seed_low < 0 and not interval.resolved
    assert interval.format_difference().endswith("| no")
    more = difference_interval(seeds(0.6, 0.8, 0.7, 0.75, 0.65), seeds(0.2, 0.4, 0.3, 0.25, 0.35))
    assert more.resolved and more.format_difference().endswith("| yes")
    # One seed of a variant: its seed spread is unknown, so nothing is resolved, however far apart.
    single = difference_interval([[1.0] * 40], [[0.0] * 40])
    assert single.low > 0.9 and single.seed_low is None and not single.resolved
    assert single.format_difference() == "+1.000 [+1.000, +1.000] | one seed | no"


def test_the_calibration_bench_counts_what_each_rule_would_call_resolved():
    from verl_asyncweb.bench.intervals import exclusion_rates

    one_seed = exclusion_rates(seeds=1, seed_sd=0.08, pairs=60, resamples=200)
    assert one_seed["resolved"] == 0.0 and one_seed["welch"] is None and one_seed["bootstrap"] > 0.1
    large = exclusion_rates(seeds=5, seed_sd=0.02, pairs=20, difference=0.5, resamples=200)
    assert large == {"bootstrap": 1.0, "welch": 1.0, "resolved": 1.0}
