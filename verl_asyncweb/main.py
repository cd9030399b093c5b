"""``python -m verl_asyncweb.main recipe=NAME key=value …``: compose a recipe and run verl's V1 trainer on it.

Everything that can be checked without workers is checked first (recipe name, config keys, the ``asyncweb``
node, the loss keys, every plugin registration in this process and in a Ray worker), so a mistake stops in
seconds with one clear sentence. Then the run folder is prepared (resolved config, task data, metrics file of
this attempt) and verl's own ``TaskRunnerV1`` runs the job. ``recipe=`` defaults to ``cpu_smoke``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verl_asyncweb.config.batch_shape import BatchShape
from verl_asyncweb.console import ConsoleLogging, LogWriter, StepReporter, format_summary, resume_argv, shell_command
from verl_asyncweb.recipes_registry import (
    DEFAULT_RECIPE,
    RECIPE_PATH_ENV,
    RecipeError,
    compose_recipe,
)
from verl_asyncweb.run_folder import RUN_DIR_ENV, RunFolder
from verl_asyncweb.stall_watch import StallWatch

logger = logging.getLogger("verl_asyncweb.main")

# verl keys a run cannot start without (verl's defaults hold other `???` values for features a recipe may not use).
MODEL_PATH_KEY = "actor_rollout_ref.model.path"
REQUIRED_KEYS = (MODEL_PATH_KEY, "data.train_files", "data.val_files")
# verl counts the weight versions a trajectory spans; derived from asyncweb.staleness (eta) as eta + 1.
STALENESS_THRESHOLD_KEY = "trainer.v1.sampler.max_off_policy_threshold"
CPU_CLUSTER_ENV = {
    # ~8 worker processes start at once on 2 cores: the default limit (num_cpus) makes the raylet warn about "4x
    # the maximum expected startup concurrency" on every run, although nothing is wrong.
    "RAY_worker_maximum_startup_concurrency": "16",
    # No idle worker processes waiting for tasks (Ray prestarts and keeps up to num_cpus, ~50 MiB each): a job's
    # workers are its actors, started on demand.
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    "RAY_num_workers_soft_limit": "0",
}
"""Raylet settings of a local cluster the CPU platform starts (a variable already set is kept)."""
NEW_CLUSTER_ONLY_KEYS = (
    "num_cpus",
    "num_gpus",
    "resources",
    "labels",
    "object_store_memory",
    "_system_config",
    "_enable_object_reconstruction",
    "_node_name",
)
"""``ray.init`` arguments that size or name a new cluster; Ray raises on each when it connects to a running one."""
WORKER_CODE_KEYS = frozenset(
    {"pip", "uv", "conda", "py_executable", "container", "image_uri", "working_dir", "py_modules"}
)
"""``runtime_env`` keys that give Ray workers other packages or code than the driver's."""


SKIP_JUDGE_CHECK = "--skip-judge-check"
JUDGE_PROBE_TIMEOUT_S = 30.0
"""Bound of the start-up probe of the judge (its ``timeout_s`` when shorter)."""


class SetupError(RuntimeError):
    """A problem found before any worker starts; the message says what to change."""


class RunStalled(RuntimeError):
    """The run was stopped because no group could be trained (:mod:`~verl_asyncweb.stall_watch`)."""


@dataclass
class Invocation:
    """The command line: a recipe, Hydra overrides and the flags verl users know from Hydra."""

    recipe: str = DEFAULT_RECIPE
    overrides: list[str] = field(default_factory=list)
    recipe_dirs: list[str] = field(default_factory=list)
    print_config: bool = False
    resolve: bool = False
    help: bool = False
    verbose: bool = False
    check_judge: bool = True


def parse_argv(argv: list[str]) -> Invocation:
    """``recipe=NAME|FILE``, ``key=value`` overrides, ``--recipe-dir DIR``, ``--cfg job``, ``--resolve``, ``-v``,
    ``--skip-judge-check``, ``--help``."""
    invocation, args = Invocation(), list(argv)
    while args:
        arg = args.pop(0)
        flag, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if arg in ("-h", "--help"):
            invocation.help = True
        elif flag in ("--recipe-dir", "--cfg"):
            value = inline or (args.pop(0) if args else "")
            if not value:
                raise SetupError(f"{flag} needs a value")
            if flag == "--cfg" and value != "job":
                raise SetupError(f"--cfg {value} is not supported: --cfg job prints the config a run would use")
            if flag == "--cfg":
                invocation.print_config = True
            else:
                invocation.recipe_dirs.append(value)
        elif arg == "--resolve":
            invocation.resolve = True
        elif arg == SKIP_JUDGE_CHECK:
            invocation.check_judge = False
        elif arg in ("-v", "--verbose"):
            invocation.verbose = True
        elif arg in ("-m", "--multirun"):
            raise SetupError(
                "multirun is not supported here: run variants with python -m verl_asyncweb.compare --sweep "
                "(one run folder per variant, then a comparison table)"
            )
        elif arg.startswith("-"):
            raise SetupError(f"unknown option {arg!r}; options: --cfg job, --resolve, --recipe-dir DIR, -v, --help")
        elif arg.startswith("recipe="):
            invocation.recipe = arg.split("=", 1)[1]
        elif "=" in arg:
            invocation.overrides.append(arg)
        else:
            raise SetupError(f"arguments must be key=value overrides, got {arg!r}")
    return invocation


