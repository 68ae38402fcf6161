"""The monitor's own metrics: one registry per process (never the global one).

Every metric is declared in one table (`monitor/telemetry_metrics.py`) and registered from
it here, prefixed `rag_monitor_`. Label values that come from untrusted input (service, version,
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
from monitor.telemetry_metrics import METRICS, Metric

__all__ = ["OVERFLOW", "LabelCap", "RateLimitedLog", "Telemetry", "create_telemetry"]

NAMESPACE = "rag_monitor"


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


class Declared:
    """The metrics of the table (`monitor/telemetry_metrics.py`) on one registry, each
    created on its first use: a second component of a kind gets the same metric."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._made: dict[str, Counter | Gauge | Histogram] = {}

    def get(self, name: str, kind: str) -> Any:
        row = METRICS[name]  # a KeyError names a metric the table lacks
        if row.kind != kind:
            raise TypeError(f"{name} is a {row.kind} in the metrics table, not a {kind}")
        found = self._made.get(name)
        if found is None:
            found = self._made[name] = _register(row, self._registry)
        return found

    def made(self) -> list[Counter | Gauge | Histogram]:
        return list(self._made.values())


def _register(row: Metric, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
    if row.kind == "histogram":
        return Histogram(
            row.name,
            row.help,
            row.labels,
            namespace=NAMESPACE,
            registry=registry,
            buckets=row.buckets,
        )
    kind = Counter if row.kind == "counter" else Gauge
    return kind(row.name, row.help, row.labels, namespace=NAMESPACE, registry=registry)


@dataclass
class Telemetry:
    """All self-metrics, registered on `registry`. Tests make a fresh one each.

    Every metric of the table is had one way: by its name through `counter`, `gauge` and
    `histogram`, made on its first use (a second component of a kind gets the same one)."""

    registry: CollectorRegistry
    declared: Declared
    service_cap: LabelCap
    version_cap: LabelCap
    route_cap: LabelCap
    _children: dict[tuple[int, tuple[str, ...]], Any] = field(default_factory=dict)

    def counter(self, name: str) -> Counter:
        """The counter `name` of the metrics table on this registry."""
        metric: Counter = self.declared.get(name, "counter")
        return metric

    def gauge(self, name: str) -> Gauge:
        """The gauge `name` of the metrics table on this registry."""
        metric: Gauge = self.declared.get(name, "gauge")
        return metric

    def histogram(self, name: str) -> Histogram:
        """The histogram `name` of the metrics table on this registry."""
        metric: Histogram = self.declared.get(name, "histogram")
        return metric

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
        metrics = [m for m in self.declared.made() if label in m._labelnames]
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
    declared = Declared(reg)
    for row in METRICS.values():
        if row.at_start:
            declared.get(row.name, row.kind)

    def counter(name: str) -> Counter:
        made: Counter = declared.get(name, "counter")
        return made

    overflow = counter("label_overflow")
    label_values_cut = counter("label_values_cut")

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
        declared=declared,
        service_cap=cap(max_services, allowed_services, "service"),
        version_cap=cap(max_versions, allowed_versions, "version"),
        route_cap=cap(max_routes, allowed_routes, "route"),
    )
    # `rag_monitor_build_info{version, python} 1`, to join versions onto other series.
    telemetry.gauge("build_info").labels(__version__, platform.python_version()).set(1)
    telemetry.service_cap.on_evict(partial(telemetry.forget, "service"))
    telemetry.version_cap.on_evict(partial(telemetry.forget, "version"))
    telemetry.route_cap.on_evict(partial(telemetry.forget, "route"))
    return telemetry


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
