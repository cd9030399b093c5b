"""``python -m verl_asyncweb.plan``: predict a pipeline's throughput from a profile, or sweep one or two knobs.

    python -m verl_asyncweb.plan --profile gpu_paper
    python -m verl_asyncweb.plan --profile gpu_paper --mode sync pipeline.dynamic_sampling=false
    python -m verl_asyncweb.plan --profile gpu_paper --sweep gpu_split=48:16,32:32,24:40 \\
        --sweep pipeline.staleness=1,2,4 --plot split.png

Exit code 2 for a bad profile, key or value; the message names it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from verl_asyncweb.plan.overrides import apply_overrides, parse_assignment
from verl_asyncweb.plan.prediction import format_prediction
from verl_asyncweb.plan.profile import MODES
from verl_asyncweb.plan.profile_file import load_profile, resolve_profile_path
from verl_asyncweb.plan.simulate import simulate
from verl_asyncweb.plan.sweep import format_recommendation, format_sweep_table, parse_sweep, plot_sweep, run_sweep

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.plan",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--profile", required=True, help="a profile file, or a packaged one: gpu_paper, gpu_recorded, ..."
    )
    parser.add_argument("--mode", choices=MODES, help="override pipeline.mode")
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="knob to sweep (once or twice); gpu_split=R:T,... moves GPUs between rollout and trainer",
    )
    parser.add_argument("--plot", type=Path, help="with --sweep: write a PNG of the sweep here")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="profile fields, dotted as in the file")
    return parser


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = _parser()
    args = parser.parse_intermixed_args(argv)
    if args.plot and not args.sweep:
        parser.error("--plot needs --sweep")
    try:
        path = resolve_profile_path(args.profile)
        assignments = [parse_assignment(text) for text in args.overrides]
        if args.mode:
            assignments.append(("pipeline.mode", args.mode))
        profile = apply_overrides(load_profile(path), assignments)
        axes = [parse_sweep(text) for text in args.sweep]
        if axes:
            points = run_sweep(profile, axes)
        else:
            prediction = simulate(profile)
    except ValueError as exc:
        sys.stderr.write(f"python -m verl_asyncweb.plan: error: {exc}\n")
        return 2
    label = " ".join([profile.name, f"mode={profile.pipeline.mode}", *args.overrides])
    if not axes:
        print(format_prediction(prediction, f"{label}\n  profile file: {path}"))
        return 0
    print(f"{label}\n  profile file: {path}\n")
    print(format_sweep_table(axes, points))
    print(f"\n{format_recommendation(axes, points)}")
    if args.plot:
        plot_sweep(axes, points, args.plot, label)
        logger.info("wrote %s", args.plot)
    return 0