def load_config(argv: list[str], allow_missing: bool = False, check_tasks: bool = False):
    """Compose and validate; returns (config, typed asyncweb config). Raises SetupError or RecipeError.

    With ``allow_missing`` (``--cfg job``) a recipe whose ``asyncweb`` values are still ``???`` composes with
    them visible and the typed config is ``None``; derived keys are filled in either way. With ``check_tasks``
    (a run on this machine) the task sources are loaded too, before verl's import.
    """
    invocation = parse_argv(argv)
    # Checks that need no verl come before its import (~5 s): a misspelt recipe, key or task source answers at once.
    # compose_recipe reads verl's YAML as files and imports verl only to type-check an override of its config.
    cfg = compose_recipe(invocation.recipe, invocation.overrides, invocation.recipe_dirs)
    recipe = cfg.asyncweb.recipe
    missing = sorted(OmegaConf.missing_keys(cfg.asyncweb))
    if missing and not allow_missing:
        raise SetupError(f"recipe {recipe!r} needs values for {missing}: pass them as key=value overrides")
    train_tasks = None
    if check_tasks and _plain_ints(cfg.asyncweb.tasks, TASK_INT_KEYS):
        train_tasks, _ = task_sets(cfg.asyncweb.tasks)  # ill-typed values are named by the typed config below
    # verl before our modules that import it: importing verl loads this plugin; starting from one of our modules
    # that imports verl would make that plugin import circular (and verl swallows the ImportError).
    import verl  # noqa: F401, I001
    from verl_asyncweb.algo.verl_keys import check_verl_config
    from verl_asyncweb.config.schema import AsyncWebConfig

    asyncweb = None
    if not missing:
        try:
            asyncweb = AsyncWebConfig.from_config(cfg.asyncweb)
            check_verl_config(cfg, asyncweb.algo)
        except (TypeError, ValueError) as exc:
            raise SetupError(str(exc)) from exc
    apply_staleness(cfg, cfg.asyncweb.staleness, invocation.overrides)
    check_step_counts(cfg)
    check_parameter_sync_step(cfg)
    check_micro_batches(cfg)
    check_data_parallel(cfg)
    check_fused_kernels(cfg)
    check_agent_workers(cfg)
    check_branch_members(cfg)
    logger.info("training batch: %s", BatchShape.from_config(cfg).describe())
    if resolve_screenshot_budget(cfg, train_tasks) and asyncweb is not None:
        asyncweb = AsyncWebConfig.from_config(cfg.asyncweb)
    return cfg, asyncweb


TASK_INT_KEYS = ("seed", "max_train_tasks", "miniwob_instances")


def _plain_ints(node: DictConfig, keys: tuple[str, ...]) -> bool:
    return all(isinstance(node[key], int) and not isinstance(node[key], bool) for key in keys)


def resolve_screenshot_budget(cfg: DictConfig, train_tasks: list | None = None) -> bool:
    """Derive the screenshot store's budget from the recipe and its training tasks' step caps, or refuse one too
    small; True when it was derived."""
    from verl_asyncweb.agent.store_budget import BUDGET_KEY, PEAK_SCREENSHOTS_KEY, episode_step_cap, store_need

    node = cfg.asyncweb
    caps = [task.max_steps for task in train_tasks] if train_tasks else None
    need = store_need(
        staleness=node.staleness,
        prompts_per_step=cfg.data.train_batch_size,
        samples_per_prompt=cfg.actor_rollout_ref.rollout.n,
        steps=episode_step_cap(node.agent.max_steps, caps),
        viewport=(node.env.viewport_width, node.env.viewport_height),
        max_side=node.agent.screenshot_max_side,
    )
    budget = node.agent.screenshot_store_budget_bytes
    if budget is None:
        OmegaConf.update(cfg, BUDGET_KEY, need.budget_bytes)
        OmegaConf.update(cfg, PEAK_SCREENSHOTS_KEY, need.screenshots)
        logger.info("screenshot store budget: %s", need.describe())
        return True
    if budget < need.peak_bytes:
        raise SetupError(
            f"{BUDGET_KEY}={budget} ({budget / 2**20:.0f} MiB) cannot hold this recipe's screenshots: "
            f"{need.describe()}; raise it, or set it to null to derive it"
        )
    return False


