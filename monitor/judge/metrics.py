"""The judge client's own metrics, beyond the table every component shares (`Telemetry`)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge

from monitor.telemetry import Telemetry


@dataclass(frozen=True)
class JudgeMetrics:
    cache: Counter
    redactions: Counter
    retries: Counter
    circuit_open: Gauge
    answers: Counter


def judge_metrics(telemetry: Telemetry) -> JudgeMetrics:
    """The metrics on `telemetry`'s registry (the same ones for every client of a registry)."""
    return JudgeMetrics(
        cache=telemetry.counter(
            "judge_cache_lookups", "Verdict cache lookups by result (hit, miss).", ("result",)
        ),
        redactions=telemetry.counter(
            "redactions",
            "Personal data replaced before text was sent to a judge, by kind.",
            ("kind",),
        ),
        retries=telemetry.counter(
            "judge_retries",
            "Judge attempts repeated after a retryable failure or an unreadable answer.",
            ("model", "reason"),
        ),
        circuit_open=telemetry.gauge(
            "judge_circuit_open",
            "1 while the circuit breaker for a judge model is open.",
            ("model",),
        ),
        answers=telemetry.counter(
            "judge_answers",
            "Answered judge calls by the format asked for (structured, free_form) and how "
            "the answer was read (valid, fallback, repaired, parse, truncated).",
            ("model", "format", "result"),
        ),
    )
