"""Environment benchmark: ``python -m verl_asyncweb.bench env [--rounds R] [--soak-minutes M] [--fork [--out F]]``.

Measures steps/s and CPU-ms per step (this process plus every descendant: Playwright driver, Chromium) of
10-step episodes (click + 1280x720 JPEG screenshot per step) with N = 1, 4, 8 concurrent episodes, for four
strategies run side by side in interleaved rounds (medians reported):

- ``new-browser``: launch a browser per episode (WebGym's rebuilt-pool style);
- ``new-context``: one context + page per episode on long-lived browsers;
- ``pool``: :class:`verl_asyncweb.env.BrowserPool` (``reset`` + ``step``);
- ``bare``: a plain Playwright loop on reused pages (the floor the pool is compared with).

``--capacity`` instead sizes browser hosts: the pool launching its Chromium locally vs the same pool on
two remote browser servers (``python -m verl_asyncweb.browser_server``, started here, their CPU counted too) at
N = 4 and 8 in interleaved rounds, then each page's memory (PSS of a server's Chromium with its pages open minus
idle, per page, after 10 steps at 1280x720), and the browser hosts the GPU recipe's concurrency needs.

``--soak-minutes M`` instead runs the pool continuously and reports memory growth after warm-up and leaked processes.

``--fork`` instead measures episode snapshots on a pool with ``deterministic_clock``: for MiniWoB++ tasks,
bundled-site tasks and a page the pool does not serve (restored by action replay), each snapshotted after all but
the last step of its scripted oracle, the median time of ``snapshot``, ``restore``, a fresh ``reset``, and replaying
the prefix (``reset`` + one ``step`` with observation per action, what a branch costs without snapshots), each on a
page that already shows the task's site (an untimed ``reset`` first), in interleaved rounds; ``--out`` writes them
as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil
from aiohttp import web

from verl_asyncweb.env.actions import LeftClick
from verl_asyncweb.env.chromium import DEFAULT_CHROMIUM_ARGS, LOOPBACK_ONLY_ARGS  # not env.config: --help needs no verl
from verl_asyncweb.env.tasks.task import Task

STEPS = 10
BROWSERS, PAGES = 2, 4
ARGS = list(DEFAULT_CHROMIUM_ARGS + LOOPBACK_ONLY_ARGS)
PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>bench</title>
<style>body{margin:0;font:16px 'DejaVu Sans'} button{position:absolute;left:100px;top:100px;width:200px;height:60px}
p{position:absolute;left:100px;top:200px}</style></head><body>
<button onclick="n.textContent = +n.textContent + 1">Click</button><p id="n">0</p>
<p style="top:260px">Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.</p></body></html>"""


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def tree_cpu_s() -> float:
    """CPU seconds of this process and all live descendants, including their reaped children."""
    total = 0.0
    procs = [psutil.Process()]
    procs += psutil.Process().children(recursive=True)
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            continue
    return total


