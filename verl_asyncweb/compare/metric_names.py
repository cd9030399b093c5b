"""Metric names every run logs (DESIGN.md section 6), shared by the trainer (writer) and the tools (readers).

The trainer should import these constants instead of spelling the strings, so a rename breaks loudly.
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

# Asynchrony.
POLICY_LAG_MEAN = "asyncweb/policy_lag/mean"
POLICY_LAG_MAX = "asyncweb/policy_lag/max"
TRAINER_IDLE_FRAC = "asyncweb/trainer_idle_frac"
ROLLOUT_IDLE_FRAC = "asyncweb/rollout_idle_frac"

# Clip triggers of the decoupled PPO loss, and verl's own clip fraction.
DECOUPLED_CLIP_FRAC = "actor/decoupled_clip_rate"
DECOUPLED_NAIVE_CLIP_FRAC = "actor/naive_clip_rate"
DECOUPLED_DROPPED_FRAC = "actor/behav_over_cap_frac"
VERL_PG_CLIPFRAC = "actor/pg_clipfrac"

# Throughput and time.
TRAJS_PER_HOUR = "asyncweb/trajs_per_hour"
WALL_S = "asyncweb/wall_s"
"""Seconds since the run started, logged every step; the x axis of the wall-time plots."""

# Config keys that tell loss variants apart (shown next to each run's name).
CONFIG_RECIPE = "asyncweb.recipe"
CONFIG_STEP_NORM = "asyncweb.algo.step_norm"
CONFIG_ESTIMATOR = "asyncweb.algo.estimator"
CONFIG_LOSS_MODE = "actor_rollout_ref.actor.policy_loss.loss_mode"
CONFIG_ROLLOUT_MODE = "asyncweb.rollout_mode"
VARIANT_CONFIG_KEYS = (CONFIG_STEP_NORM, CONFIG_ESTIMATOR, CONFIG_LOSS_MODE, CONFIG_ROLLOUT_MODE)

# Episode counts of a step.
TRAJECTORIES = "asyncweb/trajectories"
CONTEXT_OVERFLOWS = "asyncweb/context_overflows"
