"""``python -m verl_asyncweb.viewer RUN_DIR [--out DIR] [--max-episodes N]``; the package's only printing place."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from verl_asyncweb.console import refuse
from verl_asyncweb.viewer.page import write_viewer


def main(argv: Sequence[str] | None = None) -> int:
    """Write the viewer page and print where it is."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.viewer", description="Write a static HTML trajectory viewer for one run."
    )
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, help="output folder (default: RUN_DIR/viewer)")
    parser.add_argument("--max-episodes", type=int, default=2000, help="embed the newest N episodes (default 2000)")
    args = parser.parse_args(argv)
    try:
        report = write_viewer(args.run_dir, args.out, args.max_episodes)
    except ValueError as err:
        return refuse(parser.prog, str(err))
    for warning in report.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if not report.episodes:
        return refuse(parser.prog, f"{args.run_dir} holds no finished episode yet (a run that has not finished one)")
    sys.stdout.write(f"wrote {report.index} ({report.episodes} episodes, {len(report.warnings)} warnings)\n")
    sys.stdout.write(f"open file://{report.index.resolve()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
