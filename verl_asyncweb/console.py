"""What a person sees while ``main`` runs: a progress bar, one short line per step and a closing summary.

Everything else a run prints goes to the run folder's ``logs/`` instead of the console: library warnings and the
driver's library logs (verl, Ray, Python warnings) to ``logs/driver.log``, Ray workers' output (verl's full
metrics lines, its config dump, engine warnings) to ``logs/ray-SESSION/`` (a link to Ray's session logs while the
job runs, copied there when it ends). ``-v`` puts all of it back on the console, as verl prints it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shlex
import shutil
import sys
import threading
import time
from logging.handlers import MemoryHandler
from pathlib import Path

from verl_asyncweb.compare import metric_names as names
from verl_asyncweb.run_folder import is_finite_number

logger = logging.getLogger(__name__)

LOG_DIR = "logs"
DRIVER_LOG = "driver.log"
NATIVE_STDERR_LOG = "driver-native-stderr.log"
"""What native code (Ray's C++ core worker) writes to the driver's stderr while verl's task runner runs in it."""
PACKAGE_LOGGER = "verl_asyncweb"
LIBRARY_LOGGERS = ("verl", "ray")
"""Loggers that install their own console handlers; quiet mode points them at the run folder's log."""
POLL_S = 1.0

# (label, metric, format) of the per-step line, in the order printed; a metric a step lacks is left out.
STEP_FIELDS = (
    ("success", names.SUCCESS_RATE, "{:.2f}"),
    ("reward", "critic/score/mean", "{:.2f}"),
    ("traj/h", names.TRAJS_PER_HOUR, "{:.0f}"),
    ("lag", names.POLICY_LAG_MEAN, "{:.1f}"),
    ("pg_loss", "actor/pg_loss", "{:.3g}"),
    ("grad_norm", "actor/grad_norm", "{:.3g}"),
    ("step", "timing_s/step", "{:.1f} s"),
)
DIFFICULTIES = (
    ("easy", names.SUCCESS_RATE_EASY),
    ("medium", names.SUCCESS_RATE_MEDIUM),
    ("hard", names.SUCCESS_RATE_HARD),
)


class _TqdmHandler(logging.StreamHandler):
    """Writes above a progress bar without breaking it."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


class ConsoleLogging:
    """Routes a run's logs: ours to the console, the libraries' to the run folder (``verbose``: all to the console).

    Call :meth:`install` before importing verl (its import warns), :meth:`quiet_libraries` after importing
    libraries that set up their own handlers, and :meth:`attach` once the run folder exists: what was logged
    before it is buffered and written then.
    """

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self.buffer: MemoryHandler | None = None
        self.log_dir: Path | None = None
        self._console: logging.Handler | None = None
        self.stream = sys.stderr
        """Where the console's lines and progress bars go: the terminal, even while file descriptor 2 is sent to
        the log (:meth:`output_to_log`)."""
        self._replaced: dict[str, tuple[list[logging.Handler], bool]] = {}
        self._root_level = logging.WARNING

    def install(self) -> None:
        if self.verbose:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
            return
        self.buffer = MemoryHandler(capacity=1 << 20, flushLevel=logging.CRITICAL + 1)
        root = logging.getLogger()
        self._root_level = root.level
        root.addHandler(self.buffer)
        root.setLevel(logging.INFO)
        self.stream = _terminal_stream()
        self._console = _TqdmHandler(self.stream)
        self._console.setFormatter(logging.Formatter("%(message)s"))
        package = logging.getLogger(PACKAGE_LOGGER)
        package.addHandler(self._console)
        package.setLevel(logging.INFO)
        logging.captureWarnings(True)
        self.quiet_libraries()

    def quiet_libraries(self) -> None:
        """Point the libraries' loggers at the log file (again: importing or starting them resets their handlers)."""
        if self.buffer is None:
            return
        for name in LIBRARY_LOGGERS:
            library = logging.getLogger(name)
            self._replaced.setdefault(name, (library.handlers, library.propagate))
            library.handlers = [self.buffer]
            library.propagate = False

    def close(self) -> None:
        """Flush the log file and undo :meth:`install` (for callers of ``main`` in a longer-lived process)."""
        if self.buffer is None:
            return
        self.buffer.close()
        if self.buffer.target is not None:
            self.buffer.target.close()
        root = logging.getLogger()
        root.removeHandler(self.buffer)
        root.setLevel(self._root_level)
        logging.getLogger(PACKAGE_LOGGER).removeHandler(self._console)
        for name, (handlers, propagate) in self._replaced.items():
            logging.getLogger(name).handlers, logging.getLogger(name).propagate = handlers, propagate
        logging.captureWarnings(False)
        self.buffer = None
        if self.stream is not sys.stderr:
            self.stream.close()
            self.stream = sys.stderr

    def attach(self, run_root: Path) -> Path:
        """Write the logs to ``run_root/logs/driver.log`` from now on (with what was buffered); returns the folder."""
        self.log_dir = run_root / LOG_DIR
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.buffer is not None:
            file_handler = logging.FileHandler(self.log_dir / DRIVER_LOG)
            file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            self.buffer.setTarget(file_handler)
            self.buffer.flushLevel = logging.NOTSET
            self.buffer.flush()
        return self.log_dir

    @contextlib.contextmanager
    def output_to_log(self, name: str):
        """Send what runs inside prints, and what handlers it binds to ``sys.stdout``/``sys.stderr`` write, to the
        log file as records of logger ``name`` (a logger outside ``verl``, whose handler may be such a stream)."""
        if self.verbose:
            yield
            return
        writer = LogWriter(logging.getLogger(name))
        try:
            with contextlib.redirect_stdout(writer), contextlib.redirect_stderr(writer), self._native_stderr_to_log():
                yield
        finally:
            writer.flush()

    @contextlib.contextmanager
    def _native_stderr_to_log(self):
        """File descriptor 2 to ``logs/driver-native-stderr.log``: what Ray's C++ core worker prints about the
        actors this process creates (a Ray actor's own stderr goes to Ray's log files). The console keeps
        :attr:`stream`, a copy of the terminal's descriptor."""
        if self.log_dir is None or self.stream is sys.stderr:
            yield
            return
        sys.stderr.flush()
        saved = os.dup(2)
        log_fd = os.open(self.log_dir / NATIVE_STDERR_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.dup2(log_fd, 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(log_fd)

    @contextlib.contextmanager
    def stderr_to_log(self, name: str):
        """Send what a library writes to ``sys.stderr`` (outside logging) to the log file (``ray.init``: notices)."""
        if self.verbose:
            yield
            return
        captured = io.StringIO()
        try:
            with contextlib.redirect_stderr(captured):
                yield
        finally:
            self.quiet_libraries()  # ray.init(configure_logging=False) empties the "ray" logger's handlers
            for line in captured.getvalue().splitlines():
                if line.strip():
                    logging.getLogger(name).warning(line)

    def ray_init_kwargs(self) -> dict:
        """``ray.init`` settings: workers' output stays in their log files unless verbose."""
        if self.verbose:
            return {}
        return {"log_to_driver": False, "configure_logging": False}

    def link_ray_logs(self) -> Path | None:
        """``logs/ray-SESSION`` → Ray's log folder of this job (workers' output, readable while it runs)."""
        source = _ray_logs_dir()
        if self.log_dir is None or source is None:
            return None
        link = self.log_dir / f"ray-{source.parent.name}"
        if not link.exists():
            link.symlink_to(source, target_is_directory=True)
        return link

    def keep_ray_logs(self) -> None:
        """Replace the link with a copy of the workers' logs, so that they outlive Ray's temporary folder."""
        if self.log_dir is None:
            return
        for link in self.log_dir.glob("ray-*"):
            if not link.is_symlink():
                continue
            source = link.resolve()
            link.unlink()
            try:
                shutil.copytree(source, link, ignore=_not_worker_output)
            except OSError as exc:
                logger.warning("could not copy Ray's worker logs from %s: %s", source, exc)


def _ray_logs_dir() -> Path | None:
    import ray._private.worker as ray_worker

    node = ray_worker._global_node
    return Path(node.get_logs_dir_path()) if node is not None else None


def _not_worker_output(folder: str, entries: list[str]) -> list[str]:
    return [name for name in entries if not (name.startswith("worker-") and name.endswith((".out", ".err")))]


def format_step(step: int, total: int | None, data: dict) -> str:
    """``step 3/4 | success 0.50 | reward 0.50 | traj/h 112 | …``: the few figures a person follows."""
    parts = [f"step {step}/{total}" if total else f"step {step}"]
    for label, metric, fmt in STEP_FIELDS:
        value = data.get(metric)
        if is_finite_number(value):
            parts.append(f"{label} {fmt.format(value)}")
    return " | ".join(parts)


def _terminal_stream():
    """A stream on a copy of the process's stderr descriptor (``sys.stderr`` itself where it has none, as under a
    test's capture)."""
    try:
        descriptor = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stderr
    return os.fdopen(os.dup(descriptor), "w", buffering=1, encoding="utf-8", errors="replace")


class LogWriter:
    """A file-like sink for libraries that ``print``: each line becomes a log record."""

    def __init__(self, target: logging.Logger):
        self.target = target
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if line.strip():
                self.target.info(line)
        return len(text)

    def flush(self) -> None:
        """A line still without its newline (``pprint`` writes a line in pieces) is logged as it is."""
        if self._partial.strip():
            self.target.info(self._partial)
        self._partial = ""


class StepReporter:
    """Follows a metrics file (verl's file logger, one JSON line per step) and reports each new step.

    A thread reads the file every ``POLL_S`` seconds, so the driver, which waits on verl's trainer, shows the
    steps as they land; a progress bar appears on a terminal only. ``label`` prefixes the lines (a sweep's
    variant, a benchmark's arm). Also a context manager (start / stop).
    """

    def __init__(self, metrics_path: Path, total_steps: int | None, first_step: int = 0, label: str = "", stream=None):
        self.metrics_path = metrics_path
        self.stream = stream
        self.total_steps = total_steps
        self.label = label
        self._offset = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        self._first_step = first_step
        self.first_step_at: float | None = None
        """``time.time()`` when the first step of this run was reported (to within ``POLL_S``)."""

    def start(self) -> StepReporter:
        from tqdm import tqdm

        self._bar = tqdm(
            total=self.total_steps,
            initial=self._first_step,
            desc=self.label or "training",
            unit="step",
            file=self.stream,
            disable=None,
            leave=False,
        )
        self._thread = threading.Thread(target=self._follow, name="step-reporter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.poll()
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> StepReporter:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _follow(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()

    def poll(self) -> None:
        """Report the steps written since the last poll (a partly written last line waits for the next one)."""
        try:
            with self.metrics_path.open("rb") as metrics:
                metrics.seek(self._offset)
                chunk = metrics.read()
        except FileNotFoundError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            try:
                record = json.loads(line)
                step, data = int(record["step"]), record["data"]
            except (ValueError, KeyError, TypeError):
                continue
            if self.first_step_at is None:
                self.first_step_at = time.time()
            line = format_step(step, self.total_steps, data)
            logger.info(f"{self.label}: {line}" if self.label else line)
            if self._bar is not None:
                self._bar.update(max(0, step - self._bar.n))


def _first_and_last(steps: dict[int, dict], metric: str) -> tuple[tuple[int, float], tuple[int, float]] | None:
    found = [(step, data[metric]) for step, data in sorted(steps.items()) if is_finite_number(data.get(metric))]
    return (found[0], found[-1]) if found else None


def shell_command(words: list[str], width: int = 100) -> str:
    """``words`` as a shell command a person can paste: each quoted where the shell needs it, lines continued with
    ``\\`` near ``width``, and remote browser tokens hidden (``ws://host:port/***``; the run's config.yaml has them).
    """
    from verl_asyncweb.env.remote import redacted

    lines = [words[0]]
    for word in words[1:]:
        word = shlex.quote(re.sub(r"wss?://[^\s\"',\]]+", lambda m: redacted(m.group(0)), word))
        if len(lines[-1]) + 1 + len(word) > width:
            lines[-1] += " \\"
            lines.append("      " + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


def resume_argv(argv: list[str]) -> list[str]:
    """The job's overrides as a resume command needs them: a ``trainer.resume_mode`` other than verl's ``auto`` (a
    run started with ``resume_mode=disable`` would start over) becomes ``auto``, which resumes from the latest
    checkpoint in the run folder; a key given more than once keeps only its last value (the one Hydra applied)."""
    words = [
        "trainer.resume_mode=auto" if word.lstrip("+~").startswith("trainer.resume_mode=") else word for word in argv
    ]
    last = {word.split("=", 1)[0].lstrip("+~"): i for i, word in enumerate(words)}
    return [word for i, word in enumerate(words) if last[word.split("=", 1)[0].lstrip("+~")] == i]


def format_summary(summary: dict, steps: dict[int, dict], run_root: Path, command: str) -> str:
    """The closing lines: what was learned (first vs last step), throughput, where the run lives, what to run next."""
    lines = [f"finished {summary['last_step']} steps in {summary['wall_s']:.0f} s (recipe {summary.get('recipe')})"]
    for label, metric in (("success", names.SUCCESS_RATE), *DIFFICULTIES):
        span = _first_and_last(steps, metric)
        if span is None:
            continue
        (first_step, first), (last_step, last) = span
        name = f"  {label:<14}" if label == "success" else f"    {label:<12}"
        lines.append(f"{name}{first:.2f} (step {first_step}) -> {last:.2f} (step {last_step})")
    if not _first_and_last(steps, names.SUCCESS_RATE):
        lines.append("  success       no trajectory finished")
    elif all(data.get(names.SUCCESS_RATE, 0) == 0 for data in steps.values()):
        # What a newcomer sees on the random tiny model (cpu_smoke): pg_loss 0 and a tiny grad_norm look broken.
        lines += [
            "  no episode succeeded, so every group's advantages are 0: pg_loss is 0 and only an entropy",
            "  bonus (if any) moves the weights; expected of a model that has not learned the tasks (the tiny one)",
        ]
    rate = _first_and_last(steps, names.TRAJS_PER_HOUR)
    if rate is not None:
        lines.append(f"  traj/h        {rate[1][1]:.0f}")
    lines += [
        f"  run folder    {run_root}",
        f"  logs          {run_root / LOG_DIR}",
        "next:",
        f"  python -m verl_asyncweb.viewer {run_root}        # episodes with their screenshots",
        f"  python -m verl_asyncweb.compare {run_root} OTHER_RUN --out comparison/",
        f"  python -m verl_asyncweb.evaluate {run_root}      # held-out success of the latest checkpoint",
        "  # resume (raise trainer.total_training_steps to train on):",
        f"  {command}",
    ]
    return "\n".join(lines)


def refuse(prog: str, message: str) -> int:
    """One line on stderr for input a command cannot use (a missing path, a folder with nothing in it); exit code 2."""
    sys.stderr.write(f"{prog}: {message}\n")
    return 2