def tree_rss_mb() -> float:
    """Resident memory (MB) of this process and all live descendants."""
    total = 0
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def chromium_pids() -> set[int]:
    """Live (non-zombie) Chromium processes descended from this process."""
    out = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name().lower() and proc.status() != psutil.STATUS_ZOMBIE:
                out.add(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return out


async def serve_page() -> tuple[web.AppRunner, str]:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html", charset="utf-8")

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"


async def bare_episode(page, url: str) -> None:
    await page.goto(url, wait_until="domcontentloaded", timeout=10_000)
    for _ in range(STEPS):
        await asyncio.wait_for(page.mouse.click(200, 130), 5)
        await page.screenshot(type="jpeg", quality=80, timeout=5_000)


class Strategies:
    """Long-lived resources of the four strategies, so each run measures only episodes."""

    def __init__(self, url: str, executable: str) -> None:
        self.url, self.executable = url, executable

    async def start(self) -> None:
        from playwright.async_api import async_playwright

        from verl_asyncweb.env import BrowserPool, BrowserPoolConfig

        self.pw = await async_playwright().start()
        self.browsers = [await self._launch() for _ in range(BROWSERS)]
        self.bare_pages = [await b.new_page(viewport={"width": 1280, "height": 720}) for b in self.browsers]
        self.bare_pages += [await b.new_page(viewport={"width": 1280, "height": 720}) for b in self.browsers * 3]
        config = BrowserPoolConfig(
            num_browsers=BROWSERS, pages_per_browser=PAGES, chromium_args=tuple(ARGS), executable_path=self.executable
        )
        self.pool = BrowserPool(config)
        await self.pool.start()
        self.task = Task("bench", "click", "site", 1, STEPS + 1, self.url, evaluator="site")

    async def close(self) -> None:
        await self.pool.close()
        for browser in self.browsers:
            await browser.close()
        await self.pw.stop()

    async def _launch(self):
        return await self.pw.chromium.launch(executable_path=self.executable, args=ARGS, headless=True)

    async def new_browser(self, worker: int) -> None:
        browser = await self._launch()
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 720})
            await bare_episode(page, self.url)
        finally:
            await browser.close()

    async def new_context(self, worker: int) -> None:
        context = await self.browsers[worker % BROWSERS].new_context(viewport={"width": 1280, "height": 720})
        try:
            await bare_episode(await context.new_page(), self.url)
        finally:
            await context.close()

    async def pool_episode(self, worker: int) -> None:
        async with self.pool.session() as session:
            obs = await self.pool.reset(session, self.task)
            assert not obs.env_failed, obs.error
            for _ in range(STEPS):
                result = await self.pool.step(session, LeftClick(200, 130))
                assert not result.env_failed, result.error

    async def bare(self, worker: int) -> None:
        await bare_episode(self.bare_pages[worker], self.url)


async def measure(episode: Callable[[int], Awaitable[None]], n: int, episodes: int) -> tuple[float, float]:
    """Run ``episodes`` episodes on each of ``n`` workers; returns (steps/s, CPU-ms/step)."""

    async def worker(i: int) -> None:
        for _ in range(episodes):
            await episode(i)

    cpu0, t0 = tree_cpu_s(), time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(n)))
    wall, cpu = time.perf_counter() - t0, tree_cpu_s() - cpu0
    steps = n * episodes * STEPS
    return steps / wall, 1000 * cpu / steps


async def run_benchmark(rounds: int, episodes: int, sizes: list[int], executable: str) -> str:
    runner, url = await serve_page()
    strategies = Strategies(url, executable)
    await strategies.start()
    named = {
        "new-browser": strategies.new_browser,
        "new-context": strategies.new_context,
        "pool": strategies.pool_episode,
        "bare": strategies.bare,
    }
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    try:
        for fn in named.values():  # warm-up: caches, first renderer of each page
            await measure(fn, 1, 1)
        for r in range(rounds):
            for n in sizes:
                for name, fn in named.items():
                    results.setdefault((name, n), []).append(await measure(fn, n, episodes))
            _emit(f"round {r + 1}/{rounds} done")
    finally:
        await strategies.close()
        await runner.cleanup()
    return format_table(results, sizes, rounds, episodes)


def format_table(results: dict, sizes: list[int], rounds: int, episodes: int) -> str:
    med = {k: (statistics.median(v[0] for v in vs), statistics.median(v[1] for v in vs)) for k, vs in results.items()}
    lines = [
        f"10-step episodes (click + 1280x720 JPEG screenshot), medians of {rounds} interleaved rounds, "
        f"{episodes} episodes per worker; pool/bare: {BROWSERS} browsers x {PAGES} pages",
        "",
        "| strategy | " + " | ".join(f"N={n} steps/s | N={n} CPU-ms/step" for n in sizes) + " |",
        "| --- | " + " | ".join("---: | ---:" for _ in sizes) + " |",
    ]
    for name in ("new-browser", "new-context", "pool", "bare"):
        cells = " | ".join(f"{med[(name, n)][0]:.1f} | {med[(name, n)][1]:.0f}" for n in sizes)
        lines.append(f"| {name} | {cells} |")
    lines.append("")
    for n in sizes:
        pool, newb, bare = med[("pool", n)][0], med[("new-browser", n)][0], med[("bare", n)][0]
        lines.append(f"- N={n}: pool / new-browser = {pool / newb:.2f}x; pool / bare = {pool / bare:.2f}")
    return "\n".join(lines)


