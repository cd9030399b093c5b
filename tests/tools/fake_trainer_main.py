"""Stand-in for ``python -m verl_asyncweb.main`` in sweep tests: parses ``key=value`` overrides, writes a run folder.

``fake.fail=1`` exits with status 3 before writing a summary; every launch appends its argv to
``<sweep>/launches.jsonl`` so tests can count launches.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runfolder_fixtures import build_run  # noqa: E402


def main(argv: list[str]) -> int:
    overrides = dict(arg.split("=", 1) for arg in argv)
    run_dir = Path(overrides["trainer.default_local_dir"])
    with (run_dir.parent / "launches.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\n")
    step_norm = overrides.get("asyncweb.algo.step_norm", "traj")
    failing = overrides.get("fake.fail") == "1"
    build_run(
        run_dir,
        seed=1 + len(step_norm) % 3,
        steps=4,
        recipe=overrides.get("recipe"),
        step_norm=step_norm,
        estimator=overrides.get("asyncweb.algo.estimator", "grpo"),
        episodes=False,
        finished=not failing,
    )
    print(f"fake trainer wrote {run_dir}")
    return 3 if failing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
