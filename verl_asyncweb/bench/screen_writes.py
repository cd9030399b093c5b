"""Benchmark: the agent loop's step latency with and without writing each screenshot to the run folder.

``python -m verl_asyncweb.bench screen_writes [--episodes 32] [--steps 10] [--step-ms 50] [--write-ms 0] [--repeats 3]``

Every step of the ``web_agent`` loop keeps a copy of its screenshot in the run folder
(:func:`~verl_asyncweb.run_folder.persist_screenshots`, sharded under ``episodes/screens/``). One worker process
runs all its episodes on one event loop, so a blocking write there delays every other episode's step. This runs
``--episodes`` concurrent episodes on one event loop, each step waiting ``--step-ms`` (the model and the browser,
which yield to the loop) and then handling one new page-like 1280x720 JPEG (~115 kB) as the loop does, in three
modes side by side:

* ``none``: no run folder (a run without one, or the write's cost taken away);
* ``thread``: the loop's way, the write in a thread (``asyncio.to_thread``);
* ``inline``: the write on the event loop, for comparison.

``--write-ms`` adds that much blocking time to every write, standing in for shared storage (NFS, a parallel
filesystem), where a small file's create and write take milliseconds, not the microseconds of a local page cache.

Reported per mode: median and p95 step latency over all episodes' steps, the event loop's worst lag (a probe
scheduled every 5 ms), and the bytes written. Modes alternate within each repeat; figures are medians over repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from verl_asyncweb.bench.screenshots import make_screenshot
from verl_asyncweb.run_folder import RUN_DIR_ENV, persist_screenshots

MODES = ("none", "thread", "inline")
PROBE_S = 0.005
DISTINCT_SCREENSHOTS = 16
"""Page images drawn once and varied per step (a changed byte: a new key and a new file, as a new page is)."""


async def _probe_lag(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(PROBE_S)
        lags.append(time.perf_counter() - started - PROBE_S)


def _write(write_s: float, keys: list[str], blobs: list[bytes]) -> None:
    time.sleep(write_s)  # the storage's latency: it blocks, as a file system call does
    persist_screenshots(keys, blobs)


async def _episode(index: int, mode: str, args, pages: list[bytes], latencies: list[float]) -> None:
    from verl_asyncweb.agent.screenshots import screenshot_key

    write_s = args.write_ms / 1000
    for step in range(args.steps):
        started = time.perf_counter()
        await asyncio.sleep(args.step_ms / 1000)
        page = pages[(index + step) % len(pages)]
        blob = page[:-2] + f"{index:04d}{step:04d}".encode() + page[-2:]  # inside the JPEG, before its end marker
        keys = [screenshot_key(blob)]
        if mode == "thread":
            await asyncio.to_thread(_write, write_s, keys, [blob])
        elif mode == "inline":
            _write(write_s, keys, [blob])
        latencies.append(time.perf_counter() - started)


async def _run(mode: str, args, pages: list[bytes]) -> dict[str, float]:
    latencies: list[float] = []
    lags: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe_lag(stop, lags))
    await asyncio.gather(*(_episode(i, mode, args, pages, latencies) for i in range(args.episodes)))
    stop.set()
    await probe
    ordered = sorted(latencies)
    return {
        "step_median_ms": 1000 * statistics.median(ordered),
        "step_p95_ms": 1000 * ordered[int(0.95 * (len(ordered) - 1))],
        "loop_lag_max_ms": 1000 * max(lags, default=0.0),
    }


def run_mode(mode: str, args, pages: list[bytes]) -> dict[str, float]:
    """One mode in a fresh run folder (none for ``none``)."""
    with tempfile.TemporaryDirectory(dir=args.dir) as run_dir:
        if mode == "none":
            os.environ.pop(RUN_DIR_ENV, None)
        else:
            os.environ[RUN_DIR_ENV] = run_dir
        try:
            result = asyncio.run(_run(mode, args, pages))
        finally:
            os.environ.pop(RUN_DIR_ENV, None)
        written = sum(path.stat().st_size for path in Path(run_dir).rglob("*.jpg"))
    return {**result, "written_mib": written / 2**20}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench screen_writes", description=__doc__)
    parser.add_argument("--episodes", type=int, default=32, help="concurrent episodes on one event loop")
    parser.add_argument("--steps", type=int, default=10, help="steps per episode")
    parser.add_argument("--step-ms", type=float, default=50.0, help="model and browser time of a step (a sleep)")
    parser.add_argument("--write-ms", type=float, default=0.0, help="blocking time added to each write (storage)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the three modes")
    parser.add_argument("--dir", default=None, help="where the run folders go (default: the system's temp folder)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if min(args.episodes, args.steps, args.repeats) < 1 or min(args.step_ms, args.write_ms) < 0:
        _parser().error("--episodes, --steps and --repeats must be >= 1, --step-ms and --write-ms >= 0")
    pages = [make_screenshot(seed) for seed in range(DISTINCT_SCREENSHOTS)]
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.repeats):
        for mode in MODES:
            runs[mode].append(run_mode(mode, args, pages))
    print(
        f"{args.episodes} episodes x {args.steps} steps on one event loop, {args.step_ms:g} ms a step, "
        f"~{statistics.mean(map(len, pages)) / 1000:.0f} kB screenshots, {args.write_ms:g} ms added to a write; "
        f"medians of {args.repeats} repeats"
    )
    print("| mode | step median ms | step p95 ms | event-loop lag max ms | written MiB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for mode, results in runs.items():
        cells = [statistics.median(r[key] for r in results) for key in results[0]]
        print(f"| {mode} | {cells[0]:.1f} | {cells[1]:.1f} | {cells[2]:.1f} | {cells[3]:.1f} |")
    return 0
