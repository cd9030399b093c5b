"""The console of ``main``: one short line per step read from the metrics file, the summary, and where the rest goes."""

import json
import logging
import shlex
import subprocess
import sys
import time
import warnings

import pytest

from verl_asyncweb.compare import metric_names as names
from verl_asyncweb.console import (
    ConsoleLogging,
    StepReporter,
    format_step,
    format_summary,
    resume_argv,
    shell_command,
)
from verl_asyncweb.main import SetupError, parse_argv

STEP = {
    names.SUCCESS_RATE: 0.5,
    "critic/score/mean": 0.25,
    names.TRAJS_PER_HOUR: 412.4,
    names.POLICY_LAG_MEAN: 1.0,
    "actor/pg_loss": -0.0123,
    "actor/grad_norm": 0.31,
    "timing_s/step": 41.23,
    **{f"verl/metric_{i}": float(i) for i in range(300)},  # verl logs hundreds more; the line shows none of them
}


def test_step_line_is_short_and_names_the_figures_a_person_follows():
    line = format_step(3, 4, STEP)
    assert line == (
        "step 3/4 | success 0.50 | reward 0.25 | traj/h 412 | lag 1.0 | pg_loss -0.0123 | grad_norm 0.31 | step 41.2 s"
    )
    # A step without finished trajectories has no success rate: it is left out, not shown as 0.
    assert format_step(1, None, {"timing_s/step": 3.0, names.SUCCESS_RATE: float("nan")}) == "step 1 | step 3.0 s"


def test_reporter_reports_each_complete_line_once(tmp_path, caplog):
    metrics = tmp_path / "metrics.jsonl"
    reporter = StepReporter(metrics, total_steps=3)
    reporter.poll()  # no file yet: nothing, no error
    assert reporter.first_step_at is None
    metrics.write_text(json.dumps({"step": 1, "data": STEP}) + "\n" + '{"step": 2, "da')  # step 2 half written
    with caplog.at_level(logging.INFO, logger="verl_asyncweb"):
        reporter.poll()
        with metrics.open("a") as out:
            out.write('ta": {"timing_s/step": 2.0}}\n' + "not json\n")
        reporter.poll()
        reporter.poll()
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [format_step(1, 3, STEP), "step 2/3 | step 2.0 s"]
    # bench e2e's time to the first step: set by the first reported step, kept by later ones.
    assert reporter.first_step_at is not None and reporter.first_step_at <= time.time()


def test_summary_shows_first_and_last_success_throughput_folder_and_next_commands(tmp_path):
    steps = {
        1: {names.TRAJS_PER_HOUR: 300.0},  # nothing finished yet
        2: {names.SUCCESS_RATE: 0.25, names.SUCCESS_RATE_EASY: 0.5, names.TRAJS_PER_HOUR: 350.0},
        3: {names.SUCCESS_RATE: 0.75, names.SUCCESS_RATE_EASY: 1.0, names.TRAJS_PER_HOUR: 400.0},
    }
    summary = {"last_step": 3, "wall_s": 129.4, "recipe": "cpu_smoke"}
    text = format_summary(summary, steps, tmp_path, "python -m verl_asyncweb.main recipe=cpu_smoke")
    assert "finished 3 steps in 129 s (recipe cpu_smoke)" in text
    assert "success       0.25 (step 2) -> 0.75 (step 3)" in text
    assert "easy        0.50 (step 2) -> 1.00 (step 3)" in text
    assert "medium" not in text  # no medium task ran
    assert "traj/h        400" in text
    assert f"run folder    {tmp_path}" in text
    for command in ("verl_asyncweb.viewer", "verl_asyncweb.compare", "verl_asyncweb.evaluate", "recipe=cpu_smoke"):
        assert command in text
    assert "no trajectory finished" in format_summary(summary, {1: {}}, tmp_path, "python -m verl_asyncweb.main")
    assert "advantages are 0" not in text
    unrewarded = {step: {names.SUCCESS_RATE: 0.0} for step in (1, 2, 3)}
    assert "no episode succeeded, so every group's advantages are 0: pg_loss is 0" in format_summary(
        summary, unrewarded, tmp_path, "python -m verl_asyncweb.main"
    )


def test_resume_command_pastes_into_a_shell_in_short_lines_without_browser_tokens():
    token = "ftMbZxxeur-vJ_GRUJy_54NLji3UFp7z"
    words = [
        "python -m verl_asyncweb.main",
        "recipe=cpu_smoke",
        "trainer.default_local_dir=/runs/" + "x" * 120,
        f'asyncweb.env.remote_endpoints=["ws://10.0.0.7:4000/{token}","wss://b:4000/{token}"]',
        "asyncweb.env.num_browsers=2",
    ]
    text = shell_command(words)
    assert token not in text and "ws://10.0.0.7:4000/***" in text and "wss://b:4000/***" in text
    assert all(line.endswith(" \\") for line in text.splitlines()[:-1])
    assert max(len(line) for line in text.splitlines()) <= 200
    pasted = shlex.split(text.replace("\\\n", " "))
    assert pasted[3:] == ["recipe=cpu_smoke", words[2], words[3].replace(token, "***"), words[4]]


