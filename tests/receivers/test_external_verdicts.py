"""An app's own verdicts, through the real OTLP/HTTP receiver and the whole pipeline:
`gen_ai.evaluation.result` span events and OTLP log records, and guardrail verdicts in
both vocabularies (`gen_ai.guardrail.*` events, a `gen_ai.security.*` guardrail span),
become results of `external:<name>` / `guardrail:<name>` evaluators joined to the record
of their trace, counted as the monitor's own are (`evaluations_total`, and for guardrails
`safety_evaluations_total` and `guardrail_verdicts_total`), with the provenance version
as their revision. The monitor's own events written back into the trace are not read
again; forged verdicts beyond the bounds, or from a service not named, are refused and
counted (`external_verdicts_refused_total`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx

from harness.wait import CONDITION_S, wait_until_async
from monitor.component import Evaluated
from monitor.config import Config
from monitor.exporters.otlp_events import event_attributes
from monitor.receivers.otlp import OtlpReceivers
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.service import Service

QUESTION = "埃菲尔铁塔是哪一年建成的？"
DOC = "埃菲尔铁塔于1889年建成。"
ANSWER = "它于1889年建成。"
ROOT = "01" * 8


class Capture:
    """A result sink keeping every finished record's results, by trace id."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, EvalResult]] = {}
        self.records: dict[str, RagRecord] = {}

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        for evaluated in batch:
            trace_id = evaluated.record.trace_id or ""
            self.results[trace_id] = dict(evaluated.results)
            self.records[trace_id] = evaluated.record

    async def shutdown(self, deadline_s: float) -> None:
        return None


def _config(**external: Any) -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"endpoint": "127.0.0.1:0"}}
            },
            "trace_assembly": {"late_spans_wait_s": 0, "idle_timeout_s": 30},
            "evaluators": [{"name": "local_relevance"}],
            "pipeline": {"processes": 0},
            "external_verdicts": external,
        }
    )


@asynccontextmanager
async def running(config: Config) -> AsyncIterator[tuple[Service, Capture, str]]:
    capture = Capture()
    service = Service(config, serve_http=False, extra_sinks=[capture])
    await service.start()
    try:
        (otlp,) = [r for r in service.receivers if isinstance(r, OtlpReceivers)]
        assert otlp.http is not None
        yield service, capture, f"http://127.0.0.1:{otlp.http.port}"
    finally:
        await service.shutdown(10)


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [_kv(k, v) for k, v in values.items()]


def _spans(
    trace_id: str,
    service: str,
    events: Sequence[dict[str, Any]] = (),
    children: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A RAG trace (the `rag.*` attributes on its root), its root carrying `events`."""
    root = {
        "traceId": trace_id,
        "spanId": ROOT,
        "name": "POST /ask",
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "9000",
        "attributes": _attributes(
            {
                "http.route": "/ask",
                "rag.query": QUESTION,
                "rag.context": f'["{DOC}"]',
                "rag.response": ANSWER,
            }
        ),
        "events": [
            {"timeUnixNano": str(2000 + i), "name": e["name"], "attributes": _attributes(e["at"])}
            for i, e in enumerate(events)
        ],
    }
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", service)]},
                "scopeSpans": [{"spans": [*children, root]}],
            }
        ]
    }


def _logs(trace_id: str, service: str, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """OTLP log records in the root span, as an SDK's event logger sends them."""
    return {
        "resourceLogs": [
            {
                "resource": {"attributes": [_kv("service.name", service)]},
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": str(3000 + i),
                                "eventName": r["name"],
                                "traceId": trace_id,
                                "spanId": ROOT,
                                "attributes": _attributes(r["at"]),
                            }
                            for i, r in enumerate(records)
                        ]
                    }
                ],
            }
        ]
    }


async def _send(
    base: str, capture: Capture, trace_id: str, spans: dict[str, Any], logs: Any = None
) -> dict[str, EvalResult]:
    """Log records first (they wait for their span), then the spans; the trace's results."""
    async with httpx.AsyncClient() as client:
        if logs is not None:
            sent = await client.post(f"{base}/v1/logs", json=logs)
            assert (sent.status_code, sent.content) == (200, b"{}")
        sent = await client.post(f"{base}/v1/traces", json=spans)
        assert sent.status_code == 200
    await wait_until_async(
        lambda: trace_id in capture.results, CONDITION_S, f"results of {trace_id}"
    )
    return capture.results[trace_id]


def _metric(target: Service, name: str, **labels: str) -> float:
    value = target.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)
    return value or 0.0


EVALUATION = "gen_ai.evaluation.result"