async def run_soak(minutes: float, concurrency: int, executable: str) -> str:
    from verl_asyncweb.env import BrowserPool, BrowserPoolConfig

    runner, url = await serve_page()
    before = chromium_pids()
    config = BrowserPoolConfig(
        num_browsers=BROWSERS, pages_per_browser=PAGES, chromium_args=tuple(ARGS), executable_path=executable
    )
    task = Task("soak", "click", "site", 1, STEPS + 1, url, evaluator="site")
    warmup_s = min(60.0, minutes * 60 / 5)
    deadline = time.monotonic() + minutes * 60
    samples: list[tuple[float, float]] = []
    episodes = 0
    async with BrowserPool(config) as pool:
        start = time.monotonic()

        async def worker() -> None:
            nonlocal episodes
            while time.monotonic() < deadline:
                async with pool.session() as session:
                    await pool.reset(session, task)
                    for _ in range(STEPS):
                        await pool.step(session, LeftClick(200, 130))
                episodes += 1

        async def sampler() -> None:
            while time.monotonic() < deadline:
                samples.append((time.monotonic() - start, tree_rss_mb()))
                await asyncio.sleep(5)  # sampling period of the memory probe

        await asyncio.gather(sampler(), *(worker() for _ in range(concurrency)))
        stats = pool.stats()
    await runner.cleanup()
    leaked = chromium_pids() - before
    after_warm = [mb for t, mb in samples if t >= warmup_s] or [samples[-1][1]]
    base, end = after_warm[0], statistics.median(after_warm[-3:])
    growth = 100 * (end - base) / base
    return "\n".join(
        [
            f"soak: {minutes:g} min, {concurrency} concurrent episodes, {episodes} episodes, {stats['steps']} steps, "
            f"env failures {stats['env_failures']}, relaunches {stats['relaunches']}",
            f"- RSS (process tree) after {warmup_s:.0f}s warm-up: {base:.0f} MB; at end: {end:.0f} MB; "
            f"growth {growth:+.1f}% (target < 10%)",
            f"- Chromium processes left after close: {len(leaked)}",
        ]
    )


FORK_MINIWOB = ("enter-text", "enter-password", "login-user", "click-checkboxes")
FORK_SITES = ("site/wiki/bookmark-two", "site/shop/buy-p7", "site/cross/capital-company-order")
FORK_WEB_STEPS = 8


async def _fork_cases(pool, url: str) -> list[dict]:
    """Run each oracle once; returns per case the task, its prefix (all oracle steps but the last) and snapshot."""
    from verl_asyncweb.env import load_tasks
    from verl_asyncweb.env.miniwob_oracle import miniwob_actions
    from verl_asyncweb.env.oracle import click
    from verl_asyncweb.env.tasks.site_checks import plan_step_actions
    from verl_asyncweb.env.tasks.sites import site_task_spec

    sites = {t.task_id: t for t in load_tasks("sites")}
    cases = []
    async with pool.session() as session:
        for name in FORK_MINIWOB:
            task = load_tasks("miniwob", names=[name], seed=7)[0]
            obs = await pool.reset(session, task)
            cases.append({"task": task, "prefix": [a.tool_call for a in miniwob_actions(name, obs)[:-1]]})
        for task_id in FORK_SITES:
            task, texts = sites[task_id], []
            obs = await pool.reset(session, task)
            for op, *args in site_task_spec(task).plan:
                for text in plan_step_actions(op, args, obs):
                    texts.append(text)
                    obs = (await pool.step(session, text)).observation
            cases.append({"task": task, "prefix": texts[:-1]})
        web = Task("bench/web", "click", "webgym", 1, FORK_WEB_STEPS + 1, url, allowed_origins=(url.rstrip("/"),))
        cases.append({"task": web, "prefix": [click([156, 181])] * (FORK_WEB_STEPS - 1)})  # the button
        for case in cases:
            await _replay_prefix(pool, session, case)
            case["snapshot"] = await pool.snapshot(session)
    return cases


