"""How often the comparison tables call a difference resolved: ``bench intervals``.

Simulated pairs of variants, as a comparison of learning runs draws them: each seed's true success rate is drawn
around ``--rate`` (the second variant's around ``--rate`` + ``--difference``) with a seed-to-seed spread
``--seed-sd`` (training noise), then ``--episodes`` held-out episodes at that rate. For each number of seeds a
side, the share of pairs whose difference excludes zero by the bootstrap interval alone, by Welch's t interval over
the seeds' means alone (each side's spread floored at a seed's binomial spread), and by both (what the tables mark
resolved, :mod:`verl_asyncweb.compare.confidence`). With no difference that share is the false-positive rate (a 95%
rule that holds its level stays near 5%); with one, the rule's power. Each pair is a single comparison: Holm's
correction over an experiment's comparisons only makes its verdicts more conservative.

    python -m verl_asyncweb.bench intervals --seeds 1,2,3 --seed-sd 0,0.08 --pairs 300 --resamples 1000
    python -m verl_asyncweb.bench intervals --seeds 2,3,5 --seed-sd 0.08 --difference 0.15 --pairs 300 --resamples 1000
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from verl_asyncweb.compare.confidence import RESAMPLES, difference_interval

logger = logging.getLogger(__name__)


def _variant(rng: np.random.Generator, seeds: int, rate: float, seed_sd: float, episodes: int) -> list[list[float]]:
    rates = np.clip(rng.normal(rate, seed_sd, size=seeds), 0.0, 1.0)
    return [rng.binomial(1, p, size=episodes).astype(float).tolist() for p in rates]


def exclusion_rates(
    seeds: int,
    seed_sd: float,
    pairs: int,
    rate: float = 0.175,
    difference: float = 0.0,
    episodes: int = 80,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[str, float | None]:
    """Shares of ``pairs`` simulated pairs whose difference excludes zero: by the bootstrap, by Welch's t (None with
    one seed a side, where it has no interval), by both."""
    rng = np.random.default_rng(seed)
    counts: dict[str, int | None] = {"bootstrap": 0, "welch": None, "resolved": 0}  # welch: no interval yet
    for _ in range(pairs):
        first = _variant(rng, seeds, rate, seed_sd, episodes)
        second = _variant(rng, seeds, rate + difference, seed_sd, episodes)
        interval = difference_interval(first, second, resamples=resamples, seed=int(rng.integers(2**31)))
        counts["bootstrap"] += interval.low > 0 or interval.high < 0
        if interval.seed_low is not None:
            counts["welch"] = (counts["welch"] or 0) + (interval.seed_low > 0 or interval.seed_high < 0)
        counts["resolved"] += interval.resolved
    return {name: None if count is None else count / pairs for name, count in counts.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.bench intervals", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seeds", default="2,3,5", help="seeds a side, comma-separated")
    parser.add_argument("--seed-sd", default="0,0.08", help="seed-to-seed spreads of the true rate, comma-separated")
    parser.add_argument("--pairs", type=int, default=150, help="simulated pairs per cell")
    parser.add_argument("--rate", type=float, default=0.175, help="the first variant's true success rate")
    parser.add_argument(
        "--difference", type=float, default=0.0, help="the second variant's true rate minus the first's (0: none)"
    )
    parser.add_argument("--episodes", type=int, default=80, help="held-out episodes per seed")
    parser.add_argument(
        "--resamples", type=int, default=RESAMPLES, help="bootstrap resamples per interval (default: the tables')"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    lines = [
        f"pairs at {args.rate:g} and {args.rate + args.difference:g} success, {args.episodes} episodes a seed, "
        f"{args.pairs} pairs a cell",
        "",
        "| seeds a side | seed-to-seed sd | bootstrap excludes 0 | Welch excludes 0 | resolved (both) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for seed_sd in (float(value) for value in args.seed_sd.split(",")):
        for seeds in (int(value) for value in args.seeds.split(",")):
            logger.info("%d seeds a side, seed sd %g", seeds, seed_sd)
            rates = exclusion_rates(
                seeds, seed_sd, args.pairs, args.rate, args.difference, args.episodes, args.resamples
            )
            welch = "—" if rates["welch"] is None else f"{rates['welch']:.2f}"
            lines.append(f"| {seeds} | {seed_sd:g} | {rates['bootstrap']:.2f} | {welch} | {rates['resolved']:.2f} |")
    print("\n".join(lines))
    return 0
