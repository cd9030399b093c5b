"""Every recipe composes into verl's trainer config and validates on CPU (GPU recipes included)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_asyncweb.bench.learning.arms import ARMS as LEARNING_ARMS
from verl_asyncweb.main import (
    SetupError,
    _starts_local_cluster,
    check_parameter_sync_step,
    joining_ray_init,
    load_config,
    main,
    workers_may_differ,
)
from verl_asyncweb.recipes_registry import RecipeError, available_recipes

# What a user must supply to the GPU recipes (their `???` values).
GPU_VALUES = [
    "actor_rollout_ref.model.path=/models/Qwen3-VL-8B-Instruct",
    "asyncweb.judge.base_url=http://127.0.0.1:8000/v1",
    "asyncweb.judge.model=judge",
    "asyncweb.tasks.train=[/data/webgym/train.jsonl]",
]


ONE_GROUP = ["actor_rollout_ref.actor.ppo_mini_batch_size=1"]


def required_values(recipe: str) -> list[str]:
    if recipe.startswith("webgym"):
        return GPU_VALUES
    return ["actor_rollout_ref.model.path=/models/warm_start"] if recipe.startswith("laptop_") else []


@pytest.mark.parametrize("recipe", available_recipes())
def test_recipe_composes_and_validates(recipe):
    cfg, asyncweb = load_config([f"recipe={recipe}", *required_values(recipe)])
    assert asyncweb.recipe == recipe
    assert cfg.trainer.use_v1 is True
    assert cfg.trainer.resume_mode == "auto"  # the console's resume line relies on it
    assert cfg.actor_rollout_ref.actor.policy_loss.loss_mode in ("decoupled_ppo", "vanilla")
    assert cfg.data.train_batch_size == (
        cfg.trainer.v1.separate_async.parameter_sync_step * cfg.actor_rollout_ref.actor.ppo_mini_batch_size
    )
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)


def _cycle_as_verl_reads_it(cfg) -> int:
    """``trainer_base.__init__``'s read: the node of the trainer mode, 1 when it has none."""
    return cfg.trainer.v1.get(cfg.trainer.v1.trainer_mode, {}).get("parameter_sync_step", 1)


@pytest.mark.parametrize(
    "recipe", ["webgym_qwen3vl8b_async", "webgym_qwen3vl8b_sync", "gpu_check", "gpu_check_1gpu", "gpu_check_vllm_1gpu"]
)
def test_gpu_recipes_run_two_local_updates_per_weight_sync(recipe):
    cfg, _ = load_config([f"recipe={recipe}", *required_values(recipe)])
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))  # as verl's trainer receives it
    assert cfg.trainer.v1.trainer_mode == "asyncweb"
    assert _cycle_as_verl_reads_it(cfg) == cfg.trainer.v1.separate_async.parameter_sync_step == 2
    assert cfg.data.train_batch_size == 2 * cfg.actor_rollout_ref.actor.ppo_mini_batch_size


def test_the_cycle_follows_separate_async_and_a_disagreeing_value_is_refused_naming_both_keys():
    cfg, _ = load_config(["recipe=cpu_smoke", "trainer.v1.separate_async.parameter_sync_step=2", *ONE_GROUP])
    assert _cycle_as_verl_reads_it(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))) == 2
    with pytest.raises(SetupError) as refused:
        load_config(["recipe=cpu_smoke", "trainer.v1.asyncweb.parameter_sync_step=2", *ONE_GROUP])
    for key in ("trainer.v1.asyncweb.parameter_sync_step=2", "trainer.v1.separate_async.parameter_sync_step=1"):
        assert key in str(refused.value)
    with pytest.raises(SetupError, match=r"data.train_batch_size=2 .*parameter_sync_step=2 local updates x"):
        load_config(["recipe=cpu_smoke", "trainer.v1.separate_async.parameter_sync_step=2"])


def test_a_config_without_the_asyncweb_node_gets_the_cycle_of_separate_async():
    cfg, _ = load_config(["recipe=cpu_smoke", "trainer.v1.separate_async.parameter_sync_step=2", *ONE_GROUP])
    OmegaConf.set_struct(cfg, False)
    del cfg.trainer.v1["asyncweb"]  # a recipe composed without our bases
    check_parameter_sync_step(cfg)
    assert _cycle_as_verl_reads_it(OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))) == 2