def check_model_path(cfg: DictConfig, asyncweb) -> None:
    """A recipe that does not build the tiny model needs ``actor_rollout_ref.model.path``.

    Recipes leave it ``null``: a ``???`` placeholder would not survive composition, since merging a missing value
    onto verl's default (``~/models/deepseek-llm-7b-chat``) keeps the default.
    """
    path = OmegaConf.select(cfg, MODEL_PATH_KEY, default=None, throw_on_missing=False)
    if path in (None, "", "???"):
        if asyncweb.build_tiny_model:
            return
        raise SetupError(f"recipe {asyncweb.recipe!r} needs {MODEL_PATH_KEY}=PATH (a Hugging Face model folder)")
    # A path given is the model (recipes that build the tiny model use it instead), so it must be one.
    if not (Path(path).expanduser() / "config.json").is_file():
        what = "does not exist" if not Path(path).expanduser().exists() else "has no config.json"
        raise SetupError(f"{MODEL_PATH_KEY}={path} {what}: pass a Hugging Face model folder")


def check_gpus(cfg: DictConfig) -> None:
    """Stop at once when the Ray cluster has fewer GPUs than the recipe's pools ask for (verl would wait forever)."""
    import ray

    from verl_asyncweb.backends.hf_replica import REPLICA_NAME as HF_REPLICA_NAME

    pools = {"trainer": cfg.trainer}
    rollout = cfg.actor_rollout_ref.rollout
    # The hf server runs on CPU and reserves no GPU (verl_asyncweb.backends.hf_replica).
    if not cfg.actor_rollout_ref.hybrid_engine and rollout.name != HF_REPLICA_NAME:
        pools["rollout"] = rollout
    needed = sum(pool.nnodes * pool.n_gpus_per_node for pool in pools.values())
    available = int(ray.cluster_resources().get("GPU", 0))
    if available < needed:
        split = " + ".join(f"{name} {pool.nnodes}x{pool.n_gpus_per_node}" for name, pool in pools.items())
        raise SetupError(
            f"recipe {cfg.asyncweb.recipe!r} needs {needed} GPUs ({split}) but the Ray cluster has {available}; "
            "start it on the GPU nodes (ray start) or shrink trainer.nnodes/n_gpus_per_node and "
            "actor_rollout_ref.rollout.nnodes/n_gpus_per_node"
        )


def apply_staleness(cfg: DictConfig, eta: int, overrides: list[str]) -> None:
    """Set verl's span threshold from the staleness bound eta (``asyncweb.staleness``), the one knob for it."""
    if any(o.split("=", 1)[0].lstrip("+~") == STALENESS_THRESHOLD_KEY for o in overrides):
        raise SetupError(
            f"{STALENESS_THRESHOLD_KEY} is derived from asyncweb.staleness (eta, threshold = eta + 1): "
            f"override asyncweb.staleness instead"
        )
    OmegaConf.update(cfg, STALENESS_THRESHOLD_KEY, eta + 1, force_add=True)


SYNC_STEP_KEY = "trainer.v1.separate_async.parameter_sync_step"


def check_task_count(cfg: DictConfig, train_tasks: int) -> None:
    """verl's sampler drops the last incomplete batch: fewer training tasks than a step's prompt groups give zero
    batches an epoch, and verl divides by that a minute after start (ZeroDivisionError)."""
    groups = cfg.data.get("gen_batch_size") or cfg.data.train_batch_size
    if train_tasks < groups:
        raise SetupError(
            f"asyncweb.tasks.train gives {train_tasks} training task(s), fewer than the {groups} prompt groups a step "
            f"samples (data.train_batch_size={cfg.data.train_batch_size}): add tasks or lower data.train_batch_size"
        )