async def _replay_prefix(pool, session, case: dict) -> None:
    obs = await pool.reset(session, case["task"])
    for text in case["prefix"]:
        if obs.env_failed:
            raise RuntimeError(f"{case['task'].task_id}: the environment failed: {obs.error}")
        obs = (await pool.step(session, text)).observation


async def run_fork_benchmark(rounds: int, executable: str) -> dict:
    """Median ms of snapshot / restore / reset / prefix replay per case, from ``rounds`` interleaved rounds."""
    from verl_asyncweb.env import BrowserPool, BrowserPoolConfig

    runner, url = await serve_page()
    config = BrowserPoolConfig(
        num_browsers=1,
        pages_per_browser=1,
        chromium_args=tuple(ARGS),
        executable_path=executable,
        accessibility_text=True,
        deterministic_clock=True,
    )
    try:
        async with BrowserPool(config) as pool:
            cases = await _fork_cases(pool, url)
            times: list[dict[str, list[float]]] = [{} for _ in cases]
            async with pool.session() as session:
                for r in range(rounds):
                    for case, samples in zip(cases, times, strict=True):
                        measures = {
                            "reset_ms": lambda c=case: pool.reset(session, c["task"]),
                            "replay_ms": lambda c=case: _replay_prefix(pool, session, c),
                            "restore_ms": lambda c=case: pool.restore(session, c["snapshot"]),
                            "snapshot_ms": lambda: pool.snapshot(session),  # the page is at the snapshot here
                        }
                        names = list(measures)
                        for name in names[r % 4 :] + names[: r % 4]:  # rotate the order from round to round
                            await pool.reset(session, case["task"])  # untimed: the page shows the task's site
                            if name == "snapshot_ms":
                                await pool.restore(session, case["snapshot"])
                            t0 = time.perf_counter()
                            await measures[name]()
                            samples.setdefault(name, []).append(1000 * (time.perf_counter() - t0))
                    _emit(f"round {r + 1}/{rounds} done")
            stats = pool.stats()
    finally:
        await runner.cleanup()
    rows = []
    for case, samples in zip(cases, times, strict=True):
        snap = case["snapshot"]
        row = {"task": case["task"].task_id, "kind": snap.kind, "exact": snap.exact, "prefix_steps": snap.steps}
        row.update({name: statistics.median(values) for name, values in samples.items()})
        row.update({"snapshot_bytes": len(snap.to_json()), "samples_ms": samples})
        rows.append(row)
    return {"rounds": rounds, "clock_step_ms": config.clock_step_ms, "cases": rows, "pool_stats": stats}


