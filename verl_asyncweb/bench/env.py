"""Environment benchmark: ``python -m verl_asyncweb.bench env [--rounds R] [--soak-minutes M]``.

Measures steps/s and CPU-ms per step (this process plus every descendant: Playwright driver, Chromium) of
10-step episodes (click + 1280x720 JPEG screenshot per step) with N = 1, 4, 8 concurrent episodes, for four
strategies run side by side in interleaved rounds (medians reported):

- ``new-browser``: launch a browser per episode (WebGym's rebuilt-pool style);
- ``new-context``: one context + page per episode on long-lived browsers;
- ``pool``: :class:`verl_asyncweb.env.BrowserPool` (``reset`` + ``step``);
- ``bare``: a plain Playwright loop on reused pages (the floor the pool is compared with).

``--soak-minutes M`` instead runs the pool continuously and reports memory growth after warm-up and leaked processes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import psutil
from aiohttp import web

from verl_asyncweb.env.actions import LeftClick
from verl_asyncweb.env.config import DEFAULT_CHROMIUM_ARGS, LOOPBACK_ONLY_ARGS, BrowserPoolConfig
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

        from verl_asyncweb.env import BrowserPool

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
    from verl_asyncweb.env import BrowserPool

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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench env", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per (strategy, N)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per worker per round")
    parser.add_argument("--sizes", default="1,4,8", help="comma-separated concurrency levels")
    parser.add_argument("--soak-minutes", type=float, default=0.0, help="run the soak test instead (20 in the issue)")
    parser.add_argument("--soak-concurrency", type=int, default=4)
    parser.add_argument("--executable-path", default=None, help="Chromium binary (default: chromium on PATH)")
    args = parser.parse_args(argv)
    executable = BrowserPoolConfig(executable_path=args.executable_path).resolve_executable()
    if args.soak_minutes > 0:
        _emit(asyncio.run(run_soak(args.soak_minutes, args.soak_concurrency, executable)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    _emit(asyncio.run(run_benchmark(args.rounds, args.episodes, sizes, executable)))
    return 0