def check_step_counts(cfg: DictConfig) -> None:
    """Step and epoch counts that would train nothing (verl runs Ray for a minute and finishes 0 steps)."""
    for key in ("trainer.total_training_steps", "trainer.total_epochs"):
        value = OmegaConf.select(cfg, key, default=None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise SetupError(f"{key} must be a positive integer (or null for verl's default), got {value!r}")


def check_parameter_sync_step(cfg: DictConfig) -> None:
    """verl's sample loop runs ``trainer.v1.<trainer_mode>.parameter_sync_step`` local updates per weight sync (1
    when the node is absent) while its separate-async trainer asserts batch sizes with ``separate_async``'s value;
    for the ``asyncweb`` trainer the two must be one number. An absent node follows ``separate_async``'s."""
    from verl_asyncweb.trainer.asyncweb_trainer import TRAINER_NAME

    v1 = cfg.trainer.v1
    if v1.trainer_mode != TRAINER_NAME:
        return
    mode_key = f"trainer.v1.{TRAINER_NAME}.parameter_sync_step"
    if OmegaConf.select(cfg, mode_key) is None:
        OmegaConf.update(cfg, mode_key, f"${{{SYNC_STEP_KEY}}}", force_add=True)
    cycle, asserted = OmegaConf.select(cfg, mode_key), OmegaConf.select(cfg, SYNC_STEP_KEY)
    if cycle != asserted:
        raise SetupError(
            f"{mode_key}={cycle} (the local updates verl runs per weight sync) disagrees with "
            f"{SYNC_STEP_KEY}={asserted} (what its batch sizes are checked against); set only {SYNC_STEP_KEY}"
        )
    groups, mini_batch = cfg.data.train_batch_size, cfg.actor_rollout_ref.actor.ppo_mini_batch_size
    if groups != cycle * mini_batch:
        raise SetupError(
            f"data.train_batch_size={groups} prompt groups per step must be {SYNC_STEP_KEY}={cycle} local updates x "
            f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch} groups each"
        )


def check_micro_batches(cfg: DictConfig) -> None:
    """Fixed micro-batch sizes must divide a PPO mini-batch, or verl stops on the first update.

    verl pads every batch of step-samples to a multiple of ``ppo_mini_batch_size * rollout.n`` and then splits
    it into micro-batches of a fixed size (when ``use_dynamic_bsz`` is off); a size that does not divide that
    multiple fails inside a worker ("data size must be divisible by ...") after start-up. Token-budget
    micro-batches (``use_dynamic_bsz``) have no such constraint.
    """
    actor, rollout = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout
    mini_batch = actor.ppo_mini_batch_size * rollout.n
    fixed = []
    if not actor.use_dynamic_bsz:
        fixed.append(("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", actor.ppo_micro_batch_size_per_gpu))
    if not rollout.log_prob_use_dynamic_bsz:
        fixed.append(
            ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", rollout.log_prob_micro_batch_size_per_gpu)
        )
    wrong = [f"{key}={size}" for key, size in fixed if size and mini_batch % size]
    if wrong:
        raise SetupError(
            f"{', '.join(wrong)} must divide ppo_mini_batch_size * rollout.n = {mini_batch} step-samples; "
            "pick a divisor or set use_dynamic_bsz (micro-batches by token budget)"
        )


def check_data_parallel(cfg: DictConfig) -> None:
    """verl pads each local update's step-samples to a multiple of ``ppo_mini_batch_size * rollout.n`` rows and
    splits them over the trainer's data-parallel ranks; a multiple that does not split evenly makes its actor
    update assert (``Got mini_batch_size=3 and self.engine.get_data_parallel_size()=2``) after the first rollouts."""
    trainer, actor = cfg.trainer, cfg.actor_rollout_ref.actor
    sequence_parallel = int(actor.get("ulysses_sequence_parallel_size", 1) or 1)
    data_parallel = trainer.nnodes * trainer.n_gpus_per_node // sequence_parallel
    mini_batch = actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n
    if mini_batch % data_parallel:
        raise SetupError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size * rollout.n = {mini_batch} (verl pads each update's "
            f"step-samples to a multiple of this many rows) must be divisible by the {data_parallel} data-parallel "
            "trainer ranks (trainer.nnodes x trainer.n_gpus_per_node / ulysses_sequence_parallel_size)"
        )


def check_fused_kernels(cfg: DictConfig) -> None:
    """The trainer masks the tokens the rollout server never samples on the output of the model's ``lm_head``
    (``algo.sampler_mask``); verl's fused kernels compute log-probs from its weight and would train the unmasked
    distribution again."""
    if cfg.actor_rollout_ref.model.get("use_fused_kernels", False):
        raise SetupError(
            "actor_rollout_ref.model.use_fused_kernels=true bypasses the trainer's mask of the tokens the rollout "
            "server never samples (vision placeholders): pi_prox and pi_theta would not be the sampled policy; "
            "set it to false"
        )


