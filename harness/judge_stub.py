"""A scripted stand-in for remote judge LLM APIs, served over real HTTP on 127.0.0.1:0.

It speaks the OpenAI chat-completions protocol (`POST /v1/chat/completions`, also
`/chat/completions`) and Ollama's `POST /api/generate`, records every request body it
receives, and answers from a script: queued `Reply`s first, then `default`. Only the
remote model is faked; litellm and its HTTP stack run for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    content: str = "Score: 4"
    status: int = 200
    delay: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 10
    finish_reason: str = "stop"
    error: str = "stub error"
    headers: dict[str, str] = field(default_factory=dict)
    # OpenAI `choices[0].logprobs.content`: [(token, logprob, [(alternative, logprob), ...])]
    logprobs: list[tuple[str, float, list[tuple[str, float]]]] | None = None


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        """Everything the judge was shown, as one text."""
        if "messages" in self.body:
            return "\n".join(str(m.get("content", "")) for m in self.body["messages"])
        return str(self.body.get("system", "")) + "\n" + str(self.body.get("prompt", ""))


class StubJudge:
    def __init__(self, default: Reply | Callable[[Received], Reply] | None = None) -> None:
        self.default: Reply | Callable[[Received], Reply] = default or Reply()
        self.script: deque[Reply] = deque()
        self.received: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()  # cuts scripted delays short at stop
        self.port = 0

    @property
    def openai_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def ollama_base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def judge_section(self, model: str, api_key_env: str, **extra: object) -> dict[str, object]:
        """The monitor's `judge` config for a model behind this server, without retries."""
        return {
            "model": model,
            "api_base": self.openai_base,
            "api_key_env": api_key_env,
            "retries": 0,
            **extra,
        }

    def queue(self, *replies: Reply | str) -> None:
        for r in replies:
            self.script.append(Reply(content=r) if isinstance(r, str) else r)

    async def start(self) -> StubJudge:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_post("/api/generate", self._generate)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        # A delayed answer nobody waits for any more must not hold the server's cleanup.
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> StubJudge:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _next(self, request: web.Request) -> tuple[Received, Reply]:
        body = await request.json()
        got = Received(request.path, dict(request.headers), body)
        self.received.append(got)
        reply = self.script.popleft() if self.script else self.default
        if callable(reply):
            reply = reply(got)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if reply.delay:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), reply.delay)
        finally:
            self.in_flight -= 1
        return got, reply

    async def _chat(self, request: web.Request) -> web.Response:
        got, reply = await self._next(request)
        if reply.status != 200:
            return web.json_response(
                {"error": {"message": reply.error, "type": "stub", "code": reply.status}},
                status=reply.status,
                headers=reply.headers,
            )
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.received)}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": got.body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": reply.finish_reason,
                        **_logprobs(reply),
                    }
                ],
                "usage": {
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                },
            }
        )

    async def _generate(self, request: web.Request) -> web.Response:
        got, reply = await self._next(request)
        if reply.status != 200:
            return web.json_response({"error": reply.error}, status=reply.status)
        return web.json_response(
            {
                "model": got.body.get("model", "stub"),
                "created_at": "2024-01-01T00:00:00Z",
                "response": reply.content,
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": reply.prompt_tokens,
                "eval_count": reply.completion_tokens,
            }
        )


def _logprobs(reply: Reply) -> dict[str, Any]:
    if reply.logprobs is None:
        return {}
    content = [
        {
            "token": token,
            "logprob": logprob,
            "bytes": None,
            "top_logprobs": [
                {"token": alt, "logprob": lp, "bytes": None} for alt, lp in alternatives
            ],
        }
        for token, logprob, alternatives in reply.logprobs
    ]
    return {"logprobs": {"content": content}}


def dumps(received: list[Received]) -> str:
    return json.dumps([r.body for r in received])