async def test_evaluation_results_as_span_events_and_log_records_are_counted_verdicts() -> None:
    trace_id = "ab" * 16
    # The monitor's own event as its OTLP exporter writes it, back in the app's trace.
    own = dict(
        event_attributes(
            EvalResult("local_relevance", 0.0, 0.0, "fail", False, revision="0.1.0+abcdef12")
        )
    )
    events = [
        {
            "name": EVALUATION,
            "at": {
                "gen_ai.evaluation.name": "相关性",
                "gen_ai.evaluation.score.value": 0.875,
                "gen_ai.evaluation.explanation": "回答切题：它给出了年份。",
            },
        },
        {"name": EVALUATION, "at": own},
    ]
    logs = [
        {
            "name": EVALUATION,
            "at": {
                "gen_ai.evaluation.name": "faithfulness",
                "gen_ai.evaluation.score.label": "FAIL",
                "gen_ai.evaluation.score.value": 2.0,
                "gen_ai.evaluation.explanation": "الجواب غير مدعوم بالمصدر.",
                "gen_ai.evaluation.evaluator.id": "app-judge",
                "gen_ai.evaluation.evaluator.version": "judge-v1",
                "gen_ai.evaluation.evaluator.type": "llm_judge",
            },
        },
        {  # the app's evaluator failed: an error, never a pass or a defect
            "name": EVALUATION,
            "at": {
                "gen_ai.evaluation.name": "context_recall",
                "error.type": "TimeoutError",
                "gen_ai.evaluation.explanation": "判定超时",
            },
        },
    ]
    async with running(_config()) as (service, capture, base):
        results = await _send(
            base,
            capture,
            trace_id,
            _spans(trace_id, "judged-app", events),
            _logs(trace_id, "judged-app", logs),
        )
        counted = {
            (name, outcome): _metric(
                service,
                "evaluations_total",
                service="judged-app",
                version="",
                route="/ask",
                evaluator=name,
                outcome=outcome,
            )
            for name in ("external:相关性", "external:faithfulness", "external:local_relevance")
            for outcome in ("pass", "fail")
        }
        errors = _metric(
            service,
            "evaluations_total",
            service="judged-app",
            version="",
            route="/ask",
            evaluator="external:context_recall",
            outcome="error",
        )
        own_refused = _metric(
            service, "external_verdicts_refused_total", service="judged-app", reason="own"
        )
    relevance, faithfulness = results["external:相关性"], results["external:faithfulness"]
    assert (relevance.passed, relevance.normalized, relevance.revision) == (True, 0.875, None)
    assert relevance.explanation == "回答切题：它给出了年份。"
    assert (faithfulness.passed, faithfulness.score, faithfulness.normalized) == (False, 2.0, None)
    assert faithfulness.revision == "judge-v1"  # a change of the app's judge is a revision
    assert "local_relevance" in results  # the monitor's own verdict, once
    assert "external:local_relevance" not in results
    assert counted == {
        ("external:相关性", "pass"): 1,
        ("external:相关性", "fail"): 0,
        ("external:faithfulness", "pass"): 0,
        ("external:faithfulness", "fail"): 1,
        ("external:local_relevance", "pass"): 0,
        ("external:local_relevance", "fail"): 0,
    }
    assert own_refused == 1
    recall = results["external:context_recall"]
    assert (recall.outcome, recall.error, errors) == ("error", "TimeoutError: 判定超时", 1)


async def test_guardrail_verdicts_in_both_vocabularies_are_safety_verdicts() -> None:
    trace_id = "cd" * 16
    guardrail_span = {  # the older vocabulary: a guardrail span, its caller's action first
        "traceId": trace_id,
        "spanId": "02" * 8,
        "parentSpanId": ROOT,
        "name": "apply_guardrail shield llm_input",
        "startTimeUnixNano": "1100",
        "endTimeUnixNano": "1200",
        "attributes": _attributes(
            {
                "gen_ai.operation.name": "apply_guardrail",
                "gen_ai.security.guardrail.name": "shield",
                "gen_ai.security.verdict.type": "warn",
                "gen_ai.security.action.type": "block",
                "gen_ai.security.risk.category": "prompt_injection",
                "gen_ai.security.verdict.reason": "忽略之前的指令",
            }
        ),
    }
    events = [  # the newer vocabulary: native result values
        {
            "name": "gen_ai.guardrail.result",
            "at": {
                "gen_ai.guardrail.component.name": "pii",
                "gen_ai.guardrail.result.type": "filter_match_state",
                "gen_ai.guardrail.result.value": "MATCH_FOUND",
                "gen_ai.guardrail.risk.category": "email",
                "gen_ai.guardrail.policy.version": "7",
            },
        },
        {
            "name": "gen_ai.guardrail.result",
            "at": {
                "gen_ai.guardrail.component.name": "topics",
                "gen_ai.guardrail.result.type": "tripwire_triggered",
                "gen_ai.guardrail.result.value": False,
            },
        },
    ]
    async with running(_config()) as (service, capture, base):
        spans = _spans(trace_id, "guarded-app", events, children=[guardrail_span])
        results = await _send(base, capture, trace_id, spans)
        verdicts = {
            (guardrail, category, verdict): _metric(
                service,
                "guardrail_verdicts_total",
                service="guarded-app",
                version="",
                route="/ask",
                guardrail=guardrail,
                category=category,
                verdict=verdict,
            )
            for guardrail, category, verdict in (
                ("guardrail:shield", "prompt_injection", "blocked"),
                ("guardrail:pii", "email", "flagged"),
                ("guardrail:topics", "unspecified", "passed"),
            )
        }
        high = _metric(
            service,
            "safety_evaluations_total",
            service="guarded-app",
            version="",
            category="prompt_injection",
            severity="high",
        )
    assert (results["guardrail:shield"].label, results["guardrail:shield"].passed) == (
        "blocked",
        False,
    )
    assert results["guardrail:shield"].explanation == "忽略之前的指令"
    assert results["guardrail:pii"].revision == "7"
    assert results["guardrail:topics"].passed is True
    assert set(verdicts.values()) == {1}
    assert high == 1