def check_run_folder_shared(run_dir: Path) -> None:
    """On a cluster of several nodes, every node must see the run folder (:mod:`verl_asyncweb.shared_storage`)."""
    from verl_asyncweb.shared_storage import RunFolderNotShared, check_shared_run_folder

    try:
        nodes = check_shared_run_folder(run_dir)
    except RunFolderNotShared as exc:
        raise SetupError(str(exc)) from exc
    if nodes > 1:
        logger.info("run folder %s is shared by all %d nodes", run_dir, nodes)


def check_vllm_cpu(cfg: DictConfig) -> None:
    """vLLM's CPU build installed, a model it serves and a weight bucket that holds its largest tensor."""
    from verl_asyncweb.backends.vllm_cpu import check_vllm_cpu_job

    rollout = cfg.actor_rollout_ref.rollout
    try:
        check_vllm_cpu_job(cfg.actor_rollout_ref.model.path, rollout.checkpoint_engine.update_weights_bucket_megabytes)
    except ValueError as exc:
        raise SetupError(str(exc)) from exc


def check_agent_workers(cfg: DictConfig) -> None:
    """Every agent-loop worker must be able to get a prompt group: groups go to the worker with the fewest episodes
    in flight (:mod:`~verl_asyncweb.agent.placement`), and at most ``train_batch_size`` groups (sync) or
    ``(staleness + 1) x train_batch_size`` (async) are in flight, so workers beyond that never run an episode."""
    workers = cfg.actor_rollout_ref.rollout.agent.num_workers
    prompts = cfg.data.train_batch_size
    mode, staleness = cfg.asyncweb.rollout_mode, cfg.asyncweb.staleness
    in_flight = prompts if mode == "sync" else (staleness + 1) * prompts
    if workers > in_flight:
        raise SetupError(
            f"actor_rollout_ref.rollout.agent.num_workers={workers} exceeds the {in_flight} prompt groups in flight "
            f"(data.train_batch_size, x (asyncweb.staleness + 1) in async mode): {workers - in_flight} workers, and "
            f"their browsers, would never get work; use at most {in_flight} workers (more pages per worker: "
            "asyncweb.env.num_browsers / pages_per_browser)"
        )


def check_branch_members(cfg: DictConfig) -> None:
    """A group of ``rollout.n`` episodes has an anchor and at most ``rollout.n - 1`` members."""
    members, size = cfg.asyncweb.agent.branch_members, cfg.actor_rollout_ref.rollout.n
    if cfg.asyncweb.agent.branch_step and members > size - 1:
        raise SetupError(
            f"asyncweb.agent.branch_members={members}, but a group of actor_rollout_ref.rollout.n={size} episodes "
            f"has one anchor and {size - 1} others: use at most {size - 1} (0: all of them)"
        )


def select_platform(asyncweb) -> None:
    """Select the CPU backend in this process and (through the environment) in every Ray worker."""
    if asyncweb.platform != "cpu":
        return
    os.environ["VERL_PLATFORM"] = "cpu"
    from verl.plugin.platform.platform_manager import get_platform, set_platform

    from verl_asyncweb.backends.cpu_backend import activate_cpu_backend
    from verl_asyncweb.backends.cpu_platform import PlatformCPU

    # Composing the recipe imported verl, which may already have resolved another platform in this process.
    if not isinstance(get_platform(), PlatformCPU):
        set_platform(PlatformCPU())
    activate_cpu_backend()


def task_sets(tasks) -> tuple[list, list]:
    """(training, validation) tasks of ``asyncweb.tasks``; raises SetupError on a source that gives none. Loaded
    once per process for the same values: ``load_config`` checks them before verl's import, ``prepare_inputs``
    writes them (a WebGym file may hold hundreds of thousands of tasks)."""
    try:
        return _cached_task_sets(
            tuple(tasks.train), tuple(tasks.val), tasks.seed, tasks.max_train_tasks, tasks.miniwob_instances
        )
    except (OSError, ValueError) as exc:
        raise SetupError(f"asyncweb.tasks: {exc}") from exc


@functools.lru_cache(maxsize=1)
def _cached_task_sets(*values) -> tuple[list, list]:
    from verl_asyncweb.task_dataset import run_task_sets

    return run_task_sets(*values)