@pytest.mark.parametrize("recipe", ["webgym_qwen3vl8b_async", "webgym_qwen3vl8b_sync"])
def test_the_step_sample_counts_in_the_gpu_recipes_comments_are_the_formulas(recipe):
    """Every "~N step-samples per local update / per step" in the GPU base's comments is what
    :class:`BatchShape` computes for the recipe (640 and 1,280), and the store budget plans for the same steps when
    it knows no tasks."""
    import re
    from pathlib import Path

    import verl_asyncweb
    from verl_asyncweb.agent.store_budget import episode_step_cap
    from verl_asyncweb.config.batch_shape import BatchShape

    cfg, _ = load_config([f"recipe={recipe}", *required_values(recipe)])
    shape = BatchShape.from_config(cfg)
    assert (shape.step_samples_per_update, shape.step_samples_per_step) == (640, 1280)
    comments = (Path(verl_asyncweb.__file__).parent / "recipes" / "_gpu_base.yaml").read_text()
    stated = re.findall(r"~([\d,]+) step-samples per\s+(?:# )?(local update|step)", comments)
    assert stated, "the GPU base states its step-sample counts"
    expected = {"local update": shape.step_samples_per_update, "step": shape.step_samples_per_step}
    assert all(int(count.replace(",", "")) == expected[unit] for count, unit in stated), stated
    assert episode_step_cap(cfg.asyncweb.agent.max_steps, None) == shape.steps_per_episode == 10


@pytest.mark.parametrize(
    ("recipe", "dtype"),
    [("webgym_qwen3vl8b_async", "bfloat16"), ("gpu_check", "float32"), ("cpu_smoke", "float32")],
)
def test_pixels_are_rebuilt_in_the_dtype_the_actor_reads_them_in(recipe, dtype):
    import torch

    from verl_asyncweb.trainer.pixels import pixel_dtype

    cfg, _ = load_config([f"recipe={recipe}", *required_values(recipe)])
    assert pixel_dtype(cfg.actor_rollout_ref.actor) == getattr(torch, dtype)


def test_gpu_recipe_without_its_values_names_them():
    with pytest.raises(SetupError, match=r"needs values for \['asyncweb.judge.base_url'"):
        load_config(["recipe=webgym_qwen3vl8b_async"])


def test_gpu_recipe_expresses_the_paper_resource_split():
    cfg, asyncweb = load_config(["recipe=webgym_qwen3vl8b_async", *GPU_VALUES])
    rollout, trainer = cfg.actor_rollout_ref.rollout, cfg.trainer
    assert rollout.nnodes * rollout.n_gpus_per_node == 48
    assert trainer.nnodes * trainer.n_gpus_per_node == 16
    assert (rollout.name, rollout.checkpoint_engine.backend, cfg.actor_rollout_ref.actor.strategy) == (
        "vllm",
        "nccl",
        "fsdp2",
    )
    assert cfg.data.train_batch_size * rollout.n == 128
    assert (asyncweb.algo.step_norm, asyncweb.algo.k, asyncweb.algo.behav_cap) == ("const", 10, 5.0)
    # AsyncWebRL max_head_offpolicyness 2: trained on weights at most 2 versions newer, so spanning <= 3 versions;
    # eta batches ahead = (eta + 1) x 128 episodes in flight, as AReaL's staleness controller admits.
    assert asyncweb.staleness == 2 and cfg.trainer.v1.sampler.max_off_policy_threshold == 3
    assert cfg.trainer.v1.separate_async.num_warmup_batches == 2


@pytest.mark.parametrize("eta", [0, 4])
def test_staleness_sets_verls_span_threshold_and_prefetch(eta):
    cfg, asyncweb = load_config([f"asyncweb.staleness={eta}"])
    assert cfg.trainer.v1.sampler.max_off_policy_threshold == eta + 1
    assert OmegaConf.select(cfg, "trainer.v1.separate_async.num_warmup_batches") == eta


