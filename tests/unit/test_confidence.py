"""The intervals behind every "mean [95% CI]" and "resolved" in the comparison tables, against hand computations."""

import itertools
import json
import math
from pathlib import Path

import pytest
from scipy import stats

from verl_asyncweb.compare.confidence import Interval, difference_interval, holm, mean_interval
from verl_asyncweb.compare.paired import paired_difference


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
    # allows, below -0.075 for a gain over an exact 7.5% (a warm start recorded as its rate alone) and past +-1
    # between two arms.
    spread = [[1.0] * 29 + [0.0] * 71, [1.0] * 14 + [0.0] * 86]
    uncut = difference_interval(spread, [[0.075]], fixed_second=True)
    assert uncut.seed_low < -0.075 and uncut.seed_high > 0.925
    gain = difference_interval(spread, [[0.075]], fixed_second=True, bounds=(0, 1))
    assert (gain.seed_low, gain.seed_high) == pytest.approx((-0.075, 0.925))
    assert (gain.mean, gain.low, gain.high, gain.resolved) == (uncut.mean, uncut.low, uncut.high, uncut.resolved)
    between = difference_interval(spread, [[1.0] * 9 + [0.0] * 91, [1.0] * 40 + [0.0] * 60], bounds=(0, 1))
    assert (between.seed_low, between.seed_high) == (-1.0, 1.0) and not between.resolved
    # A narrow interval inside the bounds is left as it is.
    close = [[1.0] * 24 + [0.0] * 76, [1.0] * 25 + [0.0] * 75] * 3
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


def _rate(successes: int, episodes: int = 80) -> list[float]:
    return [1.0] * successes + [0.0] * (episodes - successes)


def test_tied_seeds_keep_their_binomial_spread_and_a_warm_start_its_evaluation_noise():
    # Two seeds at exactly 8/80: no seed spread, but each rate is a draw of 80 episodes (variance 0.1 * 0.9 / 80).
    tied = difference_interval([_rate(20), _rate(20)], [_rate(8), _rate(8)])
    parts = (0.25 * 0.75 / 80 / 2, 0.1 * 0.9 / 80 / 2)
    freedom = sum(parts) ** 2 / sum(part**2 for part in parts)  # one degree a side
    half = stats.t.ppf(0.975, freedom) * math.sqrt(sum(parts))
    assert (tied.seed_low, tied.seed_high) == pytest.approx((0.15 - half, 0.15 + half))
    # A warm start's one evaluation of 6/80 is a draw too: its binomial variance joins the gain's (79 degrees).
    gain = difference_interval([_rate(20), _rate(24), _rate(16)], [_rate(6)], fixed_second=True)
    parts = (0.05**2 / 3, 0.075 * 0.925 / 80)  # the seeds' spread is above their binomial floor (0.0023)
    freedom = sum(parts) ** 2 / (parts[0] ** 2 / 2 + parts[1] ** 2 / 79)
    half = stats.t.ppf(0.975, freedom) * math.sqrt(sum(parts))
    assert (gain.seed_low, gain.seed_high) == pytest.approx((0.175 - half, 0.175 + half))


def test_the_worked_example_of_the_branch_credit_experiment_is_not_resolved_after_holm():
    record = json.loads((Path(__file__).parents[2] / "docs/results/branch_credit.json").read_text())
    arms: dict[str, list] = {}
    for run in record["arms"]:
        arms.setdefault(run["arm"], []).append(run["held_out_after_outcomes"])
    pairs = list(itertools.combinations(arms, 2))
    found = holm(
        [lambda level, a=a, b=b: difference_interval(arms[a], arms[b], level, bounds=(0, 1)) for a, b in pairs]
    )
    credit = found[pairs.index(("branch_credit", "branch"))]
    assert credit.mean == pytest.approx(0.1458, abs=1e-4) and credit.comparisons == 3
    assert (credit.seed_low, credit.seed_high) == pytest.approx((-0.037, 0.329), abs=1e-3)
    assert credit.p_value < 0.05 < credit.adjusted_p and not credit.resolved
    assert not any(difference.resolved for difference in found)


def test_holm_adjusts_p_values_step_down_and_leaves_untestable_comparisons_alone():
    def fixed(p_value: float | None):
        return lambda level: Interval(0.1, 0.05, 0.15, 4, 4, 0.01, 0.2, p_value)

    found = holm([fixed(0.01), fixed(0.04), fixed(None), fixed(0.03)])
    assert [f.adjusted_p for f in found] == pytest.approx([0.03, 0.06, None, 0.06])
    assert [f.resolved for f in found] == [True, False, False, False]
    assert {f.comparisons for f in found} == {3, 1}


def test_a_paired_difference_cancels_what_instances_share():
    # Instance difficulty dominates: both arms solve the same easy instances, the first one more.
    easy = {("t", seed): 1.0 for seed in range(30)}
    hard = {("t", seed): 0.0 for seed in range(30, 80)}
    better = {**easy, **hard, **{("t", seed): 1.0 for seed in range(30, 38)}}
    first = [dict(better), {**better, ("t", 39): 1.0}, dict(better)]
    second = [{**easy, **hard}, {**easy, **hard, ("t", 40): 1.0}, {**easy, **hard}]
    paired = paired_difference(first, second, bounds=(0, 1))
    assert paired.mean == pytest.approx(8 / 80) and paired.seeds == 3 and paired.values == 240
    assert paired.low > 0 and paired.resolved
    unpaired = difference_interval([list(s.values()) for s in first], [list(s.values()) for s in second])
    assert unpaired.seed_low < 0 and not unpaired.resolved
    # One matched seed: an interval over its instances only, no p-value, never resolved.
    single = paired_difference(first[:1], second[:1])
    assert single.low > 0 and single.p_value is None and not single.resolved
    assert paired_difference([{("t", 1): 1.0}], [{("t", 2): 0.0}]) is None, "no shared instance"