def check_judge(judge, tasks: list, probe: bool) -> None:
    """Tasks graded by the rubric judge need ``asyncweb.judge``, and the judge must answer a probe request (unless
    ``--skip-judge-check``): otherwise every such episode is masked and the run waits forever for a group."""
    judged = list({task.task_id: task for task in tasks if task.evaluator == "judge"}.values())
    if not judged:
        return
    if judge is None:
        raise SetupError(
            f"{len(judged)} task(s) ({judged[0].task_id} first) are graded by the rubric judge and asyncweb.judge is "
            "not set: pass +asyncweb.judge.base_url=http://HOST:PORT/v1 (any OpenAI-compatible endpoint; without + in "
            "a recipe that has the key)"
        )
    if not probe:
        logger.info("judge at %s not probed (%s)", judge.base_url, SKIP_JUDGE_CHECK)
        return
    import asyncio
    import dataclasses

    from verl_asyncweb.env.evaluators.judge import JudgeError, RubricJudge

    async def ask() -> None:
        timeout_s = min(judge.timeout_s, JUDGE_PROBE_TIMEOUT_S)
        async with RubricJudge(dataclasses.replace(judge, timeout_s=timeout_s)) as rubric_judge:
            await rubric_judge.probe()

    started = time.monotonic()
    try:
        asyncio.run(ask())
    except JudgeError as exc:
        raise SetupError(
            f"the judge at {judge.base_url} did not answer a probe request ({exc}): start it or fix "
            f"asyncweb.judge.base_url; pass {SKIP_JUDGE_CHECK} if only the workers can reach it"
        ) from None
    logger.info("judge at %s answered a probe in %.1f s", judge.base_url, time.monotonic() - started)


def check_registrations(cpu: bool) -> None:
    from verl_asyncweb.doctor import format_report, registration_checks

    failed = [check for check in registration_checks(cpu) if not check.ok]
    if failed:
        raise SetupError("verl_asyncweb's verl registrations are missing:\n" + format_report(failed))


def prepare_inputs(cfg: DictConfig, asyncweb, run: RunFolder) -> None:
    """Build the tiny model if asked and write the task data; fill in their paths in ``cfg``."""
    from verl_asyncweb.task_dataset import write_task_dataset

    OmegaConf.set_struct(cfg, False)
    if asyncweb.build_tiny_model and cfg.actor_rollout_ref.model.path in (None, ""):
        from verl_asyncweb.backends.tiny_model import build_tiny_model

        cfg.actor_rollout_ref.model.path = str(build_tiny_model(size=asyncweb.tiny_model_size))
    train, val = task_sets(asyncweb.tasks)
    check_task_count(cfg, len(train))
    cfg.data.train_files = str(write_task_dataset(train, run.data_dir / "train.parquet"))
    cfg.data.val_files = str(write_task_dataset(val, run.data_dir / "val.parquet", split="val"))
    cfg.trainer.default_local_dir = str(run.root)
    OmegaConf.set_struct(cfg, True)


def worker_env(cfg: DictConfig, metrics_path: Path, run: RunFolder) -> dict[str, str]:
    """Environment every Ray worker gets (on top of verl's own runtime env)."""
    from verl_asyncweb.algo.sampler_mask import SAMPLER_MASK_ENV

    env = {
        "VERL_FILE_LOGGER_PATH": str(metrics_path),
        "TENSORBOARD_DIR": str(run.root / "tensorboard"),
        RUN_DIR_ENV: str(run.root),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        SAMPLER_MASK_ENV: "1",
    }
    if os.environ.get("VERL_PLATFORM"):
        env["VERL_PLATFORM"] = os.environ["VERL_PLATFORM"]
    return env


def start_ray(cfg: DictConfig, env: dict[str, str], console: ConsoleLogging) -> bool:
    """Start (or join) the Ray cluster; returns :func:`workers_may_differ` (a local cluster's workers run this
    interpreter with this process's packages otherwise)."""
    import ray
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    console.quiet_libraries()  # importing ray gave its logger a console handler

    runtime_env = get_ppo_ray_runtime_env(cfg)
    runtime_env.setdefault("env_vars", {}).update(env)
    runtime_env["env_vars"]["TRANSFER_QUEUE_ENABLE"] = "1"
    ray_init = OmegaConf.to_container(cfg.ray_kwargs.get("ray_init", {}), resolve=True)
    user_env = ray_init.pop("runtime_env", {}) or {}
    # An environment variable is a string: a recipe's `VAR: 1` or an override `...env_vars.VAR=0` means "1" or "0"
    # (Ray refuses anything else with a TypeError).
    runtime_env["env_vars"].update({name: str(value) for name, value in (user_env.get("env_vars") or {}).items()})
    check_visible_devices(runtime_env["env_vars"])
    os.environ.update(env)
    # What every worker gets, this process gets too: on the CPU platform verl's task runner runs here.
    for name, value in runtime_env["env_vars"].items():
        os.environ.setdefault(name, str(value))
    starts_local_cluster = _starts_local_cluster(ray_init)
    if not starts_local_cluster:
        ray_init = joining_ray_init(ray_init)
    if cfg.asyncweb.platform == "cpu" and starts_local_cluster:
        for name, value in CPU_CLUSTER_ENV.items():
            os.environ.setdefault(name, value)
    with console.stderr_to_log("ray"):
        ray.init(**{**console.ray_init_kwargs(), **ray_init}, runtime_env={**user_env, **runtime_env})
    console.quiet_libraries()
    console.link_ray_logs()
    return workers_may_differ(starts_local_cluster, user_env)


