"""Judge evaluators inside the running service: wiring, metrics, escalation.

The remote judge model is the only test double (`harness/judge_stub.py`, an
OpenAI-compatible HTTP server on 127.0.0.1:0); the service, its evaluation stage, the
embedded `local_groundedness` detector and the Prometheus metrics sink are real.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio

from harness.judge_stub import Reply, StubJudge
from monitor.component import Delivery, Evaluated
from monitor.config import Config
from monitor.judge.client import JudgeClient
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.service import Service
from tests.judge.test_judge_evaluators import KEY_ENV, MODEL, RECORD, SECRET

pytestmark = pytest.mark.asyncio


class _Collect:
    def __init__(self) -> None:
        self.items: list[dict[str, EvalResult]] = []
        self.by_id: dict[str, dict[str, EvalResult]] = {}

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        for evaluated in batch:
            self.items.append(dict(evaluated.results))
            self.by_id[evaluated.record.request_id] = dict(evaluated.results)

    async def shutdown(self, deadline_s: float) -> None:
        return None


@pytest_asyncio.fixture
async def stub() -> AsyncIterator[StubJudge]:
    async with StubJudge() as server:
        yield server


def _config(stub: StubJudge, evaluators: list[dict[str, Any]]) -> Config:
    return Config.model_validate(
        {
            "judge": stub.judge_section(MODEL, KEY_ENV),
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "evaluators": evaluators,
        }
    )


async def _run(config: Config, records: list[RagRecord]) -> tuple[Service, _Collect]:
    sink = _Collect()
    service = Service(config, serve_http=False, with_receivers=False, extra_sinks=[sink])
    await service.start()
    # As replay does: records enter through the trace stage, which samples them.
    assert await service.trace.put([Delivery("test", records=list(records))])
    await service.shutdown(30)
    return service, sink


def _metric(svc: Service, name: str, **labels: str) -> float:
    return svc.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


async def test_service_builds_one_judge_client_only_when_needed(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    local = Service(_config(stub, [{"name": "f1"}]), serve_http=False, with_receivers=False)
    assert local.judge is None
    judged = Service(
        _config(stub, [{"name": "violence"}, {"name": "jailbreak"}]),
        serve_http=False,
        with_receivers=False,
    )
    assert isinstance(judged.judge, JudgeClient)
    # Series for the configured model exist (at zero) before the first call.
    registry = judged.telemetry.registry
    for outcome in ("ok", "error", "timeout", "rate_limited", "circuit_open"):
        labels = {"model": MODEL, "outcome": outcome}
        assert registry.get_sample_value("rag_monitor_judge_requests_total", labels) == 0


async def test_safety_verdicts_reach_the_metrics(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = _config(
        stub, [{"name": "violence"}, {"name": "jailbreak", "severity_threshold": "high"}]
    )
    stub.default = lambda got: Reply(
        content='{"severity": 4, "reason": "describes a fight"}'
        if "violent content" in got.prompt
        else "Answer: NO"
    )
    service, sink = await _run(config, [RECORD])
    assert sink.items[0]["violence"].severity == "medium"
    assert (
        _metric(
            service,
            "safety_evaluations_total",
            service="unknown",
            version="",
            category="violence",
            severity="medium",
        )
        == 1
    )
    assert (
        _metric(
            service,
            "safety_evaluations_total",
            service="unknown",
            version="",
            category="jailbreak",
            severity="very_low",
        )
        == 1
    )
    labels = {"service": "unknown", "version": "", "route": ""}
    assert (
        _metric(service, "evaluations_total", **labels, evaluator="violence", outcome="fail") == 1
    )
    assert (
        _metric(service, "evaluations_total", **labels, evaluator="jailbreak", outcome="pass") == 1
    )


async def test_judge_errors_are_counted_as_errors_not_defects(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    stub.default = Reply(status=500)
    service, sink = await _run(_config(stub, [{"name": "self_harm"}]), [RECORD])
    assert sink.items[0]["self_harm"].outcome == "error"
    labels = {"service": "unknown", "version": "", "route": "", "evaluator": "self_harm"}
    assert _metric(service, "evaluations_total", **labels, outcome="error") == 1
    assert _metric(service, "evaluations_total", **labels, outcome="fail") == 0
    for severity in ("very_low", "low", "medium", "high"):
        assert (
            _metric(
                service,
                "safety_evaluations_total",
                service="unknown",
                category="self_harm",
                severity=severity,
            )
            == 0
        )
    assert _metric(service, "judge_requests_total", model=MODEL, outcome="error") == 1


async def test_escalation_sends_only_unsure_records_to_the_judge(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    supported = RECORD
    invented = RECORD.model_copy(
        update={
            "request_id": "r2",
            "response": "It opened in 1850, designed by Gustave Eiffel, with 12 lanes.",
        }
    )
    _, probe = await _run(_config(stub, [{"name": "local_groundedness"}]), [supported, invented])
    scores = [
        probe.by_id[r.request_id]["local_groundedness"].normalized for r in (supported, invented)
    ]
    assert scores[0] is not None and scores[1] is not None and scores[0] != scores[1]
    unsure = 0 if scores[0] < scores[1] else 1  # the lower-scored record falls in the band
    cut = (scores[0] + scores[1]) / 2
    config = _config(
        stub,
        [
            {"name": "local_groundedness"},
            {"name": "groundedness", "escalate_from": "local_groundedness", "band": [0.0, cut]},
        ],
    )
    service, sink = await _run(config, [supported, invented])
    assert len(stub.received) == 1
    assert str([supported, invented][unsure].response) in stub.received[0].prompt
    escalated = ["groundedness" in sink.by_id[r.request_id] for r in (supported, invented)]
    assert escalated == [i == unsure for i in range(2)]
    decisions = {
        d: _metric(
            service,
            "sampling_decisions_total",
            service="unknown",
            evaluator="groundedness",
            decision=d,
        )
        for d in ("sampled", "not_escalated")
    }
    assert decisions == {"sampled": 1, "not_escalated": 1}


async def test_evaluator_with_its_own_endpoint(
    stub: StubJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hosted judge for groundedness and a local Ollama MiniCheck for fact_check."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    async with StubJudge(Reply(content="Yes", completion_tokens=1)) as ollama:
        config = _config(
            stub,
            [
                {"name": "groundedness"},
                {
                    "name": "fact_check",
                    "model": "ollama/bespoke-minicheck",
                    "api_base": ollama.ollama_base,
                },
            ],
        )
        service, sink = await _run(config, [RECORD])
    assert sink.items[0]["fact_check"].label == "supported"
    assert sink.items[0]["groundedness"].score == 4
    assert [r.path for r in ollama.received] == ["/api/generate"]
    assert [r.path for r in stub.received] == ["/v1/chat/completions"]
    assert stub.received[0].headers["Authorization"] == f"Bearer {SECRET}"
    # The hosted judge's key is not sent to the evaluator's own endpoint.
    assert SECRET not in str(ollama.received[0].headers)
    ok = {"outcome": "ok"}
    assert _metric(service, "judge_requests_total", model="ollama/bespoke-minicheck", **ok) == 1
