"""What the planner predicts for one profile, and its text form."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    """Steady-state figures over the measured training steps (after ``sim.warmup_steps``).

    Args:
        mode: ``async`` or ``sync``.
        trained_trajs_per_hour: Trajectories the trainer consumed per hour (the useful throughput).
        finished_trajs_per_hour: Trajectories that finished per hour, discarded and dropped ones included (what
            the run metric ``asyncweb/trajs_per_hour`` counts).
        step_s: Mean wall time of a training step.
        train_s: Mean wall time of the trainer compute per step (overhead, pi_prox recompute, update; longer under
            rollout contention), without weight sync.
        trainer_idle_frac: Fraction of the time the trainer waited for a batch.
        rollout_idle_frac: Fraction of replica-time without a request generating, averaged over replicas (paused
            for weight sync counts as idle). The run metric ``asyncweb/rollout_idle_frac`` is idle only when no
            server generates; with one replica both agree.
        rollout_busy_during_update_frac: Fraction of replica-time spent generating while the trainer computed
            (0 when rollout and training never overlap).
        policy_lag_hist: Fraction of trained step-samples by policy lag (trainer version at the update minus the
            version the step's request was submitted under).
        stale_drop_frac: Fraction of finished trajectories dropped as staler than eta.
        group_discard_frac: Fraction of finished groups discarded by dynamic sampling (all rewards equal).
        episode_s: Mean wall time of a finished episode.
        first_batch_s: Seconds from an empty pipeline until the trainer takes its first batch: the first step's
            rollout, a start-up figure (not in the steady-state window).
        measured_steps: Training steps behind these figures.
    """

    mode: str
    trained_trajs_per_hour: float
    finished_trajs_per_hour: float
    step_s: float
    train_s: float
    trainer_idle_frac: float
    rollout_idle_frac: float
    rollout_busy_during_update_frac: float
    policy_lag_hist: dict[int, float]
    stale_drop_frac: float
    group_discard_frac: float
    episode_s: float
    first_batch_s: float
    measured_steps: int

    @property
    def policy_lag_mean(self) -> float:
        return sum(lag * frac for lag, frac in self.policy_lag_hist.items())

    @property
    def policy_lag_max(self) -> int:
        return max((lag for lag, frac in self.policy_lag_hist.items() if frac > 0), default=0)


def format_prediction(prediction: Prediction, title: str) -> str:
    """A two-column table of ``prediction`` and its policy-lag histogram."""
    rows = [
        ("mode", prediction.mode),
        ("trained trajectories / hour", f"{prediction.trained_trajs_per_hour:,.0f}"),
        ("finished trajectories / hour", f"{prediction.finished_trajs_per_hour:,.0f}"),
        ("step time s (trainer compute s)", f"{prediction.step_s:.1f} ({prediction.train_s:.1f})"),
        ("trainer idle fraction", f"{prediction.trainer_idle_frac:.3f}"),
        ("rollout idle fraction", f"{prediction.rollout_idle_frac:.3f}"),
        ("rollout busy during update", f"{prediction.rollout_busy_during_update_frac:.3f}"),
        ("policy lag mean / max", f"{prediction.policy_lag_mean:.2f} / {prediction.policy_lag_max}"),
        ("dropped as too stale", f"{prediction.stale_drop_frac:.3f}"),
        ("groups discarded (dynamic sampling)", f"{prediction.group_discard_frac:.3f}"),
        ("mean episode s", f"{prediction.episode_s:.1f}"),
        ("first step's rollout s", f"{prediction.first_batch_s:.1f}"),
        ("measured training steps", str(prediction.measured_steps)),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [title, *(f"  {name:<{width}}  {value}" for name, value in rows), "  policy lag of trained step-samples:"]
    for lag, frac in sorted(prediction.policy_lag_hist.items()):
        lines.append(f"    {lag:>3}  {frac:6.3f}  {'#' * round(frac * 40)}")
    return "\n".join(lines)
