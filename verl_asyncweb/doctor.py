"""``python -m verl_asyncweb.doctor``: is everything this plugin registers present, and can a run start here?

verl imports plugins inside ``import verl`` and only logs a failure at debug level, so a broken install
silently loses the loss, the agent loop or the CPU backend. This check looks them up in verl's registries in
this process and in a Ray worker, and checks the browser, fonts, the verl workarounds, the model cache and every
recipe in the user's recipe folders.
``verl_asyncweb.main`` runs the registration part before it starts any worker.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

logger = logging.getLogger(__name__)

GPU_STACK_FIX = 'pip install ".[gpu]" in the checkout (or its wheel: docs/install.md)'
FIX_PLUGIN = (
    "reinstall with `pip install -e .` in the checkout (or its wheel: docs/install.md) and make sure "
    "VERL_USE_EXTERNAL_PLUGINS is unset or includes `asyncweb`; `python -c 'import verl_asyncweb.plugin'` shows the "
    "import error"
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""
    fix: str = ""


def registration_checks(cpu: bool | None = None) -> list[Check]:
    """Look up every registration of DESIGN section 1 in verl's registries of the current process."""
    import verl  # noqa: F401  (loads the plugins)
    from verl.plugin.platform.platform_manager import PlatformRegistry

    cpu = cpu if cpu is not None else os.environ.get("VERL_PLATFORM", "").lower() == "cpu"
    found = {"platform cpu": PlatformRegistry.get("cpu") is not None}
    # Without our platform, verl modules that resolve the platform at import would raise on VERL_PLATFORM=cpu;
    # look the rest up under verl's default detection so that the report still names every missing piece.
    requested = os.environ.pop("VERL_PLATFORM", None) if not found["platform cpu"] else None
    try:
        found.update(_registry_lookups(cpu and found["platform cpu"]))
    finally:
        if requested is not None:
            os.environ["VERL_PLATFORM"] = requested
    return [Check(name, ok, "" if ok else "not registered", "" if ok else FIX_PLUGIN) for name, ok in found.items()]


def _registry_lookups(cpu_engines: bool) -> dict[str, bool]:
    from verl.checkpoint_engine.base import CheckpointEngineRegistry
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    found = {
        "policy loss decoupled_ppo": "decoupled_ppo" in core_algos.POLICY_LOSS_REGISTRY,
        "advantage estimator multistep_grpo": "multistep_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY,
        "advantage estimator multistep_reinforce": "multistep_reinforce" in core_algos.ADV_ESTIMATOR_REGISTRY,
        "advantage estimator raftpp": "raftpp" in core_algos.ADV_ESTIMATOR_REGISTRY,
        "agent loop web_agent": "web_agent" in _agent_loop_registry,
        "trainer asyncweb": "asyncweb" in TRAINER_REGISTRY,
        "rollout replica hf": "hf" in RolloutReplicaRegistry._registry,
        "checkpoint engine ray_object_store": "ray_object_store" in CheckpointEngineRegistry._registry,
    }
    if cpu_engines:
        from verl.workers.engine import EngineRegistry

        engines = EngineRegistry._engines.get("language_model", {}).get("fsdp2", {})
        found["FSDP2 engine for device cpu"] = "cpu" in engines
    return found


def _registration_checks_in_worker(cpu: bool) -> list[Check]:
    return registration_checks(cpu)


def start_worker_registration_checks(cpu: bool):
    """Start the same lookups inside a Ray worker process (Ray must be initialised); returns their object ref."""
    import ray

    # max_calls=1: the worker exits afterwards instead of idling for the job's lifetime with torch and verl loaded.
    remote = ray.remote(num_cpus=0, max_calls=1)(_registration_checks_in_worker)
    return remote.remote(cpu)


def collect_worker_registration_checks(ref, timeout_s: float = 120.0) -> list[Check]:
    """The checks :func:`start_worker_registration_checks` started, once the worker has run them."""
    import ray

    checks = ray.get(ref, timeout=timeout_s)
    return [Check(f"{c.name} (in a Ray worker)", c.ok, c.detail, c.fix) for c in checks]


