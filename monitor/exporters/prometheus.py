"""Prometheus: the metrics sink, counting every finished evaluation into the series
`/metrics` serves (`metrics_port.py` serves them). An app's own guardrail verdicts
(`guardrail:` evaluators) are counted as safety verdicts of their risk categories (blocked
as severity high, flagged medium, passed very_low) and, as they were given, in
`guardrail_verdicts_total`."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence

from prometheus_client import Counter

from monitor.component import Evaluated
from monitor.config import GUARDRAIL_PREFIX
from monitor.extraction import GUARDRAIL_OUTCOME_OF
from monitor.telemetry import Telemetry


class MetricsSink:
    """Counts every finished evaluation (docs/contract.md, "Metrics"). A `ResultSink`: the
    evaluation stage hands it every batch of finished records in one `emit`."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._t = telemetry
        self._guardrails = telemetry.counter("guardrail_verdicts")

    async def start(self) -> None:
        return None

    async def shutdown(self, deadline_s: float) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        """The counts of each series are added at once (a series of a batch usually gets
        many), with the trace id of its last defect in the batch as the exemplar, as
        counting record by record would leave it. Scores are observed one by one, in
        order."""
        t = self._t
        counts: Tally[tuple[str, str, str, str, str]] = Tally()
        safety: Tally[tuple[str, str, str, str]] = Tally()
        exemplars: dict[tuple[str, ...], str] = {}  # the last defect's trace id per series
        scores: list[tuple[str, str, float]] = []
        guardrails: Tally[tuple[str, str, str, str, str, str]] = Tally()
        for evaluated in batch:
            record, results = evaluated.record, evaluated.results
            service = t.service_cap(record.service)
            version = t.version_cap(record.version or "")
            route = t.route_cap(record.route)
            trace_id = record.trace_id
            for name, result in results.items():
                outcome = result.outcome
                key = (service, version, route, name, outcome)
                counts[key] += 1
                if outcome == "error":
                    continue
                if outcome == "fail" and trace_id:
                    exemplars[key] = trace_id
                if result.normalized is not None:
                    scores.append((service, name, result.normalized))
                if result.safety:
                    guardrail = name.startswith(GUARDRAIL_PREFIX)
                    for category, severity in result.safety.items():
                        graded = (service, version, category, severity)
                        safety[graded] += 1
                        if severity != "very_low" and trace_id:
                            exemplars[graded] = trace_id
                        if guardrail:
                            verdict = GUARDRAIL_OUTCOME_OF[severity]
                            guardrails[(service, version, route, name, category, verdict)] += 1
        for series, n in counts.items():
            _add(t.child(t.counter("evaluations"), *series), n, exemplars.get(series))
        for service, name, value in scores:
            t.child(t.histogram("evaluation_score"), service, name).observe(value)
        for graded_series, n in safety.items():
            _add(
                t.child(t.counter("safety_evaluations"), *graded_series),
                n,
                exemplars.get(graded_series),
            )
        for guarded, n in guardrails.items():
            t.child(self._guardrails, *guarded).inc(n)


def _add(counter: Counter, n: int, trace_id: str | None) -> None:
    """Add `n` to a counter child; with `trace_id`, the last one carries it as exemplar."""
    if trace_id is None:
        counter.inc(n)
        return
    if n > 1:
        counter.inc(n - 1)
    counter.inc(exemplar={"trace_id": trace_id})
