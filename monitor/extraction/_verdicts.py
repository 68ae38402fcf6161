"""An app's own verdicts on its trace — evaluation results and guardrail verdicts other tools
wrote into it — read as results of evaluators named by the sender, joined to the record of
the trace they judge. Where they travel and what their values mean is the verdict
vocabularies' (`monitor/conventions/_verdicts.py`, and a user's `external_verdicts.
vocabularies`); this reads those entries and knows no tool.

A verdict rides a span event, an OTLP log record (an event span: `LOG_EVENT_KEY`, a child
of the span it names) or a guardrail span's own attributes. A guardrail span's events of
its own vocabulary are its findings: each is one verdict, read with the span's attributes
beneath the event's (the span names the guardrail and its decision, a finding its risk
category), and the span gives none of its own. It belongs to the record whose
span is the carrier's span or its nearest ancestor, else to the trace's first record. An
event the monitor wrote itself (`OWN_MARK`) is never read back. Per record and evaluator
the latest verdict stands. What could not be read is counted by reason (`OWN`,
`UNREADABLE`, `NO_RECORD`); who may send them and how many is the evaluation stage's to
decide (`monitor/processors/evaluation/_external.py`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter as Tally
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.config import EXTERNAL_PREFIX, GUARDRAIL_PREFIX, VerdictVocabulary
from monitor.conventions import (
    BLOCKED,
    EVALUATION,
    FLAGGED,
    OWN_MARK,
    PASSED,
    VOCABULARIES,
    Vocabulary,
)
from monitor.records import RagRecord
from monitor.results import SEVERITIES, EvalResult, Severity
from monitor.spans import LOG_EVENT_KEY, Span, SpanEvent

# Why a verdict found in a trace was not taken, before the stage's screen.
OWN = "own"  # the monitor's own event, written back into the trace
UNREADABLE = "unreadable"  # no evaluator name, or neither a verdict label nor a usable score
NO_RECORD = "no_record"  # the trace gave no record to join it to
# A guardrail's outcome as a severity, so that its categories count as safety verdicts.
_SEVERITY: dict[str, Severity] = {BLOCKED: "high", FLAGGED: "medium", PASSED: "very_low"}
OUTCOME_OF_SEVERITY = {severity: outcome for outcome, severity in _SEVERITY.items()}
# Longest explanation kept (the OTLP events the monitor writes keep as much).
_MAX_EXPLANATION = 2000
UNCATEGORIZED = "unspecified"


@dataclass(frozen=True, slots=True)
class TraceVerdicts:
    """A trace's verdicts: per record, by evaluator, and who sent each (the `service.name`
    of the span or log record that carried it); the ones not taken, by reason."""

    by_record: list[dict[str, EvalResult]]
    refused: Tally[str] = field(default_factory=Tally)
    senders: list[dict[str, str]] = field(default_factory=list)


def from_config(entries: Sequence[VerdictVocabulary]) -> tuple[Vocabulary, ...]:
    """The user's vocabularies (`external_verdicts.vocabularies`), read before the shipped
    ones."""
    return tuple(
        Vocabulary(
            entry.name,
            entry.kind,
            events=frozenset(entry.events),
            span_key=entry.span_key,
            evaluator=tuple(entry.evaluator),
            score=tuple(entry.score),
            label=tuple(entry.label),
            explanation=tuple(entry.explanation),
            category=tuple(entry.category),
            version=tuple(entry.version),
            error=tuple(entry.error),
            passing=frozenset(v.lower() for v in entry.passing),
            failing=frozenset(v.lower() for v in entry.failing),
            outcomes={k.lower(): v for k, v in entry.outcomes.items()},
        )
        for entry in entries
    )


def read_verdicts(
    spans: Sequence[Span],
    records: Sequence[RagRecord],
    user: Sequence[Vocabulary] = (),
    threshold: float = 0.5,
) -> TraceVerdicts:
    """The verdicts `spans` carry, joined to `records` (see the module docstring)."""
    vocabularies = (*user, *VOCABULARIES)
    by_event: dict[str, Vocabulary] = {}
    for vocabulary in vocabularies:
        for name in vocabulary.events:
            by_event.setdefault(name, vocabulary)
    on_spans = [v for v in vocabularies if v.span_key is not None]
    found: list[tuple[int, str, str, EvalResult]] = []  # (time, carrier span, sender, verdict)
    refused: Tally[str] = Tally()
    for span in spans:
        from_log = span.attribute(LOG_EVENT_KEY) is not None
        where = span.parent_span_id if from_log else span.span_id
        guardrail = None if from_log else _guardrail_of(span, on_spans)
        findings = 0
        for event in span.events:
            carried = by_event.get(event.name)
            if carried is None:
                continue
            attributes = _with_body(event.attributes)
            if carried is guardrail:  # a finding of this guardrail span: read within it
                attributes = {**span.attributes, **attributes}
                findings += 1
            _take(carried, attributes, threshold, found, refused, where, span, event)
        if guardrail is not None and not findings:
            _take(guardrail, span.attributes, threshold, found, refused, where, span)
    by_record: list[dict[str, EvalResult]] = [{} for _ in records]
    senders: list[dict[str, str]] = [{} for _ in records]
    if found and not records:
        refused[NO_RECORD] += len(found)
    elif found:
        parents = {span.span_id: span.parent_span_id for span in spans}
        record_at = {r.span_id: i for i, r in enumerate(records) if r.span_id}
        for _, carrier, sender, result in sorted(found, key=lambda f: f[0]):
            at = _record_of(carrier, parents, record_at)
            by_record[at][result.name] = _merged(by_record[at].get(result.name), result)
            senders[at][result.name] = sender
    return TraceVerdicts(by_record, refused, senders)


def _guardrail_of(span: Span, on_spans: Sequence[Vocabulary]) -> Vocabulary | None:
    """The vocabulary whose `span_key` `span` carries: a guardrail span, one verdict."""
    for vocabulary in on_spans:
        assert vocabulary.span_key is not None
        if span.attribute(vocabulary.span_key) is not None:
            return vocabulary
    return None


def _merged(before: EvalResult | None, result: EvalResult) -> EvalResult:
    """The later verdict of one evaluator on one record; a guardrail's verdicts on several
    categories add up, each category keeping its worst outcome, the verdict the worst."""
    if before is None or before.safety is None or result.safety is None:
        return result
    rank = SEVERITIES.index
    safety = dict(before.safety)
    for category, severity in result.safety.items():
        if rank(severity) >= rank(safety.get(category, "very_low")):
            safety[category] = severity
    worst = max(safety.values(), key=rank)
    outcome = OUTCOME_OF_SEVERITY[worst]
    return dataclasses.replace(result, label=outcome, passed=outcome == PASSED, safety=safety)


def _take(
    vocabulary: Vocabulary,
    attributes: Mapping[str, Any],
    threshold: float,
    found: list[tuple[int, str, str, EvalResult]],
    refused: Tally[str],
    where: str,
    span: Span,
    event: SpanEvent | None = None,
) -> None:
    if OWN_MARK in attributes:
        refused[OWN] += 1
        return
    result = _result(vocabulary, attributes, threshold)
    if result is None:
        refused[UNREADABLE] += 1
        return
    when = event.time_unix_nano if event is not None else span.end_unix_nano
    found.append((when, where, span.service, result))


def _with_body(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event's attributes, with the members of its body when the body is an object (a
    log record may carry its fields there)."""
    body = attributes.get("body")
    if isinstance(body, dict):
        return {**{k: v for k, v in body.items() if isinstance(k, str)}, **attributes}
    return attributes


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _result(
    vocabulary: Vocabulary, attributes: Mapping[str, Any], threshold: float
) -> EvalResult | None:
    name = _text(_first(attributes, vocabulary.evaluator))
    if not name or not name.strip():
        return None
    score = _number(_first(attributes, vocabulary.score))
    label = _text(_first(attributes, vocabulary.label))
    explanation = _text(_first(attributes, vocabulary.explanation))
    if explanation is not None:
        explanation = explanation[:_MAX_EXPLANATION]
    version = _text(_first(attributes, vocabulary.version))
    error = _text(_first(attributes, vocabulary.error))
    if error is not None:  # the app's evaluator failed: an error, never a pass or a defect
        prefix = EXTERNAL_PREFIX if vocabulary.kind == EVALUATION else GUARDRAIL_PREFIX
        detail = f"{error}: {explanation}" if explanation else error
        return EvalResult(name=f"{prefix}{name}", error=detail, revision=version)
    if vocabulary.kind == EVALUATION:
        folded = label.lower() if label is not None else None
        normalized = score if score is not None and 0.0 <= score <= 1.0 else None
        if folded is not None and folded in vocabulary.passing:
            passed = True
        elif folded is not None and folded in vocabulary.failing:
            passed = False
        elif normalized is not None:
            passed = normalized >= threshold
        else:
            return None
        return EvalResult(
            name=f"{EXTERNAL_PREFIX}{name}",
            score=score,
            normalized=normalized,
            label=label if label is not None else ("pass" if passed else "fail"),
            passed=passed,
            explanation=explanation,
            revision=version,
        )
    outcome = vocabulary.outcomes.get(label.lower()) if label is not None else None
    if outcome is None:
        return None
    category = _text(_first(attributes, vocabulary.category)) or UNCATEGORIZED
    return EvalResult(
        name=f"{GUARDRAIL_PREFIX}{name}",
        score=score,
        label=outcome,
        passed=outcome == PASSED,
        explanation=explanation,
        safety={category: _SEVERITY[outcome]},
        revision=version,
    )


def _record_of(carrier: str, parents: Mapping[str, str], record_at: Mapping[str, int]) -> int:
    """The record whose span is `carrier` or its nearest ancestor; the first otherwise."""
    seen = 0
    span_id: str | None = carrier
    while span_id and seen <= len(parents):
        at = record_at.get(span_id)
        if at is not None:
            return at
        span_id = parents.get(span_id)
        seen += 1
    return 0