def test_verls_threshold_override_points_to_the_staleness_key():
    with pytest.raises(SetupError, match="override asyncweb.staleness instead"):
        load_config(["trainer.v1.sampler.max_off_policy_threshold=5"])
    with pytest.raises(SetupError, match="asyncweb.staleness must be >= 0, got -1"):
        load_config(["asyncweb.staleness=-1"])


def test_fixed_micro_batches_must_divide_the_mini_batch():
    # 3 groups x 2 trajectories: verl pads step-samples to a multiple of 6, which micro-batches of 4 cannot split.
    three_groups = ["data.train_batch_size=3", "actor_rollout_ref.actor.ppo_mini_batch_size=3"]
    fixed = [
        "actor_rollout_ref.actor.use_dynamic_bsz=false",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=false",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    ]
    with pytest.raises(SetupError) as err:
        load_config([*three_groups, *fixed])
    assert str(err.value) == (
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4, "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 must divide ppo_mini_batch_size * "
        "rollout.n = 6 step-samples; pick a divisor or set use_dynamic_bsz (micro-batches by token budget)"
    )
    load_config([*three_groups, *(o.replace("=4", "=3") for o in fixed)])
    cfg, _ = load_config(three_groups)  # the CPU recipes' token-budget micro-batches take any group count
    assert cfg.actor_rollout_ref.actor.use_dynamic_bsz and cfg.actor_rollout_ref.rollout.log_prob_use_dynamic_bsz


def test_fused_kernels_are_refused_as_they_bypass_the_trainers_sampler_mask():
    with pytest.raises(SetupError, match="use_fused_kernels=true bypasses the trainer's mask"):
        load_config(["actor_rollout_ref.model.use_fused_kernels=true"])
    cfg, _ = load_config([])
    assert not cfg.actor_rollout_ref.model.use_fused_kernels


def test_unknown_recipe_lists_valid_names():
    with pytest.raises(RecipeError, match=r"recipe must be one of \[.*'cpu_smoke'.*\], got 'nope'"):
        load_config(["recipe=nope"])


def test_a_renamed_recipe_is_answered_with_its_new_name():
    with pytest.raises(RecipeError, match="recipe 'miniwob_raftpp' is now 'demo_raftpp'"):
        load_config(["recipe=miniwob_raftpp"])
    assert "demo_raftpp" in available_recipes() and "miniwob_raftpp" not in available_recipes()


def test_unknown_key_is_named():
    with pytest.raises(RecipeError, match="trainer.no_such_key is not a key of recipe 'cpu_smoke'"):
        load_config(["trainer.no_such_key=1"])


def test_bad_asyncweb_value_is_named():
    with pytest.raises(SetupError, match="asyncweb.algo.step_norm must be one of"):
        load_config(["asyncweb.algo.step_norm=sometimes"])


@pytest.mark.parametrize("args", [["recipe=nope"], ["trainer.no_such_key=1"]])
def test_main_stops_before_any_worker_starts(args, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.main", *args, f"trainer.default_local_dir={tmp_path}/run"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    assert "verl_asyncweb:" in out.stderr
    assert "Started a local Ray instance" not in out.stdout + out.stderr
    assert not (tmp_path / "run").exists()


def test_gpu_recipe_derives_a_screenshot_budget_from_its_tasks_step_caps(tmp_path):
    # eta + 1 batches in flight or waiting + the one being trained = 4 batches of 16 groups x 8 episodes, each up to
    # the longest training task's cap (30 steps: WebGym's hard tasks), 1280x720 JPEGs.
    import math

    from verl_asyncweb.agent.store_budget import HEADROOM, JPEG_BYTES_PER_PIXEL

    example = Path(__file__).parents[2] / "examples" / "webgym_tasks_example.jsonl"
    records = [json.loads(line) for line in example.read_text().splitlines() if line]
    tasks = tmp_path / "train.jsonl"  # one easy task (10 steps) and one hard (30)
    lines = [json.dumps({**record, "difficulty": d}) + "\n" for record, d in zip(records, [2, 9], strict=True)]
    tasks.write_text("".join(lines))
    values = [*GPU_VALUES[:-1], f"asyncweb.tasks.train=[{tasks}]"]
    cfg, asyncweb = load_config(["recipe=webgym_qwen3vl8b_async", *values], check_tasks=True)
    screenshots = 4 * 128 * 30
    assert cfg.asyncweb.agent.screenshot_store_peak_screenshots == screenshots
    assert asyncweb.agent.screenshot_store_budget_bytes == cfg.asyncweb.agent.screenshot_store_budget_bytes
    per_screenshot = math.ceil(1280 * 720 * JPEG_BYTES_PER_PIXEL)
    assert cfg.asyncweb.agent.screenshot_store_budget_bytes == math.ceil(screenshots * per_screenshot * HEADROOM)
    # Without the tasks (``--cfg job``), the planning figure of 10 steps per episode.
    cfg, _ = load_config(["recipe=webgym_qwen3vl8b_async", *values])
    assert cfg.asyncweb.agent.screenshot_store_peak_screenshots == 4 * 128 * 10


def test_a_screenshot_budget_below_the_recipes_peak_stops_at_start_up():
    with pytest.raises(SetupError, match=r"asyncweb.agent.screenshot_store_budget_bytes=536870912 \(512 MiB\) cannot"):
        load_config(
            ["recipe=webgym_qwen3vl8b_async", *GPU_VALUES, "asyncweb.agent.screenshot_store_budget_bytes=536870912"]
        )
    cfg, _ = load_config(["recipe=cpu_smoke", "asyncweb.agent.screenshot_store_budget_bytes=536870912"])
    assert cfg.asyncweb.agent.screenshot_store_budget_bytes == 536870912  # an explicit budget that fits is kept


@pytest.mark.parametrize(
    "recipe", ["webgym_qwen3vl8b_async", "webgym_qwen3vl8b_sync", "laptop_learning", "laptop_multistep"]
)
def test_a_recipe_without_its_model_path_names_the_key(recipe, tmp_path, capsys):
    # Before: the recipes' `path: ???` merged onto verl's default; runs went on with ~/models/deepseek-llm-7b-chat.
    values = [v for v in required_values(recipe) if not v.startswith("actor_rollout_ref.model.path")]
    # A task file that exists: task sources are checked first.
    example = Path(__file__).resolve().parents[2] / "examples" / "webgym_tasks_example.jsonl"
    values = [f"asyncweb.tasks.train=[{example}]" if v.startswith("asyncweb.tasks.train") else v for v in values]
    assert main([f"recipe={recipe}", *values, f"trainer.default_local_dir={tmp_path}/run"]) == 2
    assert "needs actor_rollout_ref.model.path=PATH" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_gpu_recipe_on_a_machine_without_gpus_stops_naming_the_counts(tmp_path):
    from verl_asyncweb.backends.tiny_model import build_tiny_model

    # Before: verl waited for the 64 GPUs' Ray resources until the job was killed.
    # A step's 16 prompt groups need 16 tasks (main refuses fewer before Ray starts): the example's two, 8 times.
    example = (Path(__file__).resolve().parents[2] / "examples" / "webgym_tasks_example.jsonl").read_text().splitlines()
    rows = [json.loads(line) | {"task_id": f"{json.loads(line)['task_id']}-{i}"} for line in example for i in range(8)]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "verl_asyncweb.main",
            "recipe=webgym_qwen3vl8b_async",
            # A model folder that exists (main checks the path before Ray starts): the GPU family's offline one.
            f"actor_rollout_ref.model.path={build_tiny_model(size='qwen3-tiny')}",
            *GPU_VALUES[1:3],
            f"asyncweb.tasks.train=[{tasks}]",
            f"trainer.default_local_dir={tmp_path}/run",
            "ray_kwargs.ray_init.num_cpus=2",
            # The recipe's judge (GPU_VALUES) is not running here: this test is about the GPU count.
            "--skip-judge-check",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "needs 64 GPUs (trainer 2x8 + rollout 6x8) but the Ray cluster has 0" in out.stderr


def test_a_recipe_that_sizes_its_local_cluster_can_join_a_running_one(monkeypatch, caplog):
    # Before: cpu_smoke's num_cpus reached ray.init with RAY_ADDRESS set, and Ray refused ("When connecting to an
    # existing cluster, num_cpus and num_gpus must not be provided").
    cfg, _ = load_config(["recipe=cpu_smoke"])
    ray_init = {**OmegaConf.to_container(cfg.ray_kwargs.ray_init, resolve=True), "num_gpus": 0, "namespace": "ns"}
    assert ray_init["num_cpus"] == 8
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    assert not _starts_local_cluster(ray_init)
    with caplog.at_level("INFO", logger="verl_asyncweb.main"):
        joined = joining_ray_init(ray_init)
    assert joined == {key: value for key, value in ray_init.items() if key not in ("num_cpus", "num_gpus")}
    assert "left out: ray_kwargs.ray_init.num_cpus, ray_kwargs.ray_init.num_gpus" in caplog.text
    monkeypatch.delenv("RAY_ADDRESS")
    assert _starts_local_cluster({**ray_init, "address": "ray://10.0.0.2:10001"}) is False


def test_workers_are_checked_for_registrations_only_where_they_may_import_other_code():
    # A local cluster's workers run this interpreter: the in-worker check (~10 s of start-up) is skipped.
    assert workers_may_differ(starts_local_cluster=True, user_runtime_env={"env_vars": {"A": "1"}}) is False
    cfg, _ = load_config(["recipe=cpu_smoke"])
    verl_default = OmegaConf.to_container(cfg.ray_kwargs.ray_init.runtime_env)
    assert verl_default == {"py_executable": None}
    assert workers_may_differ(starts_local_cluster=True, user_runtime_env=verl_default) is False
    assert workers_may_differ(starts_local_cluster=False, user_runtime_env={}) is True
    for key in ("pip", "conda", "working_dir", "py_modules", "py_executable"):
        assert workers_may_differ(starts_local_cluster=True, user_runtime_env={key: "x"}) is True


@pytest.mark.parametrize("recipe", ["webgym_qwen3vl8b_async", "webgym_qwen3vl8b_sync"])
def test_gpu_recipe_sizes_agree(recipe):
    cfg, asyncweb = load_config([f"recipe={recipe}", *GPU_VALUES])
    rollout, data = cfg.actor_rollout_ref.rollout, cfg.data
    assert rollout.max_model_len == data.max_prompt_length + data.max_response_length
    # Every agent-loop worker can get a group, and there is a page for every episode the staleness bound admits.
    assert rollout.agent.num_workers <= (asyncweb.staleness + 1) * data.train_batch_size
    pages = rollout.agent.num_workers * asyncweb.env.num_browsers * asyncweb.env.pages_per_browser
    assert pages >= (asyncweb.staleness + 1) * data.train_batch_size * rollout.n
    # The browser-host sizing of `bench env --capacity` defaults to this recipe's pages.
    from verl_asyncweb.bench.env import GPU_RECIPE_PAGES, GPU_RECIPE_PAGES_PER_BROWSER

    assert (pages, asyncweb.env.pages_per_browser) == (GPU_RECIPE_PAGES, GPU_RECIPE_PAGES_PER_BROWSER)


def test_more_branch_members_than_a_group_has_episodes_is_refused():
    branching = ["recipe=laptop_multistep", "asyncweb.agent.branch_step=1"]
    load_config([*branching, "asyncweb.agent.branch_members=3"])
    with pytest.raises(SetupError, match="branch_members=4, but a group of actor_rollout_ref.rollout.n=4 episodes"):
        load_config([*branching, "asyncweb.agent.branch_members=4"])
    with pytest.raises(SetupError, match="asyncweb.agent.branch_members must be"):
        load_config([*branching, "asyncweb.agent.branch_members=-1"])


def test_more_agent_workers_than_prompt_groups_in_flight_is_refused():
    # 16 prompts per step, eta = 2: 48 groups in flight, spread by episodes over the workers (32 all get work).
    load_config(["recipe=webgym_qwen3vl8b_async", *GPU_VALUES, "actor_rollout_ref.rollout.agent.num_workers=32"])
    with pytest.raises(SetupError, match="num_workers=64 exceeds the 48 prompt groups in flight"):
        load_config(["recipe=webgym_qwen3vl8b_async", *GPU_VALUES, "actor_rollout_ref.rollout.agent.num_workers=64"])
    with pytest.raises(SetupError, match="num_workers=32 exceeds the 16 prompt groups in flight"):
        load_config(["recipe=webgym_qwen3vl8b_sync", *GPU_VALUES, "actor_rollout_ref.rollout.agent.num_workers=32"])


# What the README's recipe table says distinguishes each recipe:
# (rollout mode, estimator, step normalizer, k, policy loss, dynamic sampling).
RECIPE_TABLE = {
    "cpu_smoke": ("async", "multistep_grpo", "const", 10, "decoupled_ppo", False),
    "demo_async_grpo_const": ("async", "multistep_grpo", "const", 10, "decoupled_ppo", False),
    "demo_async_grpo_traj": ("async", "multistep_grpo", "traj", 10, "decoupled_ppo", False),
    "demo_sync_reinforce": ("sync", "multistep_reinforce", "traj", 10, "decoupled_ppo", False),
    "demo_raftpp": ("async", "raftpp", "const", 10, "decoupled_ppo", False),
    "laptop_learning": ("async", "multistep_grpo", "const", 1, "decoupled_ppo", True),
    "laptop_multistep": ("async", "multistep_grpo", "traj", 6, "decoupled_ppo", True),
    "webgym_qwen3vl8b_async": ("async", "multistep_grpo", "const", 10, "decoupled_ppo", True),
    "webgym_qwen3vl8b_sync": ("sync", "multistep_reinforce", "traj", 10, "decoupled_ppo", False),
    "gpu_check": ("sync", "multistep_grpo", "const", 10, "decoupled_ppo", False),
    "gpu_check_1gpu": ("sync", "multistep_grpo", "const", 10, "decoupled_ppo", False),
    "gpu_check_vllm_1gpu": ("sync", "multistep_grpo", "const", 10, "decoupled_ppo", False),
    "cpu_vllm": ("sync", "multistep_grpo", "const", 10, "decoupled_ppo", False),
}


def test_the_recipe_table_covers_every_recipe():
    assert sorted(RECIPE_TABLE) == sorted(available_recipes())


@pytest.mark.parametrize("recipe", sorted(RECIPE_TABLE))
def test_each_recipe_has_its_distinguishing_settings(recipe):
    cfg, asyncweb = load_config([f"recipe={recipe}", *required_values(recipe)])
    algo = asyncweb.algo
    settings = (
        asyncweb.rollout_mode,
        algo.estimator,
        algo.step_norm,
        algo.k,
        cfg.actor_rollout_ref.actor.policy_loss.loss_mode,
        cfg.algorithm.filter_groups.enable if "filter_groups" in cfg.algorithm else False,
    )
    assert settings == RECIPE_TABLE[recipe]
    assert cfg.algorithm.adv_estimator == algo.estimator  # verl's estimator is the one asyncweb configures


def test_a_mini_batch_that_does_not_split_over_the_trainer_ranks_is_refused():
    # Found by the two-rank learning run: verl asserted in the first actor update, minutes after start.
    two_ranks = [
        "trainer.n_gpus_per_node=2",
        "data.train_batch_size=1",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1",
    ]
    with pytest.raises(
        SetupError,
        match=r"= 3 \(verl pads .* to a multiple of this many rows\) must be divisible by the 2 data-parallel",
    ):
        load_config([*two_ranks, "actor_rollout_ref.rollout.n=3"])
    load_config([*two_ranks, "actor_rollout_ref.rollout.n=4"])


@pytest.mark.parametrize("recipe", ["laptop_learning", "laptop_multistep"])
@pytest.mark.parametrize("arm", sorted(LEARNING_ARMS))
def test_every_learning_bench_arm_composes_with_the_laptop_recipes(arm, recipe):
    cfg, asyncweb = load_config([f"recipe={recipe}", "actor_rollout_ref.model.path=/m", *LEARNING_ARMS[arm]])
    loss, bypass = cfg.actor_rollout_ref.actor.policy_loss.loss_mode, cfg.algorithm.rollout_correction.bypass_mode
    # vanilla is the no-decoupling baseline: verl's PPO ratio against pi_behave (the rollout's log-probs).
    assert (asyncweb.algo.loss_mode, loss, bypass) == (
        ("vanilla", "vanilla", True) if arm == "vanilla" else ("decoupled_ppo", "decoupled_ppo", False)
    )


def test_the_sync_reinforce_arm_runs_the_baseline_its_recipe_names():
    """``bench learning --arms sync_reinforce`` trains what recipe ``demo_sync_reinforce`` does."""
    _, arm = load_config(
        ["recipe=laptop_learning", "actor_rollout_ref.model.path=/m", *LEARNING_ARMS["sync_reinforce"]]
    )
    _, recipe = load_config(["recipe=demo_sync_reinforce"])
    for asyncweb in (arm, recipe):
        algo = asyncweb.algo
        assert (asyncweb.rollout_mode, algo.estimator, algo.step_norm, algo.dynamic_sampling) == (
            "sync",
            "multistep_reinforce",
            "traj",
            False,  # every group trains, all-success ones included, as in WebGym and webgym_qwen3vl8b_sync
        )
    cfg, _ = load_config(
        ["recipe=laptop_multistep", "actor_rollout_ref.model.path=/m", *LEARNING_ARMS["sync_reinforce"]]
    )
    assert not cfg.algorithm.filter_groups.enable  # verl's replay buffer drops no group either


def test_verls_group_filter_must_follow_dynamic_sampling():
    """A recipe that turns dynamic sampling off must not leave verl's group filter on (it would drop the groups)."""
    base = ["recipe=laptop_learning", "actor_rollout_ref.model.path=/m"]
    cfg, asyncweb = load_config(base)
    assert asyncweb.algo.dynamic_sampling and cfg.algorithm.filter_groups.enable
    cfg, _ = load_config([*base, "asyncweb.algo.dynamic_sampling=false"])
    assert not cfg.algorithm.filter_groups.enable  # the recipe's filter follows the key
    with pytest.raises(SetupError, match=r"algorithm\.filter_groups\.enable"):
        load_config([*base, "asyncweb.algo.dynamic_sampling=false", "algorithm.filter_groups.enable=true"])


def test_the_branch_arms_differ_only_in_step_credit():
    """``bench learning --arms branch,branch_credit``: the same branch rollouts, episode-level or step-level credit."""
    arms = {
        arm: load_config(["recipe=laptop_multistep", "actor_rollout_ref.model.path=/m", *LEARNING_ARMS[arm]])[1]
        for arm in ("rl", "branch", "branch_credit")
    }
    assert {arm: (a.agent.branch_step, a.agent.branch_members, a.algo.step_credit) for arm, a in arms.items()} == {
        "rl": (0, 0, "none"),
        "branch": (1, 2, "none"),  # two of the three group mates restore the point, one plays a whole episode
        "branch_credit": (1, 2, "branch"),
    }


def test_vanilla_loss_without_verls_bypass_mode_is_refused_naming_the_key():
    with pytest.raises(SetupError, match="algorithm.rollout_correction.bypass_mode must be True"):
        load_config(["asyncweb.algo.loss_mode=vanilla"])


def test_a_bench_seed_changes_the_sampling_data_and_instance_seeds_and_nothing_else():
    from verl_asyncweb.bench.learning.arms import arm_run_name, seed_overrides

    base, _ = load_config(["recipe=laptop_multistep", "actor_rollout_ref.model.path=/m"])
    seeded, _ = load_config(["recipe=laptop_multistep", "actor_rollout_ref.model.path=/m", *seed_overrides(2)])
    assert seed_overrides(0) == [] and (arm_run_name("rl", 0), arm_run_name("rl", 2)) == ("rl", "rl_seed2")
    assert (seeded.actor_rollout_ref.rollout.seed, seeded.data.seed, seeded.asyncweb.tasks.seed) == (44, 2, 2)
    assert (base.actor_rollout_ref.rollout.seed, base.data.seed, base.asyncweb.tasks.seed) == (42, None, 0)
    for cfg in (base, seeded):
        for key in ("actor_rollout_ref.rollout.seed", "data.seed", "asyncweb.tasks.seed"):
            OmegaConf.update(cfg, key, 0)
    assert OmegaConf.to_container(base) == OmegaConf.to_container(seeded)
