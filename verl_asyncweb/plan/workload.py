"""Random draws of the simulated workload: episode outcomes, lengths and per-step web latency."""

from __future__ import annotations

import random
from dataclasses import dataclass

from verl_asyncweb.plan.profile import EnvCost, LatencySpec, Workload


def geometric_stop_prob(mean_steps: float, max_steps: int) -> float:
    """Per-step stop probability r with E[min(1 + Geometric(r), max_steps)] = ``mean_steps``.

    E = (1 - (1 - r)^M) / r decreases from M (r -> 0) to 1 (r = 1); solved by bisection. Returns 0 for
    ``mean_steps == max_steps`` (every episode runs to the limit).
    """
    if mean_steps >= max_steps:
        return 0.0
    if mean_steps <= 1:
        return 1.0
    low, high = 1e-12, 1.0
    for _ in range(100):
        mid = (low + high) / 2
        if (1 - (1 - mid) ** max_steps) / mid > mean_steps:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def latency_s(spec: LatencySpec, rng: random.Random) -> float:
    """One web-latency delay; the formula of :meth:`verl_asyncweb.env.latency.LatencyModel.sample_s`."""
    if not spec.enable:
        return 0.0
    return min(rng.lognormvariate(spec.mu, spec.sigma), spec.max_delay_s)


@dataclass(frozen=True)
class EpisodeDraw:
    """One episode's outcome and shape."""

    success: bool
    num_steps: int
    response_tokens_per_step: float


class WorkloadSampler:
    """Draws groups of episodes and step latencies from two seeded streams.

    Outcomes and latencies use separate generators so that changing a cost (which reorders events) leaves the
    episodes themselves unchanged: sweeps compare configurations on the same episodes.
    """

    def __init__(self, workload: Workload, env: EnvCost, seed: int) -> None:
        self.workload, self.env = workload, env
        streams = random.Random(seed)
        self._outcomes = random.Random(streams.getrandbits(64))
        self._latency = random.Random(streams.getrandbits(64))
        self._stop_prob = {
            True: geometric_stop_prob(workload.steps_success, workload.max_steps),
            False: geometric_stop_prob(workload.steps_failure, workload.max_steps),
        }

    def group(self, size: int) -> list[EpisodeDraw]:
        """The episodes of one group (one task sampled ``size`` times)."""
        task_success_prob = self._task_success_prob()
        return [self._episode(self._outcomes.random() < task_success_prob) for _ in range(size)]

    def step_env_s(self) -> float:
        """Browser time of one step: the fixed cost plus a web-latency draw."""
        return self.env.step_s + latency_s(self.env.latency, self._latency)

    def _task_success_prob(self) -> float:
        p, kappa = self.workload.success_prob, self.workload.success_concentration
        if kappa is None or p in (0.0, 1.0):
            return p
        return self._outcomes.betavariate(p * kappa, (1 - p) * kappa)

    def _episode(self, success: bool) -> EpisodeDraw:
        stop_prob, steps = self._stop_prob[success], 1
        while steps < self.workload.max_steps and self._outcomes.random() >= stop_prob:
            steps += 1
        tokens = self.workload.response_tokens_success if success else self.workload.response_tokens_failure
        return EpisodeDraw(success=success, num_steps=steps, response_tokens_per_step=tokens)


def expected_discard_prob(workload: Workload, group_size: int) -> float:
    """Probability that a group's rewards are all equal: p^n + (1-p)^n, averaged over the task spread if any.

    For Beta(a, b) task probabilities, E[q^n] = prod_{i<n} (a + i) / (a + b + i).
    """
    p, kappa, n = workload.success_prob, workload.success_concentration, group_size
    if kappa is None or p in (0.0, 1.0):
        return p**n + (1 - p) ** n
    a, b = p * kappa, (1 - p) * kappa
    all_success = all_failure = 1.0
    for i in range(n):
        all_success *= (a + i) / (a + b + i)
        all_failure *= (b + i) / (a + b + i)
    return all_success + all_failure
