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
        cache=telemetry.counter("judge_cache_lookups"),
        redactions=telemetry.counter("redactions"),
        retries=telemetry.counter("judge_retries"),
        circuit_open=telemetry.gauge("judge_circuit_open"),
        answers=telemetry.counter("judge_answers"),
    )
