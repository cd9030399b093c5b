"""``python -m verl_asyncweb.bench choices RUN_DIR ...``: does the agent pick the options its instruction names?

MiniWoB++'s "Select ... and click Submit" tasks (:data:`SELECT_TASKS`; click-option: one radio button;
click-checkboxes: any number of boxes) are solved by matching strings of the instruction to element labels. From
runs' recorded training episodes (``episodes/episodes.jsonl``), per task and window of training steps:

* **option clicks**: clicks on a radio button or checkbox (or its label) by element index, and how many were on an
  option the instruction names, next to the rate that choosing uniformly among the page's options would give;
* **intentions**: the labels the agent's ``Intention: click "..."`` lines name (other than Submit), and how many of
  them are a label on the page or a string of the instruction.

A rate at chance that does not rise over training says the policy learned where to click, not which option. A row
per task over all runs gives (named - chance) with its 95% interval.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from verl_asyncweb.run_folder import RunFolder

SELECT_TASKS = ("click-option", "click-checkboxes", "click-checkboxes-large", "click-checkboxes-transfer")
"""Tasks whose "Select A, B and click Submit" names the options themselves (click-checkboxes-soft names words
similar to them, choose-list a list to pick from)."""
SELECT_INSTRUCTION = re.compile(r"^Select (?P<targets>.*) and click Submit\.?$")
ELEMENT_LINE = re.compile(r'^\[(?P<index>\d+)\] (?P<role>\S+)[^"\n]*"(?P<label>[^"]*)"', re.MULTILINE)
OPTION_INPUTS = ("input[radio]", "input[checkbox]")
INTENDED_CLICK = re.compile(r'^click "(?P<label>[^"]*)"$')


@dataclass
class ChoiceCounts:
    """Option clicks and intended labels: of one episode, or summed over a window of training steps or a task."""

    option_clicks: int = 0
    named_clicks: int = 0
    chance_sum: float = 0.0
    intentions: int = 0
    intentions_on_page: int = 0
    intentions_in_instruction: int = 0

    def row(self) -> dict:
        def rate(part: float, whole: int) -> float | None:
            return round(part / whole, 3) if whole else None

        return {
            "option_clicks": self.option_clicks,
            "named_rate": rate(self.named_clicks, self.option_clicks),
            "chance_rate": rate(self.chance_sum, self.option_clicks),
            "intentions": self.intentions,
            "on_page_rate": rate(self.intentions_on_page, self.intentions),
            "in_instruction_rate": rate(self.intentions_in_instruction, self.intentions),
        }

    def add(self, other: ChoiceCounts) -> None:
        """Add ``other``'s counts to these."""
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    @property
    def excess(self) -> float | None:
        """Mean over the option clicks of (on a named option) - (chance); None without option clicks."""
        return (self.named_clicks - self.chance_sum) / self.option_clicks if self.option_clicks else None


def named_options(instruction: str) -> set[str] | None:
    """The options a "Select A, B and click Submit" instruction names (empty for "nothing"); None for others."""
    match = SELECT_INSTRUCTION.match(instruction.strip())
    if match is None:
        return None
    targets = match["targets"].strip()
    return set() if targets == "nothing" else {target.strip() for target in targets.split(",") if target.strip()}


def element_lines(elements: str) -> list[tuple[int, str, str]]:
    """(index, role, label) of each line of an element list that carries a quoted label."""
    return [(int(m["index"]), m["role"], m["label"]) for m in ELEMENT_LINE.finditer(elements or "")]


def page_options(lines: list[tuple[int, str, str]]) -> dict[int, str]:
    """Element index -> option label, for the radio buttons and checkboxes of an element list's ``lines`` and the
    labels that carry their text (clicking either picks the option; MiniWoB++'s score panel labels are not options)."""
    labels = {label for _, role, label in lines if role.startswith(OPTION_INPUTS)}
    return {
        index: label
        for index, role, label in lines
        if label in labels and (role.startswith(OPTION_INPUTS) or role == "label")
    }


