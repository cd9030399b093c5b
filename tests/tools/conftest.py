"""Fixtures for the tools tests: one headless Chromium per session, a fresh offline context per test."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlparse

import pytest
import pytest_asyncio

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]


@dataclass
class PageLog:
    """What a page did that tests assert on."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser():
    if not shutil.which(CHROMIUM):
        pytest.skip("needs Chromium: apt-get install chromium (Debian package)")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("needs Playwright: pip install playwright==1.65.2")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        yield browser
        await browser.close()


@pytest_asyncio.fixture(loop_scope="session")
async def viewer_page(browser) -> AsyncIterator[tuple[object, PageLog]]:
    """A page in a fresh context: fixed viewport/locale/timezone; every non-file, non-loopback request aborted."""
    context = await browser.new_context(
        viewport={"width": 1400, "height": 1000}, locale="en-US", timezone_id="UTC", java_script_enabled=True
    )
    log = PageLog()

    async def route(request_route):
        url = urlparse(request_route.request.url)
        if url.scheme in ("file", "data") or url.hostname == "127.0.0.1":
            await request_route.continue_()
        else:
            log.blocked.append(request_route.request.url)
            await request_route.abort()

    await context.route("**/*", route)
    page = await context.new_page()
    page.set_default_timeout(10_000)
    page.on("console", lambda msg: log.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: log.page_errors.append(str(err)))
    yield page, log
    await context.close()
