"""Tasks graded by the rubric judge need a judge that answers: main refuses to start without one, before Ray, and
``--skip-judge-check`` starts without the probe (a judge only the workers can reach). A real HTTP server on
127.0.0.1 plays the judge."""

import json
import logging
import subprocess
import sys

import pytest
from aiohttp import web
from loopback_app import LoopbackApp

from verl_asyncweb.env import JudgeConfig, Task
from verl_asyncweb.main import SetupError, check_judge

WEBGYM_TASK = Task("wg-1", "Read the hours", "webgym", 2, 10, "https://example.org")
MINIWOB_TASK = Task("miniwob/click-test/0", "", "miniwob", 1, 4, "/miniwob/click-test.html", evaluator="miniwob")


class Judge(LoopbackApp):
    """127.0.0.1:0 in a background thread answering chat completions with ``status`` and ``content``."""

    def __init__(self, status: int = 200, content: str = '{"ready": true}') -> None:
        self.status, self.content, self.requests = status, content, []
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        super().__init__(app)
        self.origin = self.__enter__()

    def config(self, **values) -> JudgeConfig:
        return JudgeConfig(base_url=f"{self.origin}/v1", **values)

    async def _chat(self, request):
        self.requests.append(await request.json())
        reply = {"choices": [{"message": {"role": "assistant", "content": self.content}}]}
        return web.json_response(reply, status=self.status)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_judge_that_answers_the_probe_passes(caplog):
    judge = Judge()
    with caplog.at_level(logging.INFO, logger="verl_asyncweb.main"):
        check_judge(judge.config(), [MINIWOB_TASK, WEBGYM_TASK], probe=True)
    assert len(judge.requests) == 1 and judge.requests[0]["messages"][0]["content"].startswith("Reply with JSON")
    assert "answered a probe" in caplog.text


@pytest.mark.parametrize(
    ("status", "content", "message"),
    [(500, "{}", "HTTP 500"), (401, "{}", "HTTP 401"), (200, "I am ready", "unparsable judge reply")],
)
def test_a_judge_that_fails_the_probe_is_refused_naming_why(status, content, message):
    judge = Judge(status=status, content=content)
    with pytest.raises(SetupError, match=f"did not answer a probe request .*{message}.*--skip-judge-check"):
        check_judge(judge.config(), [WEBGYM_TASK], probe=True)


def test_no_judge_is_asked_without_judged_tasks_or_with_the_check_skipped():
    judge = Judge(status=500)
    check_judge(judge.config(), [MINIWOB_TASK], probe=True)
    check_judge(judge.config(), [WEBGYM_TASK], probe=False)
    check_judge(None, [MINIWOB_TASK], probe=True)
    assert judge.requests == []


def _main(tmp_path, *args: str) -> subprocess.CompletedProcess:
    tasks = tmp_path / "tasks.jsonl"
    row = {"task_id": "t1", "task_name": "Read the hours.", "website": "https://example.org", "difficulty": 1}
    tasks.write_text("\n".join(json.dumps({**row, "task_id": f"t{i}", "evaluator_reference": []}) for i in range(4)))
    command = [sys.executable, "-m", "verl_asyncweb.main", f"asyncweb.tasks.train=[{tasks}]", *args]
    return subprocess.run(
        [*command, f"trainer.default_local_dir={tmp_path}/run"], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        (None, "4 task(s) (t0 first) are graded by the rubric judge and asyncweb.judge is not set"),
        ("unreachable", "did not answer a probe request (ClientConnectorError"),
    ],
)
def test_main_refuses_webgym_tasks_without_a_judge_that_answers_before_ray(judge, message, tmp_path):
    # Before: accepted, then every episode was masked and the run hung after the rollout servers came up.
    args = [] if judge is None else [f"+asyncweb.judge.base_url=http://127.0.0.1:{_closed_port()}/v1"]
    done = _main(tmp_path, *args)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("verl_asyncweb: ")]
    assert len(lines) == 1 and message in lines[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr
