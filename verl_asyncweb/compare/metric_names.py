"""Metric names every run logs (DESIGN.md section 6), shared by the trainer (writer) and the tools (readers).

The trainer imports these constants instead of spelling the strings, so a rename breaks loudly.
"""

from __future__ import annotations

# Success.
SUCCESS_RATE = "asyncweb/success_rate"
SUCCESS_RATE_EASY = "asyncweb/success_rate/easy"
SUCCESS_RATE_MEDIUM = "asyncweb/success_rate/medium"
SUCCESS_RATE_HARD = "asyncweb/success_rate/hard"
SUCCESS_RATES = (SUCCESS_RATE, SUCCESS_RATE_EASY, SUCCESS_RATE_MEDIUM, SUCCESS_RATE_HARD)

# Trajectory shape, split by outcome.
STEPS_PER_TRAJ_SUCCESS = "asyncweb/steps_per_traj/success"
STEPS_PER_TRAJ_FAILURE = "asyncweb/steps_per_traj/failure"
RESPONSE_TOKENS_PER_STEP_SUCCESS = "asyncweb/response_tokens_per_step/success"
RESPONSE_TOKENS_PER_STEP_FAILURE = "asyncweb/response_tokens_per_step/failure"

# Structured memory.
MEMORY_JSON_BYTES = "asyncweb/memory/json_bytes"
MEMORY_KEY_COUNT = "asyncweb/memory/key_count"
MEMORY_GENERIC_KEY_RATIO = "asyncweb/memory/generic_key_ratio"
MEMORY_KEYSET_KEPT_FRAC = "asyncweb/memory/keyset_kept_frac"

# Agent and environment health.
INVALID_ACTION_RATE = "asyncweb/invalid_action_rate"
STUCK_RATE = "asyncweb/stuck_rate"
ENV_FAILURES = "asyncweb/env_failures"
ENV_FAILED_GROUPS = "asyncweb/env_failed_groups"
"""Prompt groups with at least one episode failed by the environment (a browser, a judge) since the last step:
verl's replay buffer evicts each whole group, so a failure costs all ``rollout.n`` trajectories of its group."""

# Asynchrony.
POLICY_LAG_MEAN = "asyncweb/policy_lag/mean"
POLICY_LAG_MAX = "asyncweb/policy_lag/max"
TRAINER_IDLE_FRAC = "asyncweb/trainer_idle_frac"
OPTIMIZER_STEPS = "asyncweb/optimizer_steps"
"""Optimizer steps the actor took in a training step: parameter_sync_step local updates x ppo_epochs."""
ROLLOUT_IDLE_FRAC = "asyncweb/rollout_idle_frac"

# Clip triggers of the decoupled PPO loss, and verl's own clip fraction.
DECOUPLED_CLIP_FRAC = "actor/decoupled_clip_rate"
DECOUPLED_NAIVE_CLIP_FRAC = "actor/naive_clip_rate"
DECOUPLED_DROPPED_FRAC = "actor/behav_over_cap_frac"
VERL_PG_CLIPFRAC = "actor/pg_clipfrac"

# Throughput and time.
TRAJS_PER_HOUR = "asyncweb/trajs_per_hour"
WALL_S = "asyncweb/wall_s"
"""Seconds since the run started, logged every step; the x axis of the wall-time plots. A resumed run goes on from
the value logged at the step it resumed from."""

# Config keys that tell loss variants apart (shown next to each run's name).
CONFIG_RECIPE = "asyncweb.recipe"
CONFIG_STEP_NORM = "asyncweb.algo.step_norm"
CONFIG_ESTIMATOR = "asyncweb.algo.estimator"
CONFIG_LOSS_MODE = "actor_rollout_ref.actor.policy_loss.loss_mode"
CONFIG_ROLLOUT_MODE = "asyncweb.rollout_mode"
CONFIG_NEGATE_ADVANTAGE = "asyncweb.algo.negate_advantage"
VARIANT_CONFIG_KEYS = (
    CONFIG_STEP_NORM,
    CONFIG_ESTIMATOR,
    CONFIG_LOSS_MODE,
    CONFIG_ROLLOUT_MODE,
    CONFIG_NEGATE_ADVANTAGE,
)
CONFIG_MODEL_PATH = "actor_rollout_ref.model.path"
"""The run's starting model: its held-out evaluation is step 0 of the run's held-out series."""