def worker_registration_checks(cpu: bool, timeout_s: float = 120.0) -> list[Check]:
    """The same lookups inside a Ray worker process (Ray must be initialised)."""
    return collect_worker_registration_checks(start_worker_registration_checks(cpu), timeout_s)


def environment_checks() -> list[Check]:
    """Browser, fonts, model cache and the verl workarounds of the CPU backend."""
    return [*browser_checks(), _model_cache_check(), *_workaround_checks()]


def browser_checks() -> list[Check]:
    """Chromium, the fonts its pages are rendered with, and Playwright."""
    checks = []
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    checks.append(
        Check(
            "chromium browser",
            chromium is not None,
            chromium or "not on PATH",
            "apt-get install -y chromium (playwright install cannot download here)",
        )
    )
    fonts = _installed_fonts()
    for family in ("Liberation Sans", "DejaVu Sans", "WenQuanYi Zen Hei"):
        present = any(family.lower() in f for f in fonts)
        package = {"Liberation Sans": "fonts-liberation", "DejaVu Sans": "fonts-dejavu-core"}.get(
            family, "fonts-wqy-zenhei"
        )
        checks.append(Check(f"font {family}", present, "", f"apt-get install -y {package}"))
    checks.append(_playwright_check())
    return checks


GPU_STACK = {"torch": "2.11.0", "vllm": "0.24.0", "transformers": "5.9.0"}
"""What verl[vllm]==0.9.1 pins; another version may work but is not what the GPU recipes were composed against."""


def gpu_checks() -> list[Check]:
    """What a GPU machine needs for the GPU recipes: CUDA devices, vLLM, flash-attn, cupy (NCCL weight sync)."""
    import importlib.metadata

    import torch

    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    checks = [
        Check(
            "CUDA devices",
            devices > 0,
            f"{devices} visible" if devices else f"torch {torch.__version__} sees no CUDA device",
            "run on a GPU node with an NVIDIA driver and a CUDA build of torch",
        )
    ]
    fix = GPU_STACK_FIX
    for package in ("vllm", "flash-attn", "cupy-cuda13x", "torch", "transformers"):
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            checks.append(Check(f"{package} (GPU stack)", False, "not installed", fix))
            continue
        wanted = GPU_STACK.get(package)
        ok = wanted is None or version == wanted
        detail = version if ok else f"{version}, verl[vllm]==0.9.1 pins {wanted}"
        checks.append(Check(f"{package} (GPU stack)", ok, detail, fix))
    return checks + compute_mode_checks()