def format_fork_table(result: dict) -> str:
    lines = [
        f"Episode snapshots (deterministic clock, 1 page), medians of {result['rounds']} interleaved rounds; "
        "snapshot after all but the last oracle step; replay = reset + one observed step per prefix action",
        "",
        "| task | kind | exact | prefix steps | snapshot ms | restore ms | reset ms | replay ms | replay / restore "
        "| snapshot bytes |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["cases"]:
        lines.append(
            f"| {row['task']} | {row['kind']} | {'yes' if row['exact'] else 'no'} | {row['prefix_steps']} "
            f"| {row['snapshot_ms']:.0f} | {row['restore_ms']:.0f} | {row['reset_ms']:.0f} | {row['replay_ms']:.0f} "
            f"| {row['replay_ms'] / row['restore_ms']:.1f}x | {row['snapshot_bytes']} |"
        )
    return "\n".join(lines)


# webgym_qwen3vl8b_async: 16 agent-loop workers x 4 browsers x 6 pages, one per episode in flight ((eta+1) x 128)
GPU_RECIPE_PAGES, GPU_RECIPE_PAGES_PER_BROWSER = 384, 6


def tree_pss_mb(root: int) -> float:
    """Proportional set size (MB) of the Chromium processes under process ``root`` (shared pages split fairly)."""
    total = 0
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if "chrom" in proc.name().lower():
                total += proc.memory_full_info().pss
        except psutil.Error:
            continue
    return total / 2**20


async def run_capacity(rounds: int, episodes: int, sizes: list[int], executable: str) -> dict:
    """Local launch vs remote endpoints side by side, and per-page memory; returns the measurements."""
    from verl_asyncweb.browser_server import BrowserServer
    from verl_asyncweb.env import BrowserPool, BrowserPoolConfig

    runner, url = await serve_page()
    servers = [BrowserServer(executable_path=executable, loopback_only=True) for _ in range(BROWSERS)]
    pools: dict[str, BrowserPool] = {}
    task = Task("bench", "click", "site", 1, STEPS + 1, url, evaluator="site")

    def episode(pool: BrowserPool) -> Callable[[int], Awaitable[None]]:
        async def run(worker: int) -> None:
            async with pool.session() as session:
                assert not (await pool.reset(session, task)).env_failed
                for _ in range(STEPS):
                    result = await pool.step(session, LeftClick(200, 130))
                    assert not result.env_failed, result.error

        return run

    try:
        for server in servers:
            server.start()
        idle_pss = [tree_pss_mb(server.pid) for server in servers]
        base = dict(num_browsers=BROWSERS, pages_per_browser=PAGES, chromium_args=tuple(ARGS))
        pools["local launch"] = BrowserPool(BrowserPoolConfig(executable_path=executable, **base))
        endpoints = tuple(server.endpoint for server in servers)
        pools["remote endpoints"] = BrowserPool(BrowserPoolConfig(remote_endpoints=endpoints, **base))
        for pool in pools.values():
            await pool.start()
        results: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for pool in pools.values():  # warm-up, and every page of the remote pool has run a 10-step episode
            await measure(episode(pool), BROWSERS * PAGES, 1)
        loaded_pss = [tree_pss_mb(server.pid) for server in servers]
        for r in range(rounds):
            for n in sizes:
                for name, pool in pools.items():
                    results.setdefault((name, n), []).append(await measure(episode(pool), n, episodes))
            _emit(f"round {r + 1}/{rounds} done")
    finally:
        for pool in pools.values():
            await pool.close()
        for server in servers:
            server.stop()
        await runner.cleanup()
    medians = {
        f"{name} N={n}": {
            "steps_per_s": statistics.median(v[0] for v in values),
            "cpu_ms_per_step": statistics.median(v[1] for v in values),
        }
        for (name, n), values in results.items()
    }
    return {
        "rounds": rounds,
        "episodes_per_worker": episodes,
        "medians": medians,
        "browser_pss_mb": statistics.mean(idle_pss),
        "page_pss_mb": statistics.mean(
            (loaded - idle) / PAGES for loaded, idle in zip(loaded_pss, idle_pss, strict=True)
        ),
    }


def hosts_needed(result: dict, pages: int, host_mem_gib: float, pages_per_browser: int) -> dict:
    """Browser hosts for ``pages`` concurrent pages: memory-bound, each host keeping 20% of its RAM free."""
    browsers = -(-pages // pages_per_browser)
    total_gib = (pages * result["page_pss_mb"] + browsers * result["browser_pss_mb"]) / 1024
    return {
        "pages": pages,
        "browsers": browsers,
        "total_gib": total_gib,
        "hosts": -(-total_gib // (0.8 * host_mem_gib)),
    }


def format_capacity(result: dict, sizes: list[int], host_mem_gib: float, pages: int, pages_per_browser: int) -> str:
    lines = [
        f"10-step episodes at 1280x720, {BROWSERS} browsers x {PAGES} pages, medians of {result['rounds']} "
        f"interleaved rounds ({result['episodes_per_worker']} episodes per worker); CPU of every process, servers "
        "included",
        "",
        "| browsers | " + " | ".join(f"N={n} steps/s | N={n} CPU-ms/step" for n in sizes) + " |",
        "| --- | " + " | ".join("---: | ---:" for _ in sizes) + " |",
    ]
    for name in ("local launch", "remote endpoints"):
        cells = " | ".join(
            f"{result['medians'][f'{name} N={n}']['steps_per_s']:.1f} | "
            f"{result['medians'][f'{name} N={n}']['cpu_ms_per_step']:.0f}"
            for n in sizes
        )
        lines.append(f"| {name} | {cells} |")
    need = hosts_needed(result, pages, host_mem_gib, pages_per_browser)
    lines += [
        "",
        f"- memory (PSS): {result['page_pss_mb']:.0f} MB per page, {result['browser_pss_mb']:.0f} MB per idle browser",
        f"- {need['pages']} pages in {need['browsers']} browsers: {need['total_gib']:.0f} GiB, "
        f"{need['hosts']:.0f} host{'s' if need['hosts'] != 1 else ''} of {host_mem_gib:g} GiB (80% used)",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench env", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per (strategy, N)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per worker per round")
    parser.add_argument("--sizes", default="1,4,8", help="comma-separated concurrency levels")
    parser.add_argument("--soak-minutes", type=float, default=0.0, help="run the soak test instead (20 in the issue)")
    parser.add_argument("--soak-concurrency", type=int, default=4)
    parser.add_argument("--executable-path", default=None, help="Chromium binary (default: chromium on PATH)")
    parser.add_argument("--fork", action="store_true", help="benchmark snapshot / restore / reset / prefix replay")
    parser.add_argument("--capacity", action="store_true", help="local vs remote browsers, per-page memory, hosts")
    parser.add_argument("--host-mem-gib", type=float, default=64.0, help="--capacity: RAM of one browser host")
    parser.add_argument("--pages", type=int, default=GPU_RECIPE_PAGES, help="--capacity: concurrent pages to host")
    parser.add_argument("--pages-per-browser", type=int, default=GPU_RECIPE_PAGES_PER_BROWSER)
    parser.add_argument("--out", type=Path, default=None, help="--fork/--capacity: write the measurements as JSON")
    args = parser.parse_args(argv)
    from verl_asyncweb.env import BrowserPoolConfig

    executable = BrowserPoolConfig(executable_path=args.executable_path).resolve_executable()
    if args.fork:
        result = asyncio.run(run_fork_benchmark(args.rounds, executable))
        _emit(format_fork_table(result))
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
            _emit(f"wrote {args.out}")
        return 0
    if args.capacity:
        sizes = [int(s) for s in (args.sizes if args.sizes != "1,4,8" else "4,8").split(",")]
        result = asyncio.run(run_capacity(args.rounds, args.episodes, sizes, executable))
        _emit(format_capacity(result, sizes, args.host_mem_gib, args.pages, args.pages_per_browser))
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
            _emit(f"wrote {args.out}")
        return 0
    if args.soak_minutes > 0:
        _emit(asyncio.run(run_soak(args.soak_minutes, args.soak_concurrency, executable)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    _emit(asyncio.run(run_benchmark(args.rounds, args.episodes, sizes, executable)))
    return 0
