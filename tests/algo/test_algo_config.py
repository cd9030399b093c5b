"""``asyncweb.algo`` and the decoupled ``policy_loss`` section: validation, construction, verl composition."""

import os

import pytest
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.utils.config import omega_conf_to_dataclass

from verl_asyncweb.algo.config import AsyncWebAlgoConfig, DecoupledPolicyLossConfig
from verl_asyncweb.algo.verl_keys import check_verl_config, required_verl_overrides


def test_defaults_are_the_asyncwebrl_settings():
    cfg = AsyncWebAlgoConfig()
    assert (cfg.estimator, cfg.step_norm, cfg.k, cfg.behav_cap, cfg.behav_cap_mode) == (
        "multistep_grpo",
        "const",
        10,
        5.0,
        "drop",
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("step_norm", "steps", r"asyncweb.algo.step_norm must be one of \['traj', 'const', 'none'\], got 'steps'"),
        (
            "estimator",
            "grpo",
            r"asyncweb.algo.estimator must be one of \['multistep_grpo', 'multistep_reinforce', 'raftpp'\]",
        ),
        ("k", 0, r"asyncweb.algo.k must be an integer > 0, got 0"),
        ("k", 2.5, r"asyncweb.algo.k must be an integer > 0, got 2.5"),
        ("behav_cap", 0.5, r"asyncweb.algo.behav_cap must be a number >= 1.0 or null"),
        (
            "behav_cap_mode",
            "truncate",
            r"asyncweb.algo.behav_cap_mode must be one of \['drop', 'clip'\], got 'truncate'",
        ),
        ("norm_by_std", "yes", r"asyncweb.algo.norm_by_std must be true or false"),
        ("dynamic_sampling", 1, r"asyncweb.algo.dynamic_sampling must be true or false"),
        ("eps", -1.0, r"asyncweb.algo.eps must be a number >= 0"),
    ],
)
def test_invalid_values_raise_with_the_dotted_key(key, value, message):
    with pytest.raises(ValueError, match=message):
        AsyncWebAlgoConfig(**{key: value})


def test_from_dict_accepts_dict_dictconfig_and_none_and_rejects_unknown_keys():
    assert AsyncWebAlgoConfig.from_dict(None) == AsyncWebAlgoConfig()
    node = OmegaConf.create({"_target_": "verl_asyncweb.algo.config.AsyncWebAlgoConfig", "step_norm": "traj", "k": 4})
    assert AsyncWebAlgoConfig.from_dict(node).step_norm == "traj"
    assert AsyncWebAlgoConfig.from_dict({"behav_cap": None}).behav_cap is None
    with pytest.raises(ValueError, match=r"asyncweb.algo has unknown keys \['stepnorm'\]; valid keys are"):
        AsyncWebAlgoConfig.from_dict({"stepnorm": "traj"})


def test_verl_omega_conf_to_dataclass_builds_both_configs():
    node = OmegaConf.create({"_target_": "verl_asyncweb.algo.config.AsyncWebAlgoConfig", "behav_cap_mode": "clip"})
    assert omega_conf_to_dataclass(node).behav_cap_mode == "clip"
    assert omega_conf_to_dataclass({"k": 3}, AsyncWebAlgoConfig).k == 3
    pl = omega_conf_to_dataclass({"_target_": "verl_asyncweb.algo.config.DecoupledPolicyLossConfig", "behav_cap": 2.0})
    assert isinstance(pl, DecoupledPolicyLossConfig) and pl.behav_cap == 2.0 and pl.loss_mode == "vanilla"
    with pytest.raises(ValueError, match="actor_rollout_ref.actor.policy_loss.behav_cap_mode must be one of"):
        DecoupledPolicyLossConfig(behav_cap_mode="x")


def _compose(overrides):
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=overrides)
    OmegaConf.resolve(cfg)
    return cfg


def _as_hydra_overrides(keys, new_keys=("behav_cap", "behav_cap_mode")):
    out = []
    for key, value in keys.items():
        text = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        out.append(("+" if key.rsplit(".", 1)[-1] in new_keys else "") + f"{key}={text}")
    return out


def test_required_overrides_compose_into_verls_config_and_reach_the_actor_config():
    algo = AsyncWebAlgoConfig(step_norm="traj", behav_cap=4.0, behav_cap_mode="clip")
    overrides = _as_hydra_overrides(required_verl_overrides(algo))
    overrides += ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor_rollout_ref.rollout.n=1"]
    cfg = _compose(overrides)
    check_verl_config(cfg, algo)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)  # what verl's engine workers do
    assert isinstance(actor.policy_loss, DecoupledPolicyLossConfig)
    assert (actor.policy_loss.behav_cap, actor.policy_loss.behav_cap_mode) == (4.0, "clip")
    assert actor.policy_loss.loss_mode == "decoupled_ppo"


def test_check_verl_config_names_every_wrong_key():
    cfg = _compose(["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2"])
    with pytest.raises(ValueError) as err:
        check_verl_config(cfg, AsyncWebAlgoConfig())
    text = str(err.value)
    for key in (
        "actor_rollout_ref.actor.policy_loss.loss_mode must be 'decoupled_ppo', got 'vanilla'",
        "algorithm.rollout_correction.rollout_is must be 'token', got None",
        "algorithm.rollout_correction.rollout_is_threshold must be 1000000000.0, got 2.0",
        "algorithm.adv_estimator must be 'multistep_grpo', got 'gae'",
        "actor_rollout_ref.actor.policy_loss.behav_cap must be 5.0, got '<missing>'",
    ):
        assert key in text
