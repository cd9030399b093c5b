"""Command line of ``python -m verl_asyncweb.compare``; the only place in this package that prints."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from verl_asyncweb.compare.report import ComparisonReport, write_comparison
from verl_asyncweb.compare.runs import load_run, load_runs
from verl_asyncweb.compare.sweep import DEFAULT_COMMAND, default_sweep_dir, parse_axes, run_sweep
from verl_asyncweb.console import refuse

logger = logging.getLogger(__name__)

USAGE_EXAMPLES = """examples:
  python -m verl_asyncweb.compare runs/a runs/b --out comparison/
  python -m verl_asyncweb.compare --sweep recipe=cpu_smoke asyncweb.algo.step_norm=traj,const --sweep-dir sweeps/norm
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and docs)."""
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.compare",
        description="Compare training runs (table + plots), or launch a sweep of variants and compare them.",
        epilog=USAGE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dirs", nargs="*", metavar="RUN_DIR", help="run folders to compare")
    parser.add_argument("--out", type=Path, help="output folder (default: ./comparison, or SWEEP_DIR/comparison)")
    parser.add_argument("--sweep", nargs="+", metavar="KEY=V1[,V2]", help="overrides; comma lists are swept")
    parser.add_argument("--sweep-dir", type=Path, help="sweep folder (default: sweeps/<recipe>-<hash of the spec>)")
    parser.add_argument(
        "--sweep-command",
        default=shlex.join(DEFAULT_COMMAND),
        help="command each variant runs, before the overrides (default: %(default)s)",
    )
    parser.add_argument("--sweep-timeout-s", type=float, help="kill a variant after this many seconds")
    return parser


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _summary_line(report: ComparisonReport) -> str:
    return f"wrote {report.markdown}, {report.csv} and {len(report.plots)} plots under {report.out_dir / 'plots'}" + (
        f" ({len(report.warnings)} warnings, see above)" if report.warnings else ""
    )


def _sweep(args: argparse.Namespace) -> int:
    axes = parse_axes(args.sweep)
    sweep_dir = args.sweep_dir or default_sweep_dir(axes)
    command = shlex.split(args.sweep_command)
    if not command:
        raise ValueError("--sweep-command must not be empty, got ''")
    outcomes = run_sweep(axes, sweep_dir, command, args.sweep_timeout_s)
    for outcome in outcomes:
        _emit(f"{outcome.status:>8}  {outcome.name}  ({outcome.seconds:.0f} s, log {outcome.log_path})")
    present = [Path(o.run_dir) for o in outcomes if Path(o.run_dir).is_dir()]
    if present:
        runs = [load_run(path, path.name) for path in present]
        report = write_comparison(runs, args.out or sweep_dir / "comparison")
        _emit(report.terminal)
        _emit(_summary_line(report))
    failed = [o.name for o in outcomes if o.status in ("failed", "timeout")]
    if failed:
        _emit(f"{len(failed)} variant(s) did not finish: {', '.join(failed)}; re-run the same command to resume")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI.

    Returns:
        0 on success, 1 if a sweep variant failed, 2 on a usage error.
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.sweep:
            if args.run_dirs:
                parser.error(f"give run folders or --sweep, not both; got run folders {args.run_dirs}")
            return _sweep(args)
        if not args.run_dirs:
            parser.error("give at least one RUN_DIR, or --sweep KEY=V1,V2 ...")
        runs = load_runs(args.run_dirs)
        if not any(run.metrics for run in runs):
            return refuse(parser.prog, f"nothing to compare: none of {args.run_dirs} has logged a step yet")
        report = write_comparison(runs, args.out or Path("comparison"))
    except ValueError as err:
        return refuse(parser.prog, str(err))
    _emit(report.terminal)
    _emit(_summary_line(report))
    if len(runs) == 1:
        _emit("one run: the report holds its own figures, with nothing to compare them to (give two or more RUN_DIRs)")
    return 0
