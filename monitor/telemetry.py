"""The monitor's own metrics: one table, one registry per process (never the global one).

Every metric of the contract's metric table (`docs/contract.md`, "Metrics") lives here,
prefixed `rag_monitor_`. Label values that come from untrusted input (service, version,
route) pass through a `LabelCap` (`monitor/shared/labels.py`), so a sender cannot create
unbounded series nor long label values; evaluator, model, category and stage come from
config or code.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from monitor.config import Config
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from monitor.shared.labels import OVERFLOW, LabelCap
from monitor.shared.version import __version__

__all__ = ["OVERFLOW", "LabelCap", "RateLimitedLog", "Telemetry", "create_telemetry"]

NAMESPACE = "rag_monitor"
SCORE_BUCKETS = tuple(round(0.1 * i, 1) for i in range(1, 11))
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class RateLimitedLog:
    """At most one log line per key per `interval_s`, with the count of lines held back.

    Per-item failures are counted by metrics; this keeps their log lines from flooding.
    Thread-safe (the Kafka consumer thread uses it too).
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def log(self, key: str, level: int, message: str, *args: Any) -> None:
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._interval:
                self._held[key] = self._held.get(key, 0) + 1
                return
            self._last[key] = now
            held = self._held.pop(key, 0)
        suffix = f" ({held} similar messages suppressed)" if held else ""
        self._logger.log(level, message + suffix, *args)

    def warning(self, key: str, message: str, *args: Any) -> None:
        self.log(key, logging.WARNING, message, *args)


@dataclass
class Telemetry:
    """All self-metrics, registered on `registry`. Tests make a fresh one each."""

    registry: CollectorRegistry
    spans_received: Counter
    records: Counter
    records_context_source: Counter
    records_rejected: Counter
    records_incomplete: Counter
    evaluations_skipped: Counter
    records_truncated: Counter
    label_values_cut: Counter
    sampling_decisions: Counter
    evaluations: Counter
    evaluation_score: Histogram
    safety_evaluations: Counter
    evaluation_duration: Histogram
    judge_requests: Counter
    judge_tokens: Counter
    judge_cost: Counter
    queue_depth: Gauge
    dropped: Counter
    kafka_lag: Gauge
    defect_rate: Gauge
    alert_firing: Gauge
    alert_notifications: Counter
    retry_after_invalid: Counter
    build_info: Gauge
    evaluator_revision: Gauge
    service_cap: LabelCap
    version_cap: LabelCap
    route_cap: LabelCap
    _children: dict[tuple[int, tuple[str, ...]], Any] = field(default_factory=dict)
    _own: dict[str, Any] = field(default_factory=dict)

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
        """A component's own counter (beyond the table above) on this registry, created
        once: a second component of the same kind gets the same metric."""
        metric: Counter = self._own_metric(Counter, name, doc, labels)
        return metric

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        """A component's own gauge, as `counter`."""
        metric: Gauge = self._own_metric(Gauge, name, doc, labels)
        return metric

    def _own_metric(
        self, kind: type[Counter] | type[Gauge], name: str, doc: str, labels: tuple[str, ...]
    ) -> Any:
        found = self._own.get(name)
        if found is None:
            found = kind(name, doc, labels, namespace=NAMESPACE, registry=self.registry)
            self._own[name] = found
        return found

    def child(self, metric: Counter | Gauge | Histogram, *values: str) -> Any:
        """`metric.labels(*values)`, cached: `labels()` costs microseconds on hot paths.

        Values come from closed or capped sets, so the cache stays as small as the series.
        """
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def forget(self, label: str, value: str) -> None:
        """Remove every series whose `label` is `value` (a value that lost its slot in a
        `LabelCap`), and the cached children that write to them."""
        metrics = [
            m
            for m in (*vars(self).values(), *self._own.values())
            if isinstance(m, Counter | Gauge | Histogram) and label in m._labelnames
        ]
        positions = {id(m): m._labelnames.index(label) for m in metrics}
        for metric in metrics:
            metric.remove_by_labels({label: value})
        for key in list(self._children):
            position = positions.get(key[0])
            if position is not None and key[1][position] == value:
                self._children.pop(key, None)