def clicked_element(action_text: str | None) -> int | None:
    """The element index a parsed ``left_click`` action names, if any."""
    try:
        action = json.loads(action_text or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(action, dict) or action.get("name") != "left_click":
        return None
    element = (action.get("arguments") or {}).get("element")
    return element if isinstance(element, int) else None


def episode_counts(episode: dict) -> ChoiceCounts:
    """The counts of one "Select ... and click Submit" episode's steps (zero for other episodes)."""
    counts = ChoiceCounts()
    targets = named_options(episode.get("instruction", ""))
    if targets is None:
        return counts
    for step in episode.get("steps", []):
        lines = element_lines(step.get("elements", ""))
        options = page_options(lines)
        element = clicked_element(step.get("action_text"))
        if element in options:
            labels = set(options.values())
            counts.option_clicks += 1
            counts.named_clicks += options[element] in targets
            counts.chance_sum += len(labels & targets) / len(labels)
        intended = INTENDED_CLICK.match((step.get("intention") or "").strip())
        if intended and intended["label"] != "Submit":
            counts.intentions += 1
            counts.intentions_on_page += intended["label"] in {label for _, _, label in lines}
            counts.intentions_in_instruction += intended["label"] in targets
    return counts


def is_select_episode(episode: dict) -> bool:
    """Whether the episode is of one of :data:`SELECT_TASKS` with its "Select ... and click Submit" instruction."""
    name = task_of(episode).rsplit("/", 1)[-1]
    return name in SELECT_TASKS and named_options(episode.get("instruction", "")) is not None


def task_of(episode: dict) -> str:
    """``miniwob/click-option`` of task id ``miniwob/click-option/54`` (the instance number dropped)."""
    return episode.get("task_id", "").rsplit("/", 1)[0]


def choice_table(episodes: Iterable[dict], windows: int) -> dict[str, list[tuple[tuple[int, int], ChoiceCounts]]]:
    """Counts per task of "Select ... and click Submit" episodes and window of training steps (the run's steps cut
    into ``windows`` equal spans)."""
    episodes = [
        episode for episode in episodes if episode.get("global_step") is not None and is_select_episode(episode)
    ]
    if not episodes:
        return {}
    last = max(e["global_step"] for e in episodes)
    size = max(1, -(-last // windows))
    spans = [(start, min(start + size - 1, last)) for start in range(1, last + 1, size)]
    table = {task: [(span, ChoiceCounts()) for span in spans] for task in sorted({task_of(e) for e in episodes})}
    for episode in episodes:
        for (first, end), counts in table[task_of(episode)]:
            if first <= episode["global_step"] <= end:
                counts.add(episode_counts(episode))
    return table


def read_episodes(run_dir: Path) -> list[dict]:
    """The run's training episodes (:func:`~verl_asyncweb.bench.episodes.training_episodes`); a line cut by a
    killed run is skipped and counted on stderr."""
    from verl_asyncweb.bench.episodes import run_file, training_episodes

    folder = RunFolder(run_dir)
    run_file(folder.episodes_path)
    cut: list = []
    episodes = training_episodes(folder.read_episodes(cut))
    if cut:
        print(f"{run_dir}: {len(cut)} unreadable episode line(s) skipped", file=sys.stderr)
    return episodes


def pooled_rows(runs: list[list[dict]]) -> list[str]:
    """One Markdown row per task over all ``runs``: clicks, rates and (named - chance) with its 95% interval, a
    bootstrap over runs and their episodes (clicks of one episode are not independent draws)."""
    from verl_asyncweb.compare.confidence import mean_interval

    rows = []
    for task in sorted({task_of(e) for episodes in runs for e in episodes if is_select_episode(e)}):
        counts, samples = ChoiceCounts(), []
        for episodes in runs:
            excesses = []
            for episode in episodes:
                if task_of(episode) == task:
                    one = episode_counts(episode)
                    counts.add(one)
                    if one.option_clicks:
                        excesses.append(one.excess)
            samples.append(excesses)
        row = counts.row()
        samples = [sample for sample in samples if sample]
        if samples:  # none where no episode clicked an option (coordinate clicks, invalid actions only)
            excess = mean_interval(samples)
            difference = f"{excess.mean:+.3f} [{excess.low:+.3f}, {excess.high:+.3f}]"
        else:
            difference = "n/a"
        rows.append(
            f"| {task} | {len(runs)} | {row['option_clicks']} | {row['named_rate']} | {row['chance_rate']} | "
            f"{difference} | {row['intentions']} | "
            f"{row['on_page_rate']} | {row['in_instruction_rate']} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench choices", description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    parser.add_argument("--windows", type=int, default=4, help="spans of training steps to report per run")
    args = parser.parse_args(argv)
    runs = [read_episodes(run_dir) for run_dir in args.run_dirs]
    for run_dir, episodes in zip(args.run_dirs, runs, strict=True):
        table = choice_table(episodes, args.windows)
        if not table:
            raise SystemExit(f"{run_dir} has no episode of a 'Select ... and click Submit' task")
        print(f"\n{run_dir}\n")
        print(
            "| task | steps | option clicks | on a named option | at chance | intended labels | on the page "
            "| in the instruction |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for task, rows in table.items():
            for (first, end), counts in rows:
                row = counts.row()
                print(
                    f"| {task} | {first}-{end} | {row['option_clicks']} | {row['named_rate']} | "
                    f"{row['chance_rate']} | {row['intentions']} | {row['on_page_rate']} | "
                    f"{row['in_instruction_rate']} |"
                )
    print("\nall runs, every step\n")
    print(
        "| task | runs | option clicks | on a named option | at chance | named - chance [95% CI] | intended labels "
        "| on the page | in the instruction |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    print("\n".join(pooled_rows(runs)))
    return 0
