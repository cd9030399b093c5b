"""The WebGym rubric judge over any OpenAI-compatible chat-completions endpoint (REFERENCE.md, "WebGym tasks").

Criterion A: one judge call per rubric fact, on selected screenshots. Criterion B: one call asking whether the final
answer is supported by the screenshots, which also flags CAPTCHA / blocking pages. Reward 1 only if every call
passes; a blocked episode is reported as ``blocked`` (left out of the success denominator) and a judge that
cannot be reached or understood after retries gives ``evaluator_failed`` (masked), never a silent 0.

The API key is read from ``os.environ[config.api_key_env]`` for each request and scrubbed from every message this
module produces; it is never logged, stored on the object or written anywhere.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
from typing import Any

import aiohttp

from verl_asyncweb.env.config import JudgeConfig
from verl_asyncweb.env.results import EvalResult
from verl_asyncweb.env.tasks.task import Task

logger = logging.getLogger(__name__)
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

FACT_PROMPT = (
    "You grade a web agent. Task: {task}\nRubric fact: {fact}\n"
    "Look at the screenshots of the agent's episode (oldest first). Is this fact satisfied by what they show? "
    'Reply with JSON only: {{"satisfied": true or false, "reason": "<one sentence>"}}'
)
ANSWER_PROMPT = (
    "You grade a web agent. Task: {task}\nAgent's final answer: {answer}\n{reference}"
    "Look at the screenshots of the agent's episode (oldest first). Is the final answer supported by what they "
    "show (not invented)? Also say whether any screenshot shows a CAPTCHA, a bot check or a page blocking access. "
    'Reply with JSON only: {{"supported": true or false, "blocked": true or false, "reason": "<one sentence>"}}'
)

PROBE_PROMPT = 'Reply with JSON only: {"ready": true}'


class JudgeError(RuntimeError):
    """The judge could not give a verdict (after retries, or on a non-retryable error)."""


def select_screenshots(screenshots: list[bytes], limit: int) -> list[bytes]:
    """Up to ``limit`` screenshots, evenly spaced over the episode, always including the last one."""
    if len(screenshots) <= limit:
        return list(screenshots)
    if limit == 1:
        return [screenshots[-1]]
    last = len(screenshots) - 1
    picks = sorted({round(i * last / (limit - 1)) for i in range(limit)})
    return [screenshots[i] for i in picks]


def _image_part(image: bytes) -> dict:
    mime = "image/png" if image[:4] == b"\x89PNG" else "image/jpeg"
    data = base64.b64encode(image).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


class RubricJudge:
    """Scores judge tasks (``Task.evaluator == "judge"``).

    Args:
        config: Endpoint, model, retries and timeout.
    """

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._http: aiohttp.ClientSession | None = None
        self._limit = asyncio.Semaphore(config.max_concurrency)

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def __aenter__(self) -> RubricJudge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def evaluate(self, task: Task, answer: str | None, screenshots: list[bytes]) -> EvalResult:
        """Judge one episode; never raises for judge trouble (returns ``evaluator_failed=True``)."""
        images = select_screenshots(screenshots, self.config.max_screenshots)
        reference = f"Reference answer: {task.reference_answer}\n" if task.reference_answer else ""
        calls = [FACT_PROMPT.format(task=task.instruction, fact=f.description) for f in task.rubric]
        calls.append(ANSWER_PROMPT.format(task=task.instruction, answer=answer or "(none)", reference=reference))
        try:
            verdicts = await asyncio.gather(*(self._ask(prompt, images) for prompt in calls))
        except JudgeError as exc:
            logger.warning("judge failed on task %s: %s", task.task_id, exc)
            return EvalResult(evaluator_failed=True, reasons=[f"judge failed: {exc}"])
        reasons, success = [], True
        for fact, verdict in zip(task.rubric, verdicts[:-1], strict=True):
            ok = verdict.get("satisfied") is True
            success &= ok
            reasons.append(f"{'PASS' if ok else 'FAIL'} A: {fact.description} ({verdict.get('reason', '')})")
        final = verdicts[-1]
        supported = final.get("supported") is True
        success &= supported
        reasons.append(f"{'PASS' if supported else 'FAIL'} B: answer supported ({final.get('reason', '')})")
        if final.get("blocked") is True:
            return EvalResult(0.0, False, reasons + ["blocked page detected"], blocked=True)
        return EvalResult(float(success), success, reasons, raw_score=float(success))

    async def probe(self) -> dict:
        """One request without images that the judge must answer with a JSON object, as it answers a rubric call;
        raises :class:`JudgeError` naming what failed (connection, HTTP status, an unparsable reply)."""
        try:
            return await self._post(self._body(PROBE_PROMPT))
        except _Retryable as exc:
            raise JudgeError(str(exc)) from None

    async def _ask(self, prompt: str, images: list[bytes]) -> dict:
        body = self._body([{"type": "text", "text": prompt}] + [_image_part(img) for img in images])
        last = "no attempt"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                await asyncio.sleep(self.config.retry_backoff_s * 2 ** (attempt - 1))  # back-off between retries
            try:
                async with self._limit:
                    return await self._post(body)
            except _Retryable as exc:
                last = str(exc)
                logger.info("judge attempt %d/%d failed: %s", attempt + 1, self.config.max_retries + 1, last)
        raise JudgeError(f"no verdict after {self.config.max_retries + 1} attempts; last error: {last}")

    def _body(self, content: str | list[dict]) -> dict:
        """A chat-completions request of one user message."""
        return {
            "model": self.config.model,
            "messages": [{"role": "user", "content": content}],
            "temperature": self.config.temperature,
        }

    async def _post(self, body: dict) -> dict:
        key = os.environ.get(self.config.api_key_env, "")
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if self._http is None:
            self._http = aiohttp.ClientSession()
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        try:
            async with self._http.post(
                url, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=self.config.timeout_s)
            ) as reply:
                text = await reply.text()
                if reply.status in _RETRY_STATUS:
                    raise _Retryable(_scrub(f"HTTP {reply.status}: {text[:200]}", key))
                if reply.status != 200:
                    raise JudgeError(_scrub(f"HTTP {reply.status}: {text[:200]}", key))
        except (TimeoutError, asyncio.TimeoutError):
            raise _Retryable(f"timed out after {self.config.timeout_s:g}s") from None
        except aiohttp.ClientError as exc:
            raise _Retryable(_scrub(f"{type(exc).__name__}: {exc}", key)) from None
        return _parse_verdict(text, key)


class _Retryable(Exception):
    """A failure worth another attempt (timeout, connection error, 429/5xx, unparsable reply)."""


def _scrub(text: str, key: str) -> str:
    return text.replace(key, "***") if key else text


def _parse_verdict(text: str, key: str) -> dict[str, Any]:
    try:
        content = json.loads(text)["choices"][0]["message"]["content"]
        if isinstance(content, list):  # content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        match = _JSON_OBJECT.search(content)
        verdict = json.loads(match.group(0)) if match else None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        verdict = None
    if not isinstance(verdict, dict):
        raise _Retryable(_scrub(f"unparsable judge reply: {text[:200]}", key))
    return verdict