def create_telemetry(
    registry: CollectorRegistry | None = None,
    *,
    max_services: int = 50,
    max_routes: int = 100,
    max_versions: int = 20,
    allowed_services: Collection[str] = (),
    allowed_routes: Collection[str] = (),
    allowed_versions: Collection[str] = (),
    label_idle_s: float = 600.0,
    label_chars: int = 128,
    clock: Callable[[], float] = time.monotonic,
) -> Telemetry:
    # auto_describe: collectors without `describe` (process, platform, gc) register their
    # names too, so `name[]` filters (`restricted_registry`) can select their series.
    reg = registry if registry is not None else CollectorRegistry(auto_describe=True)
    _runtime_collectors(reg)

    def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
        return Counter(name, doc, labels, namespace=NAMESPACE, registry=reg)

    def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
        return Gauge(name, doc, labels, namespace=NAMESPACE, registry=reg)

    overflow = counter(
        "label_overflow",
        "Lookups of a service, version or route value that found no slot and read as "
        "'other' (a record is looked up at several stages).",
        ("label",),
    )
    label_values_cut = counter(
        "label_values_cut",
        "Service, version or route values longer than record_limits.label_chars, cut to a "
        "prefix and a hash: each record built with one, and each lookup of one from a "
        "trace that gave no record.",
        ("label",),
    )

    def cap(limit: int, allowed: Collection[str], label: str) -> LabelCap:
        return LabelCap(
            limit,
            allowed=allowed,
            idle_s=label_idle_s,
            max_chars=label_chars,
            clock=clock,
            folded=overflow.labels(label).inc,
            cut=label_values_cut.labels(label).inc,
        )

    telemetry = Telemetry(
        registry=reg,
        spans_received=counter("spans_received", "Spans accepted by a receiver.", ("receiver",)),
        records=counter("records", "RAG records entering the pipeline.", ("service", "source")),
        records_context_source=counter(
            "records_context_source",
            "Records entering the pipeline by where their context came from: retrieval_span, "
            "tool_result, convention, structure, prompt, record, none.",
            ("service", "context_source"),
        ),
        records_rejected=counter(
            "records_rejected", "Input rejected as malformed, by reason.", ("receiver", "reason")
        ),
        records_truncated=counter(
            "records_truncated",
            "Records cut to record_limits, by part (query, context, documents).",
            ("part",),
        ),
        label_values_cut=label_values_cut,
        records_incomplete=counter(
            "records_incomplete",
            "Records lacking a part some evaluators need.",
            ("service", "missing"),
        ),
        evaluations_skipped=counter(
            "evaluations_skipped",
            "Evaluations not run because the record lacks the evaluator's input "
            "(reason: no_query, no_context, no_response).",
            ("service", "evaluator", "reason"),
        ),
        sampling_decisions=counter(
            "sampling_decisions",
            "Per-evaluator sampling decisions.",
            ("service", "evaluator", "decision"),
        ),
        evaluations=counter(
            "evaluations",
            "Evaluations by outcome; fail carries the trace id as an exemplar.",
            ("service", "version", "route", "evaluator", "outcome"),
        ),
        evaluation_score=Histogram(
            "evaluation_score",
            "Normalised evaluation scores (1 = good).",
            ("service", "evaluator"),
            namespace=NAMESPACE,
            registry=reg,
            buckets=SCORE_BUCKETS,
        ),
        safety_evaluations=counter(
            "safety_evaluations",
            "Safety verdicts by harm category and severity.",
            ("service", "version", "category", "severity"),
        ),
        evaluation_duration=Histogram(
            "evaluation_duration_seconds",
            "Time spent in one evaluator call.",
            ("evaluator",),
            namespace=NAMESPACE,
            registry=reg,
            buckets=DURATION_BUCKETS,
        ),
        judge_requests=counter("judge_requests", "Calls to an LLM judge.", ("model", "outcome")),
        judge_tokens=counter("judge_tokens", "Judge tokens used.", ("model", "direction")),
        judge_cost=counter("judge_cost_usd", "Judge spend in US dollars.", ("model",)),
        queue_depth=gauge("queue_depth", "Items waiting in a pipeline stage.", ("stage",)),
        dropped=counter("dropped", "Items dropped, by stage and reason.", ("stage", "reason")),
        kafka_lag=gauge("kafka_lag", "Messages behind the high watermark.", ("topic", "partition")),
        defect_rate=gauge(
            "defect_rate", "Windowed defect rate of an alert rule.", ("service", "rule")
        ),
        alert_firing=gauge(
            "alert_firing",
            "1 while an alert rule fires (cohort: the cohort a cohort rule judges, else empty).",
            ("service", "rule", "severity", "cohort"),
        ),
        alert_notifications=counter(
            "alert_notifications",
            "Alerts handed to Alertmanager/webhooks, by outcome (sent, retried, failed, dropped).",
            ("target", "outcome"),
        ),
        retry_after_invalid=counter(
            "retry_after_invalid",
            "Retry-After values that were neither delta-seconds nor an HTTP-date, by client "
            "(judge, alertmanager, webhook); ignored: the client backed off on its own.",
            ("client",),
        ),
        build_info=_build_info(reg),
        evaluator_revision=Gauge(
            "evaluator_revision_info",
            "Always 1; the revision of each evaluator this process runs (what decides its "
            "verdicts), to join onto its evaluations (`alerts.fleet` does).",
            ("evaluator", "revision"),
            namespace=NAMESPACE,
            registry=reg,
        ),
        service_cap=cap(max_services, allowed_services, "service"),
        version_cap=cap(max_versions, allowed_versions, "version"),
        route_cap=cap(max_routes, allowed_routes, "route"),
    )
    telemetry.service_cap.on_evict(partial(telemetry.forget, "service"))
    telemetry.version_cap.on_evict(partial(telemetry.forget, "version"))
    telemetry.route_cap.on_evict(partial(telemetry.forget, "route"))
    return telemetry


def _build_info(registry: CollectorRegistry) -> Gauge:
    """`rag_monitor_build_info{version, python} 1`, to join versions onto other series."""
    info = Gauge(
        "build_info",
        "Always 1; the labels say which rag-monitor and Python are running.",
        ("version", "python"),
        namespace=NAMESPACE,
        registry=registry,
    )
    info.labels(__version__, platform.python_version()).set(1)
    return info


def _runtime_collectors(registry: CollectorRegistry) -> None:
    """The standard `process_*` (CPU, memory, open files, start time), `python_info` and
    `python_gc_*` series, as prometheus_client registers them on its global registry."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


def telemetry_for(config: Config, clock: Callable[[], float] = time.monotonic) -> Telemetry:
    """The telemetry of `config`'s pipeline (`pipeline.max_*`, `allowed_*`, `label_idle_s`,
    `record_limits.label_chars`), as the pipeline and `backtest` make it; `clock` is what
    the label caps' idle times read."""
    pipeline = config.pipeline
    return create_telemetry(
        max_services=pipeline.max_services,
        max_routes=pipeline.max_routes,
        max_versions=pipeline.max_versions,
        allowed_services=pipeline.allowed_services,
        allowed_routes=pipeline.allowed_routes,
        allowed_versions=pipeline.allowed_versions,
        label_idle_s=pipeline.label_idle_s,
        label_chars=config.record_limits.label_chars,
        clock=clock,
    )
