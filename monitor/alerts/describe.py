"""What an alert says: its labels, times and the annotations its rule's kind writes
(`Kind.describe`), and the small text helpers kinds share. The description is also the log
line of a first page and a resolve, so it reads the same in Alertmanager, a webhook and the
monitor's log."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal

from monitor.alerts.rule import Rule
from monitor.component import GENERATOR, Alert
from monitor.config import Alerts, Config

DEFAULT_RESEND_INTERVAL_S = 60.0


def alert(
    rule: Rule,
    service: str,
    cohort: str,
    annotations: dict[str, str],
    started_at: float,
    status: Literal["firing", "resolved"],
    ends_at: datetime,
    generator_url: str,
    severity: str | None = None,
    labels: dict[str, str] | None = None,
) -> Alert:
    """The alert one (rule, service, cohort) sends: labels, annotations, times; `severity`
    where the rule's kind names it (`Judgment.severity`), else the rule's; `labels` where
    the kind names its pages itself (`kinds.Reported`: of no service)."""
    cfg = rule.config
    if labels is not None:
        service = ""
    else:
        labels = _labels(rule, service, cohort, severity)
    return Alert(
        rule=cfg.name,
        service=service,
        status=status,
        labels=labels,
        annotations=annotations,
        starts_at=datetime.fromtimestamp(started_at, tz=UTC),
        ends_at=ends_at,
        generator_url=generator_url,
    )


def _labels(rule: Rule, service: str, cohort: str, severity: str | None) -> dict[str, str]:
    cfg = rule.config
    labels = {
        "alertname": cfg.name,
        "service": service,
        "severity": severity or cfg.severity,
        "generator": GENERATOR,
    }
    if cfg.evaluator:
        labels["evaluator"] = cfg.evaluator
    else:
        labels["category"] = str(cfg.category)
    if cfg.measure != "verdicts":
        # Another quantity than the evaluator's defect rate (the share of records without
        # context): the routing tells it from the defect rate's pages and their mirrors.
        labels["measure"] = cfg.measure
    if rule.cohort_by is not None:
        labels["cohort"] = cohort
    return labels


def p_text(p: float) -> str:
    return f"p = {p:.3f}" if p >= 0.001 else f"p < {_ceil_power(p)}"


def _ceil_power(p: float) -> str:
    exponent = -3
    while p < 10.0 ** (exponent - 1) and exponent > -12:
        exponent -= 1
    return f"{10.0**exponent:g}"


def shown_duration(seconds: float) -> str:
    """`7d`, `36h`, `45m`, `30s`: the largest unit that divides `seconds`."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def resend_interval_s(alerts: Alerts) -> float:
    """How often a firing alert is re-sent. With `alerts.fleet` no replica sends a resolve
    (an alert ends when no replica re-sends it), so re-sends come every two reads or
    evaluations, whichever is slower, for the alert to end soon after the last replica
    stops firing (its `endsAt` is four re-sends ahead)."""
    if alerts.fleet is None:
        return DEFAULT_RESEND_INTERVAL_S
    beat = 2 * max(alerts.evaluation_interval_s, alerts.fleet.query_interval_s)
    return min(DEFAULT_RESEND_INTERVAL_S, beat)


def explained(notes: Mapping[str, str]) -> list[str]:
    """Where a page's annotations say the excess is: `where: ...`, `changed at the rise:
    ...`, `cause: ...`, `traces: ...`."""
    shown = (
        ("where", "where"),
        ("changed", "changed at the rise"),
        ("cause_detail", "cause"),
        ("trace_ids", "traces"),
    )
    return [f"{label}: {notes[name]}" for name, label in shown if name in notes]


def log_text(alert: Alert) -> str:
    """The log line's text: the description, and where the page says the excess is."""
    return "; ".join([alert.annotations["description"], *explained(alert.annotations)])


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def iso(t: datetime) -> str:
    """`2026-11-26T12:00:00Z`."""
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def generator_url(config: Config) -> str:
    """Where a human can look at the source of an alert: this host's metrics endpoint."""
    port = config.exporters.prometheus.endpoint.rpartition(":")[2]
    return f"http://{socket.gethostname()}:{port}/metrics"