def check_visible_devices(env_vars: dict[str, str]) -> None:
    """A recipe that lists its devices (the shared-GPU recipe's ``"0,0"``: one entry per Ray GPU slot) starts its
    Ray node with them; a different list exported in this shell would win here and Ray would refuse the node."""
    wanted, exported = env_vars.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted is not None and exported is not None and exported != wanted:
        raise SetupError(
            f"CUDA_VISIBLE_DEVICES={exported} is exported, but the recipe starts Ray with {wanted!r} (one entry per "
            "Ray GPU slot): unset it, or run python -m verl_asyncweb.gpu_check --vllm-one-gpu, which lists the first "
            "visible GPU once per slot"
        )


def workers_may_differ(starts_local_cluster: bool, user_runtime_env: dict) -> bool:
    """Ray workers may import other code than this process: they run on a cluster this process joined, or the
    recipe's ``ray_kwargs.ray_init.runtime_env`` installs packages or ships code."""
    # verl's own ray_init.runtime_env holds `py_executable: null`: only keys with a value count.
    return not starts_local_cluster or any(user_runtime_env.get(key) for key in WORKER_CODE_KEYS)


def joining_ray_init(ray_init: dict) -> dict:
    """``ray_init`` without the settings of a new cluster, which Ray refuses when it joins a running one.

    Recipes size the local cluster they start (``_cpu_base`` sets ``num_cpus``); started with ``RAY_ADDRESS`` or
    beside ``ray start``, the same recipe joins that cluster, whose nodes already declared their resources.
    """
    dropped = [key for key in NEW_CLUSTER_ONLY_KEYS if ray_init.get(key) is not None]
    if dropped:
        logger.info(
            "joining a running Ray cluster, whose nodes declare their own resources; left out: %s",
            ", ".join(f"ray_kwargs.ray_init.{key}" for key in dropped),
        )
    return {key: value for key, value in ray_init.items() if key not in NEW_CLUSTER_ONLY_KEYS}


def _starts_local_cluster(ray_init: dict) -> bool:
    """``ray.init`` will start a new cluster: no address given and no local cluster running to join."""
    if ray_init.get("address") or os.environ.get("RAY_ADDRESS"):
        return False
    from ray._private.utils import read_ray_address

    return not read_ray_address()


def run_trainer_loop(cfg: DictConfig, console: ConsoleLogging, in_driver: bool) -> None:
    """verl's TaskRunnerV1: set-up, then the trainer's ``fit`` until the last step.

    verl runs it as a Ray actor (``run_ppo``); on one machine without GPUs (``in_driver``) it runs in this process
    instead, which already imported torch and verl: a job of ~10 processes that each import them saves one (~0.6
    GiB, and a start-up import on the critical path). Its prints and verl's console handler go to the log file.
    """
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo

    if not in_driver:
        run_ppo(cfg, task_runner_class=TaskRunnerV1)
        return
    with console.output_to_log("task_runner"):
        # The class behind verl's @ray.remote (verl's own colocation reads the same attribute).
        TaskRunnerV1.__ray_actor_class__().run(cfg)


