"""A run whose episodes all fail says so on the console and stops, instead of waiting silently for a group verl can
train: WebGym tasks on a local page, graded by a judge that is not there (started with ``--skip-judge-check``, as a
judge that goes away mid-run looks)."""

import json
import re
import socket
import subprocess
import time

import pytest
from aiohttp import web
from e2e_runs import RUN_TIMEOUT_S, main_command
from loopback_app import LoopbackApp

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.browser]

STALL_TIMEOUT_S = 30
PAGE = "<html><head><title>Hours</title></head><body><h1>Opening hours</h1><p>9-17</p></body></html>"


async def _page(request):
    return web.Response(text=PAGE, content_type="text/html")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_run_whose_judge_is_gone_names_the_failures_and_stops_with_exit_1(tmp_path):
    app = web.Application()
    app.router.add_get("/", _page)
    with LoopbackApp(app) as origin:
        tasks = tmp_path / "tasks.jsonl"
        row = {"task_name": "Report the opening hours.", "website": f"{origin}/", "difficulty": 1}
        tasks.write_text(
            "\n".join(json.dumps({**row, "task_id": f"hours-{i}", "evaluator_reference": []}) for i in range(4))
        )
        judge = f"http://127.0.0.1:{_closed_port()}/v1"
        command = main_command(
            tmp_path / "run",
            f"asyncweb.tasks.train=[{tasks}]",
            f"asyncweb.judge={{base_url:'{judge}',max_retries:0,timeout_s:5}}",
            f"asyncweb.stall_timeout_s={STALL_TIMEOUT_S}",
            "asyncweb.agent.max_steps=1",
            "--skip-judge-check",
        )
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    stopped = [line for line in done.stderr.splitlines() if line.startswith("verl_asyncweb: stopped: ")]
    assert len(stopped) == 1, done.stderr[-3000:]
    match = re.search(
        r"no training step for (\d+) s: (\d+) of the (\d+) episodes since failed by the environment", stopped[0]
    )
    assert match and int(match.group(1)) >= STALL_TIMEOUT_S and match.group(2) == match.group(3), stopped[0]
    assert "judge failed" in stopped[0] and "ClientConnectorError" in stopped[0], stopped[0]
    assert f"stall_timeout_s={STALL_TIMEOUT_S}" in stopped[0] and "logs: " in stopped[0]
    assert "Traceback" not in done.stderr
    print(f"stopped after {elapsed:.0f} s: {stopped[0]}")
