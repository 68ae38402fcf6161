"""Audits in the running service: the embedded detector on every record, a reference on
the audited share — labels POSTed to the metrics port, or a real LLM judge (SmolLM2 served
by llama.cpp, `harness/llama_server.py`) — and the estimate with its interval on
`/metrics` and `GET /audit`. Real HTTP throughout; no double."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from harness.llama_server import MODEL
from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.config import Config
from monitor.processors.sampler import sampling_position
from monitor.records import RagRecord, parse_record
from monitor.service import Service
from tests.judge.test_judge_real_model import model_server  # noqa: F401  (the SmolLM2 server)

pytestmark = pytest.mark.asyncio
SHARE = 0.5
CONTEXT = "The Example Town bridge over the river opened in 1931. It is 240 metres long."
ANSWERS = ("The bridge opened in 1931.", "The bridge opened in 1975 and is 3 km long.")


def _records(count: int) -> list[RagRecord]:
    return [
        parse_record(
            {
                "request_id": f"audit-{i}",
                "service": "shop",
                "query": "When did the Example Town bridge open?",
                "retrieved_context": [{"content": CONTEXT}],
                "response": f"{ANSWERS[i % 2]} That is answer {i}.",  # no two alike
            }
        )
        for i in range(count)
    ]


def _audited(records: list[RagRecord]) -> list[str]:
    return [r.request_id for r in records if sampling_position(r.sampling_key) < SHARE]


# The bearer token label senders present (labels need a credential on loopback too).
LABEL_TOKEN_ENV = "RAG_MONITOR_TEST_E2E_LABEL_TOKEN"
LABEL_TOKEN = "e2e-label-token-0123456789"
BEARER = {"Authorization": f"Bearer {LABEL_TOKEN}"}


def _config(audit: dict[str, Any], evaluators: list[dict[str, Any]], **more: Any) -> Config:
    return Config.model_validate(
        {
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "exporters": {"prometheus": {"endpoint": "127.0.0.1:0"}},
            "pipeline": {"processes": 0},
            "evaluators": evaluators,
            "audit": {"share": SHARE, "min_audited": 2, **audit},
            **more,
        },
        context={"environ": {**os.environ, LABEL_TOKEN_ENV: LABEL_TOKEN}},
    )


def _labelled(token: bool = True, **more: Any) -> Config:
    """The detector audited by labels posted to the metrics port, by senders presenting
    the bearer token `LABEL_TOKEN` (`token`; else no token is named)."""
    labels: dict[str, Any] = {"http": True}
    if token:
        labels["token_env"] = LABEL_TOKEN_ENV
    audit = {"evaluator": "local_groundedness", "reference": "labels", "labels": labels}
    return _config(audit, [{"name": "local_groundedness"}], **more)


def _http(port: int, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=BEARER)
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return text if path == "/metrics" else json.loads(text)


async def _get(port: int, path: str, body: Any = None) -> Any:
    return await asyncio.to_thread(_http, port, path, body)


def _sample(metrics: str, name: str, **labels: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(f"rag_monitor_{name}{{") and all(
            f'{k}="{v}"' in line for k, v in labels.items()
        ):
            return float(line.rsplit(" ", 1)[1])
    return None


def _total(metrics: str, name: str, **labels: str) -> float:
    """The sum of every series of `name` that carries `labels`."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith(f"rag_monitor_{name}{{")
        and all(f'{k}="{v}"' in line for k, v in labels.items())
    )


async def _evaluated(service: Service, records: list[RagRecord]) -> int:
    assert service.http is not None and service.http.bound_port is not None
    port = service.http.bound_port
    assert await service.trace.put([Delivery("test", records=list(records))])
    latest: dict[str, Any] = {}

    async def refresh() -> None:
        latest.update(await _get(port, "/audit"))

    def done() -> bool:
        shop = latest.get("services", {}).get("shop", {})
        counted = shop.get("evaluated", 0) + latest.get("pending_labels", 0)
        return bool(counted == len(records))

    async def poll() -> None:
        while not done():
            await refresh()
            await asyncio.sleep(0.05)

    task = asyncio.create_task(poll())
    await wait_until_async(task.done, 600, "every record counted by the audit")
    await task
    return port


async def test_labels_posted_to_the_endpoint_join_their_records() -> None:
    records = _records(24)
    audited = _audited(records)
    assert 2 <= len(audited) <= 22  # the hash splits these ids both ways
    config = _labelled()
    service = Service(config, with_receivers=False)
    await service.start()
    try:
        port = await _evaluated(service, records)
        page = await _get(port, "/audit")
        assert sorted(page["awaiting_labels"]) == sorted(audited)  # in evaluation order
        # The truth: the second answer (odd ids) is the hallucinated one.
        labels: list[Any] = [
            {"request_id": rid, "label": "fail" if int(rid.split("-")[1]) % 2 else "pass"}
            for rid in audited
        ]
        labels += [{"request_id": "nobody", "label": "fail"}, {"request_id": "x", "label": 1}]
        answer = await _get(port, "/audit/labels", labels)
        assert answer["joined"] == len(audited)
        assert [r["index"] for r in answer["refused"]] == [len(audited), len(audited) + 1]
        assert answer["refused"][0]["error"].startswith("unknown_id")
        assert answer["refused"][1]["error"].startswith("label: must be")
        metrics = await _get(port, "/metrics")
        shop = {"service": "shop", "evaluator": "local_groundedness"}
        lower = _sample(metrics, "defect_rate_estimate", **shop, bound="lower")
        upper = _sample(metrics, "defect_rate_estimate", **shop, bound="upper")
        assert lower is not None and upper is not None and lower <= 0.5 <= upper
        assert _sample(metrics, "audited_records", **shop) == len(audited)
        joined = _sample(metrics, "audit_labels_total", source="http", outcome="joined")
        assert joined == len(audited)
        for outcome in ("unknown_id", "malformed"):
            assert _sample(metrics, "audit_labels_total", source="http", outcome=outcome) == 1
        page = await _get(port, "/audit")
        assert page["pending_labels"] == 0
        assert page["services"]["shop"]["audited"] == len(audited)
    finally:
        await service.shutdown(30)


def _post_raw(port: int, body: bytes) -> tuple[int, Any]:
    """POST `body` as is to the label endpoint: the status and the JSON answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/audit/labels", data=body, headers=BEARER
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_a_body_that_is_not_json_or_too_large_is_refused_and_counted() -> None:
    config = _labelled()
    service = Service(config, with_receivers=False)
    await service.start()
    try:
        assert service.http is not None and service.http.bound_port is not None
        port = service.http.bound_port
        status, answer = await asyncio.to_thread(_post_raw, port, b'{"request_id": "a", "la')
        assert status == 400 and answer["error"].startswith("body is not JSON")
        big = json.dumps([{"request_id": "x" * 100, "label": "pass"}] * 20_000).encode()
        status, answer = await asyncio.to_thread(_post_raw, port, big)
        assert status == 413 and answer["error"] == "body over 1048576 bytes"
        metrics = await _get(port, "/metrics")
        assert _sample(metrics, "audit_labels_total", source="http", outcome="malformed") == 2
        # The endpoint still takes labels after both.
        status, answer = await asyncio.to_thread(_post_raw, port, b"[]")
        assert (status, answer) == (200, {"joined": 0, "refused": []})
    finally:
        await service.shutdown(30)


async def test_a_restarted_monitor_keeps_its_audit_window(tmp_path: Path) -> None:
    """With `alerts.state_file`, the audit window and the records awaiting a label are kept
    in `<state_file>.audit`: after a restart `GET /audit` shows the same figures and a
    label for a record evaluated before it joins."""
    records = _records(24)
    audited = _audited(records)
    config = _labelled(alerts={"state_file": str(tmp_path / "alerts.state")})
    service = Service(config, with_receivers=False)
    await service.start()
    try:
        port = await _evaluated(service, records)
        half = audited[: len(audited) // 2]
        await _get(port, "/audit/labels", [{"request_id": r, "label": "fail"} for r in half])
        before = await _get(port, "/audit")
    finally:
        await service.shutdown(30)
    assert before["pending_labels"] == len(audited) - len(half)
    restarted = Service(config, with_receivers=False)
    await restarted.start()
    try:
        assert restarted.http is not None and restarted.http.bound_port is not None
        port = restarted.http.bound_port
        assert await _get(port, "/audit") == before
        rest = [{"request_id": r, "label": "pass"} for r in audited[len(half) :]]
        answer = await _get(port, "/audit/labels", rest)
        assert answer == {"joined": len(rest), "refused": []}
        shop = (await _get(port, "/audit"))["services"]["shop"]
        assert (shop["evaluated"], shop["audited"]) == (len(records), len(audited))
        metrics = await _get(port, "/metrics")
        assert _sample(metrics, "audit_state_loads_total", outcome="loaded") == 1
    finally:
        await restarted.shutdown(30)


@pytest.mark.e2e
@pytest.mark.timeout(900)
async def test_a_real_judge_as_reference_gives_the_estimate(
    model_server: str,  # noqa: F811  (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fact_check` under structured output answers Yes or No on every call, so each
    audited record gets the reference's verdict; the judge scores the audited share only
    (its evaluations are counted)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    records = _records(8)
    audited = _audited(records)
    assert 2 <= len(audited) <= 6
    config = _config(
        {"evaluator": "local_groundedness", "reference": "fact_check"},
        [{"name": "local_groundedness"}, {"name": "fact_check"}],
        judge={
            "model": MODEL,
            "api_base": model_server,
            "structured_output": "on",
            "max_output_tokens": 32,
            "max_concurrency": 1,
            "retries": 0,
            "timeout_s": 120,
        },
    )
    service = Service(config, with_receivers=False)
    await service.start()
    try:
        port = await _evaluated(service, records)
        metrics = await _get(port, "/metrics")
        shop = {"service": "shop", "evaluator": "local_groundedness"}
        assert _sample(metrics, "audited_records", **shop) == len(audited)
        bounds = [
            _sample(metrics, "defect_rate_estimate", **shop, bound=b)
            for b in ("lower", "estimate", "upper")
        ]
        assert None not in bounds and bounds == sorted(bounds), bounds  # type: ignore[type-var]
        # The judge ran on the audited share only, and each run gave a verdict.
        judged = _total(metrics, "evaluations_total", evaluator="fact_check")
        assert judged == len(audited), metrics
        assert _total(metrics, "audit_records_total", outcome="reference_error") == 0
        page = await _get(port, "/audit")
        assert page["services"]["shop"]["evaluated"] == len(records)
    finally:
        await service.shutdown(60)