# Episode counts of a step.
TRAJECTORIES = "asyncweb/trajectories"
TRAINED_TRAJECTORIES = "asyncweb/trained_trajectories"
ENV_STEPS = "asyncweb/env_steps"
"""Policy steps of the step's finished episodes (one model call and its action each, invalid ones included),
environment-failed ones included; a branch member's own steps only: its restore re-executes the anchor's first K
recorded actions (MiniWoB++, BrowserGym) or copies the state (bundled sites), with no model call. Summed over a run,
the x axis of equal-environment-step comparisons."""
CONTEXT_OVERFLOWS = "asyncweb/context_overflows"

# Run health.
OVERLAP_GENERATION_DURING_UPDATE = "asyncweb/overlap/generation_during_update_s"
EPISODE_ERRORS_TOTAL = "asyncweb/episode_errors_total"
ENV_FAILURES_TOTAL = "asyncweb/env_failures_total"
ENV_RELAUNCHES_TOTAL = "asyncweb/env/relaunches_total"
"""Browsers relaunched (or, remote, reconnected) by the recovery ladder, over every worker's pool since the start."""
ENV_REMOTE_ENDPOINTS_LOST_TOTAL = "asyncweb/env/remote_endpoints_lost_total"
"""Times a remote browser server was taken out of rotation (``asyncweb.env.remote_endpoints``), every pool."""
ENV_REMOTE_CONNECT_FAILURES_TOTAL = "asyncweb/env/remote_connect_failures_total"
BRANCH_MEMBERS = "asyncweb/branch/members"
"""Finished episodes played on from their group's branch point (branch rollouts)."""
BRANCH_FALLBACKS = "asyncweb/branch/fallbacks"
"""Finished episodes of branching groups that got no branch point and played from the start."""
SCREENSHOTS_PADDING_SAMPLES = "asyncweb/screenshots/padding_samples"
SCREENSHOTS_FROM_RUN_FOLDER = "asyncweb/screenshots/from_run_folder"
SCREENSHOTS_DROPPED_SAMPLES = "asyncweb/screenshots/dropped_samples"
SCREENSHOTS_IMAGES_PER_STEP = "asyncweb/screenshots/images_per_step"
SCREENSHOTS_BYTES_FETCHED = "asyncweb/screenshots/bytes_fetched"
SCREENSHOTS_PAYLOAD_BYTES_PER_TRAJ = "asyncweb/screenshots/rollout_payload_bytes_per_traj"
SCREENSHOTS_BUILT_AHEAD = "asyncweb/screenshots/samples_built_ahead"
"""Step-samples whose pixels were built during the previous local update (``asyncweb.pixels.build_ahead``)."""
SCREENSHOTS_STORE_BYTES_HELD = "asyncweb/screenshots/store_bytes_held"
SCREENSHOTS_STORE_PEAK_BYTES = "asyncweb/screenshots/store_peak_bytes"
"""The most bytes the screenshot store has held since the run (attempt) started."""
SCREENSHOTS_STORE_BUDGET_BYTES = "asyncweb/screenshots/store_budget_bytes"
SCREENSHOTS_STORE_PUT_TIMEOUTS_TOTAL = "asyncweb/screenshots/store_put_timeouts_total"
"""Screenshots that waited ``asyncweb.agent.screenshot_put_timeout_s`` for budget and failed their episode."""
SCREENSHOTS_RELEASED_TRAJECTORIES = "asyncweb/screenshots/released_trajectories"
"""Trajectories whose screenshots left the store since the previous step (their group left TransferQueue)."""
BEHAV_W_MEAN = "actor/behav_w_mean"
BEHAV_W_MAX = "actor/behav_w_max"
VERL_PPO_KL = "actor/ppo_kl"
VERL_PG_CLIPFRAC_LOWER = "actor/pg_clipfrac_lower"

EVERY_STEP = "every step"
FINISHED = "steps with a finished trajectory (not failed by the environment)"
DECOUPLED_LOSS = "every step of a `decoupled_ppo` run"
BRANCHING = "every step of a run with branch rollouts (`asyncweb.agent.branch_step` > 0)"
REMOTE = "every step of a run with remote browsers (`asyncweb.env.remote_endpoints`)"

