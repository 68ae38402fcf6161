"""Reading an app's own verdicts from its trace (`monitor.extraction.read_verdicts`): each
joins the record whose span carries it or is its nearest ancestor; a guardrail's findings
on several categories add up, worst first; what cannot be read, the monitor's own events
and verdicts of a trace with no record are counted by reason, never taken."""

from __future__ import annotations

from typing import Any

from monitor.extraction import read_verdicts
from monitor.records import RagRecord
from monitor.spans import Span, SpanEvent

TRACE = "ab" * 16
EVAL = "gen_ai.evaluation.result"


def _span(
    span_id: str, parent: str = "", events: list[SpanEvent] | None = None, **attrs: Any
) -> Span:
    return Span(
        TRACE,
        span_id * 8,
        parent * 8 if parent else "",
        "s",
        1,
        2,
        attributes=attrs,
        events=events or [],
        service="svc",
    )


def _event(at: int, attributes: dict[str, Any], name: str = EVAL) -> SpanEvent:
    return SpanEvent(name, at, attributes)


def _record(span_id: str) -> RagRecord:
    return RagRecord(request_id=span_id, trace_id=TRACE, span_id=span_id * 8, service="s")


def test_each_verdict_joins_the_record_whose_span_is_its_nearest_ancestor() -> None:
    """Two requests in one trace (a conversation's turns under one root): the judge's
    events on their model calls join their own request's record."""
    first = _event(5, {"gen_ai.evaluation.name": "忠实度", "gen_ai.evaluation.score.label": "pass"})
    second = _event(
        6, {"gen_ai.evaluation.name": "忠实度", "gen_ai.evaluation.score.label": "fail"}
    )
    spans = [
        _span("01"),
        _span("02", "01"),
        _span("03", "02", [first]),
        _span("04", "01"),
        _span("05", "04", [second]),
    ]
    verdicts = read_verdicts(spans, [_record("02"), _record("04")])
    assert [{n: r.passed for n, r in v.items()} for v in verdicts.by_record] == [
        {"external:忠实度": True},
        {"external:忠实度": False},
    ]
    assert not verdicts.refused
    assert verdicts.senders == [{"external:忠实度": "svc"}, {"external:忠实度": "svc"}]


def test_a_guardrails_findings_on_several_categories_add_up_worst_first() -> None:
    findings = [
        _event(
            t,
            {
                "gen_ai.security.guardrail.name": "shield",
                "gen_ai.security.verdict.type": verdict,
                "gen_ai.security.risk.category": category,
            },
            "gen_ai.security.finding",
        )
        for t, verdict, category in (
            (3, "warn", "pii"),
            (4, "deny", "jailbreak"),
            (5, "allow", "pii"),
        )
    ]
    (only,) = read_verdicts([_span("01", events=findings)], [_record("01")]).by_record
    shield = only["guardrail:shield"]
    assert (shield.label, shield.passed) == ("blocked", False)
    assert shield.safety == {"pii": "medium", "jailbreak": "high"}


def test_a_guardrail_spans_findings_are_read_within_it() -> None:
    """A guardrail span names the guardrail, its decision and version; its findings (events
    of its vocabulary) name only a category each, or their own decision: each finding is a
    verdict read within the span, the span none of its own. A guardrail span without
    findings is one verdict."""
    guard = {
        "gen_ai.security.guardrail.name": "护栏",
        "gen_ai.security.verdict.type": "deny",
        "gen_ai.security.guardrail.version": "v2",
    }
    findings = [
        _event(3, {"gen_ai.security.risk.category": "個人情報"}, "gen_ai.security.finding"),
        _event(
            4,
            {"gen_ai.security.risk.category": "jailbreak", "gen_ai.security.verdict.type": "warn"},
            "gen_ai.security.finding",
        ),
    ]
    spans = [
        _span("01"),
        _span("02", "01", findings, **guard),
        _span("03"),
        _span("04", "03", [], **{**guard, "gen_ai.security.verdict.type": "allow"}),
    ]
    verdicts = read_verdicts(spans, [_record("01"), _record("03")])
    found, clean = (v["guardrail:护栏"] for v in verdicts.by_record)
    assert (found.label, found.revision) == ("blocked", "v2")
    assert found.safety == {"個人情報": "high", "jailbreak": "medium"}
    assert (clean.label, clean.revision, clean.safety) == (
        "passed",
        "v2",
        {"unspecified": "very_low"},
    )
    assert not verdicts.refused


def test_what_is_not_taken_is_counted_by_reason() -> None:
    unreadable = _event(
        3, {"gen_ai.evaluation.name": "tone", "gen_ai.evaluation.score.label": "très bien"}
    )
    on_a_scale = _event(4, {"gen_ai.evaluation.name": "tone", "gen_ai.evaluation.score.value": 4.0})
    own = _event(5, {"gen_ai.evaluation.name": "local_safety", "rag_monitor.version": "0.1.0"})
    nameless = _event(6, {"gen_ai.evaluation.score.label": "pass"})
    spans = [_span("01", events=[unreadable, on_a_scale, own, nameless])]
    verdicts = read_verdicts(spans, [_record("01")])
    assert verdicts.by_record == [{}]
    assert verdicts.refused == {"unreadable": 3, "own": 1}
    passed = _event(7, {"gen_ai.evaluation.name": "tone", "gen_ai.evaluation.score.label": "pass"})
    none = read_verdicts([_span("01", events=[passed])], [])
    assert none.by_record == [] and none.refused == {"no_record": 1}