def run(argv: list[str], console: ConsoleLogging) -> dict:
    """Run one job; returns the summary written to the run folder."""
    started_at = time.time()
    cfg, asyncweb = load_config(argv, check_tasks=True)
    check_model_path(cfg, asyncweb)
    train, val = task_sets(asyncweb.tasks)
    check_judge(asyncweb.judge, [*train, *val], probe=parse_argv(argv).check_judge)
    select_platform(asyncweb)
    cpu = asyncweb.platform == "cpu"
    check_registrations(cpu)

    run_folder = RunFolder(Path(cfg.trainer.default_local_dir).expanduser().resolve()).prepare()
    console.attach(run_folder.root)
    prepare_inputs(cfg, asyncweb, run_folder)
    if cpu and cfg.actor_rollout_ref.rollout.name == "vllm":
        check_vllm_cpu(cfg)
    metrics_path = run_folder.next_metrics_path()
    missing = [
        key
        for key in REQUIRED_KEYS
        if OmegaConf.select(cfg, key, default=None, throw_on_missing=False) in (None, "???")
    ]
    if missing:
        raise SetupError(f"recipe {asyncweb.recipe!r} needs values for {missing}: pass them as key=value overrides")
    run_folder.write_config(cfg)
    logger.info("run folder %s (metrics: %s, logs: %s)", run_folder.root, metrics_path.name, console.log_dir)

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    console.quiet_libraries()
    with contextlib.redirect_stdout(LogWriter(logging.getLogger("verl.utils.config"))):
        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    check_worker_registrations = start_ray(cfg, worker_env(cfg, metrics_path, run_folder), console)
    try:
        if not cpu:
            check_gpus(cfg)
        check_run_folder_shared(run_folder.root)
        if check_worker_registrations:
            # A worker with other packages would fail later, deep inside verl; a worker process importing verl
            # to check takes ~10 s, so a local cluster (this interpreter, checked above) skips it.
            from verl_asyncweb.doctor import format_report, worker_registration_checks

            failed = [check for check in worker_registration_checks(cpu) if not check.ok]
            if failed:
                raise SetupError("registrations are missing inside Ray workers:\n" + format_report(failed))
        logger.info("workers starting (the first step takes a minute or two on CPU)")
        done_steps = max(run_folder.read_metrics(), default=0)
        reporter = StepReporter(
            metrics_path, cfg.trainer.total_training_steps, first_step=done_steps, stream=console.stream
        ).start()
        watch = StallWatch(asyncweb.stall_timeout_s).start()
        try:
            run_trainer_loop(cfg, console, in_driver=cpu)
        except KeyboardInterrupt:
            if watch.cause is None:
                raise
            raise RunStalled(f"{watch.cause}; logs: {console.log_dir}") from None
        finally:
            watch.stop()
            reporter.stop()
    finally:
        console.keep_ray_logs()
    extra = {"recipe": asyncweb.recipe, "metrics_file": metrics_path.name, "run_dir": str(run_folder.root)}
    return run_folder.write_summary(started_at, extra)


def usage(recipe_dirs: list[str]) -> str:
    """``--help``: the command line and every recipe with its one-line description and hardware."""
    from verl_asyncweb.recipes_registry import recipe_files, recipe_names, recipe_summary

    files = recipe_files(recipe_dirs)
    lines = [
        "usage: python -m verl_asyncweb.main [recipe=NAME|FILE.yaml] [key=value ...] [--recipe-dir DIR] "
        "[--cfg job [--resolve]] [-v]",
        "",
        "  recipe=NAME      a recipe of the package or of a recipe folder (default cpu_smoke); recipe=FILE.yaml",
        f"  --recipe-dir DIR a folder of your recipes (repeatable; also ${RECIPE_PATH_ENV}, {os.pathsep}-separated)",
        "  --cfg job        print the composed config as it would run (derived keys included) and start nothing",
        "  --resolve        with --cfg job: resolve interpolations",
        "  -v, --verbose    libraries' warnings and Ray workers' output on the console too (else in RUN/logs/)",
        f"  {SKIP_JUDGE_CHECK}  start without probing the rubric judge (one the driver cannot reach)",
        "  variants of a recipe: python -m verl_asyncweb.compare --sweep",
        "",
        "recipes:",
    ]
    for name in recipe_names(files):
        what, hardware = recipe_summary(files[name])
        lines.append(f"  {name}: {what}")
        if hardware:
            lines.append(f"  {' ' * len(name)}  hardware: {hardware}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        invocation = parse_argv(argv)
    except SetupError as exc:
        print(f"verl_asyncweb: {exc}", file=sys.stderr)
        return 2
    console = ConsoleLogging(verbose=invocation.verbose)
    console.install()  # before verl is imported: its import warns
    try:
        if invocation.help:
            print(usage(invocation.recipe_dirs))
            return 0
        if invocation.print_config:
            cfg, _ = load_config(argv, allow_missing=True)
            print(OmegaConf.to_yaml(cfg, resolve=invocation.resolve))
            return 0
        summary = run(argv, console)
    except (RecipeError, SetupError) as exc:
        print(f"verl_asyncweb: {exc}", file=sys.stderr)
        return 2
    except RunStalled as exc:
        print(f"verl_asyncweb: stopped: {exc}", file=sys.stderr)
        return 1
    except BaseException:
        if console.log_dir is not None:
            print(f"verl_asyncweb: the run stopped; its logs are in {console.log_dir}", file=sys.stderr)
        raise
    finally:
        console.close()
    run_root = Path(summary["run_dir"])
    steps = RunFolder(run_root).read_metrics()
    print(format_summary(summary, steps, run_root, shell_command(["python -m verl_asyncweb.main", *resume_argv(argv)])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
