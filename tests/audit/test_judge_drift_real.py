"""A real judge made to drift is paged as a judge change at the first anchor check after
the change (docs/audit.md: within one `audit.anchors.every`).

The judge is SmolLM2 served by llama.cpp (`harness/llama_server.py`) behind a forwarding
proxy over real HTTP. The swap of the model behind the judge's name is the scripted part:
after the second check the proxy adds a strong logit bias for "Yes" to every request, so
the same weights now answer that every claim is supported — a model that passes the
hallucinated anchors it failed. The proxy serves at most three checks' requests and holds
the rest, so the page can only come from the first check after the swap; the test waits on
conditions, never on the clock.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, web

from harness.llama_server import MODEL
from harness.servers import webhook
from harness.wait import wait_until_async
from monitor.audit.anchors import AnchorCheck
from monitor.config import Config
from monitor.service import Service
from tests.judge.test_judge_real_model import model_server  # noqa: F401  (the SmolLM2 server)

PER_LABEL = 7  # anchors of each label: 14 flips one way page at alpha 0.001 (4 / 2**14)
ANCHORS = 2 * PER_LABEL
# llama.cpp takes token strings as keys: the drifted model all but always says "Yes".
DRIFT = {"Yes": 100}


class DriftingJudge:
    """Forwards chat completions to `upstream`; from the `swap_at`-th request on, with
    `bias` (default `DRIFT`) as the logit bias; requests past `hold_at` wait until the proxy
    stops."""

    def __init__(
        self, upstream: str, *, swap_at: int, hold_at: int, bias: dict[str, int] | None = None
    ) -> None:
        self._upstream = upstream
        self._bias = DRIFT if bias is None else bias
        self._swap_at = swap_at
        self._hold_at = hold_at
        self.served = 0
        self.drifted = 0
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        if self.served >= self._hold_at:
            await self._released.wait()
            return web.json_response({"error": "the proxy stopped"}, status=503)
        body: dict[str, Any] = await request.json()
        drift = self.served >= self._swap_at
        self.served += 1
        if drift:
            self.drifted += 1
            body["logit_bias"] = self._bias
        assert self._session is not None
        async with self._session.post(f"{self._upstream}/chat/completions", json=body) as got:
            payload = await got.read()
            return web.Response(body=payload, status=got.status, content_type="application/json")

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[DriftingJudge]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        self._session = ClientSession()
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        try:
            yield self
        finally:
            self._released.set()
            await self._runner.cleanup()
            await self._session.close()


def _anchors(path: Path, per_label: int = PER_LABEL) -> Path:
    """`per_label` faithful and `per_label` hallucinated anchors of the shipped set, no two
    on the same query and context. The shipped set pairs a faithful and a hallucinated
    answer to each context. llama.cpp saves a slot's prompt to its prompt cache when the
    next prompt shares less than half of it, and a prompt that extends a cached one takes
    that entry out of the cache. Two anchors of a pair share most of their prompt, so each
    would take its partner's entry and every check would evaluate both again; anchors of
    distinct pairs share only the judge's instructions, and from the second check on each
    prompt is found whole in the cache (the checks after the first cost the answers'
    tokens only)."""
    text = resources.files("monitor.audit").joinpath("anchors.json").read_text("utf-8")
    shipped = json.loads(text)
    chosen = [a for a in shipped if a["label"] == "pass"][:per_label]
    chosen += [a for a in shipped if a["label"] == "fail"][per_label : 2 * per_label]
    assert len({a["query"] for a in chosen}) == len(chosen) == 2 * per_label
    path.write_text(json.dumps(chosen))
    return path


def _value(service: Service, name: str) -> float | None:
    labels = {"evaluator": "fact_check"}
    return service.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)


@pytest.mark.e2e  # three checks of 14 anchors on a real model
@pytest.mark.timeout(900)
@pytest.mark.asyncio
async def test_a_real_judge_made_to_drift_is_paged_at_the_first_check_after(
    model_server: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    proxy = DriftingJudge(model_server, swap_at=2 * ANCHORS, hold_at=3 * ANCHORS)
    with webhook() as hook:
        async with proxy.serving():
            config = Config.model_validate(
                {
                    "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
                    "judge": {
                        "model": MODEL,
                        "api_base": proxy.url,
                        "structured_output": "on",
                        "max_output_tokens": 32,
                        "max_concurrency": 1,
                        "retries": 0,
                        "timeout_s": 120,
                    },
                    "evaluators": [{"name": "fact_check"}],
                    "alerts": {"webhooks": [{"url": hook.url}]},
                    "pipeline": {"processes": 0},
                    "audit": {
                        "anchors": {
                            "enabled": True,
                            "every": "1s",
                            "file": str(_anchors(tmp_path / "anchors.json")),
                        }
                    },
                }
            )
            service = Service(config, serve_http=False, with_receivers=False)
            await service.start()
            try:
                await wait_until_async(lambda: hook.alerts(), 600, "the judge-change page")
                # The page came from the third check, the first after the swap: the
                # second, on the unchanged model, did not page.
                assert (proxy.served, proxy.drifted) == (3 * ANCHORS, ANCHORS)
                (page,) = hook.alerts()
                assert page["labels"]["alertname"] == "RagMonitorJudgeChanged"
                assert page["labels"]["evaluator"] == "fact_check"
                figures = json.loads(page["annotations"]["anchor_figures"])
                assert figures["anchors"] == ANCHORS
                assert figures["failed_now"] == 0.0  # the drifted model passes every anchor
                assert figures["failed_then_passed"] == round(figures["failed_before"] * ANCHORS)
                assert figures["passed_then_failed"] == 0
                assert figures["p_value"] < config.audit.anchors.alpha
                assert _value(service, "judge_changed") == 1
                (check,) = [n.component for n in service.pipeline.nodes if n.name == "anchor check"]
                assert isinstance(check, AnchorCheck)
                note = check.changes.note("fact_check")  # what a regression page would add
                assert note is not None and f"{figures['failed_before']:.0%} → 0% failed" in note
            finally:
                await service.shutdown(30)