def compute_mode_checks() -> list[Check]:
    """The GPUs' compute mode, from ``nvidia-smi`` (none where it is not installed). A GPU in ``Exclusive_Process``
    mode takes one CUDA context, and a rollout GPU holds several: verl's rollout worker (its weight bucket) and
    vLLM's engine, and on the one-GPU recipe the trainer too."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = ["nvidia-smi", "--query-gpu=index,compute_mode", "--format=csv,noheader"]
    result = subprocess.run(query, capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        return [Check("GPU compute mode", False, f"nvidia-smi failed: {result.stderr.strip()[:200]}")]
    modes = dict(line.split(",", 1) for line in result.stdout.strip().splitlines() if "," in line)
    exclusive = sorted(index.strip() for index, mode in modes.items() if "exclusive" in mode.lower())
    return [
        Check(
            "GPU compute mode allows several processes",
            not exclusive,
            f"GPU {', '.join(exclusive)} in exclusive-process mode (one CUDA context each), but verl's rollout worker "
            "and vLLM share a rollout GPU, and on one GPU the trainer too"
            if exclusive
            else f"{len(modes)} GPU(s), none exclusive",
            "nvidia-smi -i INDEX -c DEFAULT as root, or ask the cluster's admins for shared compute mode",
        )
    ]


def _installed_fonts() -> list[str]:
    if shutil.which("fc-list") is None:
        return []
    result = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True, timeout=30, check=False)
    return [line.lower() for line in result.stdout.splitlines()]


def _playwright_check() -> Check:
    try:
        import playwright  # noqa: F401

        return Check("playwright (python)", True)
    except ImportError as exc:
        return Check("playwright (python)", False, str(exc), "pip install playwright==1.65.2")


def _model_cache_check() -> Check:
    from verl_asyncweb.backends.tiny_model import default_model_dir

    path = default_model_dir("tiny")
    built = (path / ".complete").exists()
    return Check(
        "tiny model cache",
        True,
        str(path) if built else f"not built yet (built on first CPU run at {path})",
        "" if built else "python -m verl_asyncweb.backends.tiny_model",
    )


def _workaround_checks() -> list[Check]:
    from verl_asyncweb.backends.verl_compat import WORKAROUNDS

    checks = []
    for workaround in WORKAROUNDS:
        if not workaround.available():
            continue  # its target's package (vLLM) is not installed here: nothing to work around
        try:
            needed = workaround.still_needed()
            detail = "" if needed else "verl changed: the line this workaround targets is gone"
        except (AttributeError, ImportError, OSError, TypeError) as exc:
            needed, detail = False, f"cannot inspect {workaround.module}.{workaround.attribute}: {exc}"
        checks.append(
            Check(
                f"verl workaround {workaround.name}",
                needed,
                detail,
                "" if needed else "update verl_asyncweb/backends/verl_compat.py for this verl version",
            )
        )
    return checks


def recipe_checks(recipe_dirs: list[str]) -> list[Check]:
    """Every recipe of the user's folders (``--recipe-dir``, ``$VERL_ASYNCWEB_RECIPE_PATH``) composes and passes
    ``main``'s start-up checks, with the values it leaves to the command line (``???``) still open."""
    from verl_asyncweb.main import SetupError, load_config
    from verl_asyncweb.recipes_registry import RecipeError, recipe_files, recipe_names, recipes_dir, user_recipe_dirs

    try:
        folders = user_recipe_dirs(recipe_dirs)
        files = recipe_files(folders)
    except RecipeError as exc:
        return [Check("user recipes", False, str(exc), "fix the folder or rename the recipe")]
    packaged = recipes_dir().resolve()
    flags = [arg for folder in folders for arg in ("--recipe-dir", str(folder))]
    checks = []
    for name in recipe_names(files):
        if files[name].parent.resolve() == packaged:
            continue
        try:
            load_config([f"recipe={name}", *flags], allow_missing=True)
            checks.append(Check(f"recipe {name}", True, str(files[name])))
        except (SetupError, RecipeError, ValueError) as exc:
            checks.append(Check(f"recipe {name}", False, f"{files[name]}: {exc}", "run main with --cfg job to see it"))
    return checks


def format_report(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        line = f"[{mark}] {check.name}"
        if check.detail:
            line += f": {check.detail}"
        if not check.ok and check.fix:
            line += f"\n       fix: {check.fix}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.doctor", description="Check the verl_asyncweb installation."
    )
    parser.add_argument("--no-ray", action="store_true", help="skip the check inside a Ray worker")
    parser.add_argument("--platform", default="cpu", choices=["cpu", "auto"], help="platform the run will use")
    parser.add_argument(
        "--recipe-dir",
        action="append",
        default=[],
        help="a folder of your recipes to check (repeatable; $VERL_ASYNCWEB_RECIPE_PATH is checked too)",
    )
    args = parser.parse_args(argv)
    cpu = args.platform == "cpu"
    if cpu:
        os.environ.setdefault("VERL_PLATFORM", "cpu")
    in_worker = None
    if not args.no_ray:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": _worker_env()}, log_to_driver=False)
        # The worker imports verl while this process does the same for the checks below.
        in_worker = start_worker_registration_checks(cpu)
    try:
        checks = registration_checks(cpu) + environment_checks() + ([] if cpu else gpu_checks())
        checks += recipe_checks(args.recipe_dir)
        if in_worker is not None:
            checks += collect_worker_registration_checks(in_worker)
    finally:
        if in_worker is not None:
            ray.shutdown()
    print(format_report(checks))
    failed = [c for c in checks if not c.ok]
    print(f"\n{len(checks) - len(failed)} ok, {len(failed)} failed")
    return 1 if failed else 0


def _worker_env() -> dict[str, str]:
    keys = ("VERL_PLATFORM", "VERL_USE_EXTERNAL_PLUGINS")
    return {key: os.environ[key] for key in keys if key in os.environ}


if __name__ == "__main__":
    sys.exit(main())