def test_resume_command_resumes_a_run_that_was_started_with_resume_disabled():
    # Before: bench e2e's arms (trainer.resume_mode=disable) printed a resume line that started the run over.
    argv = ["recipe=cpu_smoke", "trainer.resume_mode=disable", "trainer.total_training_steps=8"]
    assert resume_argv(argv) == ["recipe=cpu_smoke", "trainer.resume_mode=auto", "trainer.total_training_steps=8"]
    assert resume_argv(["recipe=cpu_smoke", "+trainer.resume_mode=disable"])[1] == "trainer.resume_mode=auto"
    assert resume_argv(["recipe=cpu_smoke"]) == ["recipe=cpu_smoke"]  # the recipes' own mode is auto


def test_resume_command_keeps_the_last_value_of_a_repeated_key():
    # bench learning passes a trainer key, then the user's --set of it: the resume command keeps the one applied.
    repeated = ["recipe=laptop_learning", "trainer.save_freq=20", "x.y=1", "trainer.save_freq=10"]
    assert resume_argv(repeated) == ["recipe=laptop_learning", "x.y=1", "trainer.save_freq=10"]


def test_quiet_console_sends_library_logs_and_warnings_to_the_run_folder(tmp_path, capsys):
    console = ConsoleLogging(verbose=False)
    console.install()
    try:
        logging.getLogger("verl.workers").warning("engine X is not available")  # before the run folder exists
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a library's UserWarning", UserWarning, stacklevel=1)
        console.attach(tmp_path)
        logging.getLogger("ray").warning("ray chatter")
        with console.stderr_to_log("ray"):
            logging.getLogger("ray").handlers.clear()  # as ray.init(configure_logging=False) does
            print("a notice ray.init prints", file=sys.stderr)
        logging.getLogger("verl_asyncweb.main").info("run folder %s", tmp_path)
    finally:
        console.close()
    assert console.buffer is None and not logging.getLogger("verl_asyncweb").handlers
    err = capsys.readouterr().err
    assert err.strip() == f"run folder {tmp_path}"
    log = (tmp_path / "logs" / "driver.log").read_text()
    kept = ("engine X is not available", "a library's UserWarning", "ray chatter", "a notice ray.init prints")
    for text in (*kept, f"run folder {tmp_path}"):
        assert text in log


def test_verbose_flag_and_unknown_flags():
    assert parse_argv(["-v", "recipe=cpu_smoke"]).verbose
    assert not parse_argv(["recipe=cpu_smoke"]).verbose
    with pytest.raises(SetupError, match="-v"):
        parse_argv(["--quiet"])


def test_output_to_log_turns_prints_into_whole_line_records(caplog):
    console = ConsoleLogging(verbose=False)
    with caplog.at_level(logging.INFO, logger="task_runner"), console.output_to_log("task_runner"):
        print("{'a':", end="")  # pprint writes a line in pieces
        print(" 1}")
        sys.stderr.write("a handler bound to stderr\nno newline at the end")
    assert [r.getMessage() for r in caplog.records if r.name == "task_runner"] == [
        "{'a': 1}",
        "a handler bound to stderr",
        "no newline at the end",
    ]


def test_native_writes_to_stderr_go_to_the_log_while_the_console_keeps_the_terminal(tmp_path):
    # A child process stands in for the driver: its stderr is a pipe (the terminal), and os.write(2, ...) is what
    # Ray's C++ core worker does when the task runner creates an actor.
    probe = (
        "import logging, os, sys\n"
        "from pathlib import Path\n"
        "from verl_asyncweb.console import ConsoleLogging\n"
        "console = ConsoleLogging(verbose=False); console.install(); console.attach(Path(sys.argv[1]))\n"
        "with console.output_to_log('task_runner'):\n"
        "    os.write(2, b'E core_worker.cc: native noise\\n')\n"
        "    logging.getLogger('verl_asyncweb.main').info('a console line')\n"
        "os.write(2, b'after\\n')\n"
        "console.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == ["a console line", "after"]
    assert (tmp_path / "logs" / "driver-native-stderr.log").read_text() == "E core_worker.cc: native noise\n"


def test_evaluate_help_answers_without_importing_verl():
    out = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.evaluate", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.startswith("usage:")
    assert out.stderr == "", out.stderr  # verl's import warnings came before the usage text