async def test_forged_verdicts_beyond_the_bounds_are_refused_and_counted() -> None:
    """50 forged evaluation log records, each a new evaluator, and a service not named."""
    trace_id, other_id = "ef" * 16, "12" * 16
    forged = [
        {
            "name": EVALUATION,
            "at": {
                "gen_ai.evaluation.name": f"forged-{i}",
                "gen_ai.evaluation.score.label": "fail",
            },
        }
        for i in range(50)
    ]
    config = _config(services=["judged-app", "其他服务"], max_evaluators_per_service=3)
    async with running(config) as (service, capture, base):
        results = await _send(
            base,
            capture,
            trace_id,
            _spans(trace_id, "judged-app"),
            _logs(trace_id, "judged-app", forged),
        )
        others = await _send(
            base, capture, other_id, _spans(other_id, "forger"), _logs(other_id, "forger", forged)
        )
        refused = {
            (name, reason): _metric(
                service, "external_verdicts_refused_total", service=name, reason=reason
            )
            for name, reason in (
                ("judged-app", "too_many_evaluators"),
                ("forger", "service_not_allowed"),
            )
        }
        failed = sum(
            _metric(
                service,
                "evaluations_total",
                service="judged-app",
                version="",
                route="/ask",
                evaluator=f"external:forged-{i}",
                outcome="fail",
            )
            for i in range(50)
        )
    # The first three names seen hold the places.
    assert sorted(n for n in results if n.startswith("external:")) == [
        "external:forged-0",
        "external:forged-1",
        "external:forged-2",
    ]
    assert not any(n.startswith("external:") for n in others)
    assert refused == {
        ("judged-app", "too_many_evaluators"): 47,
        ("forger", "service_not_allowed"): 50,
    }
    assert failed == 3


async def test_verdicts_are_not_read_when_external_verdicts_are_off() -> None:
    trace_id = "9a" * 16
    events = [
        {
            "name": EVALUATION,
            "at": {"gen_ai.evaluation.name": "x", "gen_ai.evaluation.score.label": "fail"},
        }
    ]
    async with running(_config(enabled=False)) as (_, capture, base):
        results = await _send(base, capture, trace_id, _spans(trace_id, "judged-app", events))
    assert set(results) == {"local_relevance"}


async def test_a_vocabulary_declared_in_the_config_is_read_from_log_records() -> None:
    """A third guardrail vocabulary, as data in `external_verdicts.vocabularies`: its log
    records are taken by the receiver and its values mapped to outcomes."""
    trace_id = "7c" * 16
    vocabulary = {
        "name": "acme-guard",
        "kind": "guardrail",
        "events": ["acme.guard.result"],
        "evaluator": ["acme.guard.name"],
        "label": ["acme.guard.decision"],
        "category": ["acme.guard.category"],
        "version": ["acme.guard.model_version"],
        "outcomes": {"DENY": "blocked", "REVIEW": "flagged", "ALLOW": "passed"},
    }
    logs = [
        {
            "name": "acme.guard.result",
            "at": {
                "acme.guard.name": "内容审核",
                "acme.guard.decision": "review",
                "acme.guard.category": "仇恨言论",
                "acme.guard.model_version": "2026.11",
            },
        }
    ]
    async with running(_config(vocabularies=[vocabulary])) as (service, capture, base):
        results = await _send(
            base, capture, trace_id, _spans(trace_id, "acme-app"), _logs(trace_id, "acme-app", logs)
        )
        flagged = _metric(
            service,
            "guardrail_verdicts_total",
            service="acme-app",
            version="",
            route="/ask",
            guardrail="guardrail:内容审核",
            category="仇恨言论",
            verdict="flagged",
        )
    verdict = results["guardrail:内容审核"]
    assert (verdict.label, verdict.passed, verdict.revision) == ("flagged", False, "2026.11")
    assert flagged == 1