# The metrics docs/metrics.md promises (its Metrics table is this dict, checked by tests/unit/test_metric_docs.py) and
# when each is logged. Episode metrics describe the trajectories finished since the previous step; the end-to-end
# runs check every metric promised for every step on each step they log.
DOCUMENTED_METRICS: dict[str, str] = {
    SUCCESS_RATE: FINISHED,
    SUCCESS_RATE_EASY: "steps with a finished trajectory of that difficulty slice",
    SUCCESS_RATE_MEDIUM: "steps with a finished trajectory of that difficulty slice",
    SUCCESS_RATE_HARD: "steps with a finished trajectory of that difficulty slice",
    STEPS_PER_TRAJ_SUCCESS: "steps with a successful trajectory",
    STEPS_PER_TRAJ_FAILURE: "steps with a failed trajectory",
    RESPONSE_TOKENS_PER_STEP_SUCCESS: "steps with a successful trajectory",
    RESPONSE_TOKENS_PER_STEP_FAILURE: "steps with a failed trajectory",
    MEMORY_JSON_BYTES: "steps with a valid memory JSON",
    MEMORY_KEY_COUNT: "steps with a valid memory JSON",
    MEMORY_GENERIC_KEY_RATIO: "steps with a memory key",
    MEMORY_KEYSET_KEPT_FRAC: "steps with a valid memory JSON",
    INVALID_ACTION_RATE: FINISHED,
    STUCK_RATE: FINISHED,
    ENV_FAILURES: EVERY_STEP,
    ENV_FAILED_GROUPS: EVERY_STEP,
    ENV_FAILURES_TOTAL: EVERY_STEP,
    EPISODE_ERRORS_TOTAL: EVERY_STEP,
    ENV_RELAUNCHES_TOTAL: EVERY_STEP,
    ENV_REMOTE_ENDPOINTS_LOST_TOTAL: REMOTE,
    ENV_REMOTE_CONNECT_FAILURES_TOTAL: REMOTE,
    TRAJECTORIES: EVERY_STEP,
    ENV_STEPS: EVERY_STEP,
    CONTEXT_OVERFLOWS: EVERY_STEP,
    POLICY_LAG_MEAN: EVERY_STEP,
    POLICY_LAG_MAX: EVERY_STEP,
    TRAINER_IDLE_FRAC: EVERY_STEP,
    OPTIMIZER_STEPS: EVERY_STEP,
    ROLLOUT_IDLE_FRAC: EVERY_STEP,
    OVERLAP_GENERATION_DURING_UPDATE: EVERY_STEP,
    TRAJS_PER_HOUR: EVERY_STEP,
    WALL_S: EVERY_STEP,
    VERL_PG_CLIPFRAC: EVERY_STEP,
    DECOUPLED_CLIP_FRAC: DECOUPLED_LOSS,
    DECOUPLED_NAIVE_CLIP_FRAC: DECOUPLED_LOSS,
    DECOUPLED_DROPPED_FRAC: DECOUPLED_LOSS,
    BEHAV_W_MEAN: DECOUPLED_LOSS,
    BEHAV_W_MAX: DECOUPLED_LOSS,
    SCREENSHOTS_PADDING_SAMPLES: EVERY_STEP,
    SCREENSHOTS_FROM_RUN_FOLDER: EVERY_STEP,
    SCREENSHOTS_DROPPED_SAMPLES: EVERY_STEP,
    SCREENSHOTS_BUILT_AHEAD: EVERY_STEP,
    SCREENSHOTS_STORE_BYTES_HELD: EVERY_STEP,
    SCREENSHOTS_STORE_PEAK_BYTES: EVERY_STEP,
    SCREENSHOTS_STORE_BUDGET_BYTES: EVERY_STEP,
    SCREENSHOTS_STORE_PUT_TIMEOUTS_TOTAL: EVERY_STEP,
    SCREENSHOTS_RELEASED_TRAJECTORIES: EVERY_STEP,
    BRANCH_MEMBERS: BRANCHING,
    BRANCH_FALLBACKS: BRANCHING,
}


def documented_metrics_table() -> str:
    """The Metrics table of docs/metrics.md (markdown)."""
    rows = [f"| `{name}` | {when} |" for name, when in DOCUMENTED_METRICS.items()]
    return "\n".join(["| metric | logged on |", "|---|---|", *rows])


def promised_every_step(loss_mode: str) -> list[str]:
    """The documented metrics a step of a run with this policy loss must have."""
    kinds = {EVERY_STEP} | ({DECOUPLED_LOSS} if loss_mode == "decoupled_ppo" else set())
    return [name for name, when in DOCUMENTED_METRICS.items() if when in kinds]
