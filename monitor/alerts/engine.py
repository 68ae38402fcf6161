"""The sidecar's alert engine: windowed defect rates per service, judged by their bounds.

Each rule of `alerts.rules[]` watches one evaluator (defect = `fail`, out of pass + fail)
or one safety category (defect = severity at or above the grading evaluator's
`severity_threshold`, out of every verdict on that category). Judge errors are not
samples: an evaluator that could not decide says nothing about the service.

Per (rule, service) the engine keeps a `SlidingWindow` of `rule.window`. On every tick
(`alerts.evaluation_interval_s`) it computes the Wilson interval of the rate at
`rule.confidence` and

- **fires** when the window holds at least `min_samples` verdicts *and* the lower bound
  is above `max_defect_rate` (the rate is above the threshold with that confidence);
- **resolves** when the upper bound drops below `max_defect_rate` (it is now below with
  that confidence), or when the window is empty (no traffic left to judge);
- otherwise keeps its state (hysteresis), re-sending a firing alert every
  `resend_interval_s` as Alertmanager expects.

`emit` only appends to windows (non-blocking); notifications go to `Notifier`s, which
queue and deliver them in the background (`monitor.exporters.alertmanager`).
State is exported as `rag_monitor_defect_rate{service,rule}` (the observed rate) and
`rag_monitor_alert_firing{service,rule,severity}`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from prometheus_client import Gauge

from monitor.alerts.stats import wilson_interval
from monitor.alerts.window import SlidingWindow
from monitor.config import AlertRule, parse_duration
from monitor.evaluators.base import SEVERITIES, EvalResult, Severity
from monitor.records import RagRecord
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

DEFAULT_SEVERITY_THRESHOLD: Severity = "medium"
DEFAULT_RESEND_INTERVAL_S = 60.0
GENERATOR = "rag-monitor"


@dataclass(frozen=True, slots=True)
class Alert:
    """One notification: a rule's state for one service at one moment."""

    rule: str
    service: str
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime
    generator_url: str

    def to_alertmanager(self) -> dict[str, object]:
        """The `postableAlert` object of Alertmanager's v2 API."""
        return {
            "labels": self.labels,
            "annotations": self.annotations,
            "startsAt": _iso(self.starts_at),
            "endsAt": _iso(self.ends_at),
            "generatorURL": self.generator_url,
        }


class Notifier(Protocol):
    """Delivers alerts; `notify` never blocks (it queues and counts what it drops)."""

    async def start(self) -> None: ...

    def notify(self, alerts: Sequence[Alert]) -> None: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _State:
    window: SlidingWindow
    firing: bool = False
    started_at: float = 0.0
    last_sent: float = 0.0
    samples: int = 0
    defects: int = 0
    bounds: tuple[float, float] = (0.0, 1.0)


@dataclass(frozen=True)
class _Rule:
    config: AlertRule
    window_s: float
    # Safety rules: the severity at which each grading evaluator calls a verdict a defect.
    thresholds: Mapping[str, Severity] = field(default_factory=dict)

    def samples(self, results: Mapping[str, EvalResult]) -> list[bool]:
        """One bool per verdict this rule counts in `results` (True = defect)."""
        rule = self.config
        if rule.evaluator is not None:
            result = results.get(rule.evaluator)
            if result is None or result.outcome == "error":
                return []
            return [result.outcome == "fail"]
        out = []
        for name, result in results.items():
            if result.outcome == "error" or not result.safety or rule.category not in result.safety:
                continue
            threshold = self.thresholds.get(name, DEFAULT_SEVERITY_THRESHOLD)
            severity = result.safety[rule.category]
            out.append(SEVERITIES.index(severity) >= SEVERITIES.index(threshold))
        return out


class AlertEngine:
    """A `ResultSink` that turns evaluation results into alerts (see the module docstring).

    **Parameters:**
    - `rules`: validated `alerts.rules[]`.
    - `telemetry`: where `defect_rate` / `alert_firing` live; its `service_cap` bounds services.
    - `notifiers`: Alertmanager / webhook senders.
    - `severity_thresholds`: evaluator name → `severity_threshold` for category rules.
    - `evaluation_interval_s`: how often rules are judged (`alerts.evaluation_interval_s`).
    - `resend_interval_s`: how often a firing alert is re-sent.
    - `generator_url`: where a human can look at the source (the metrics endpoint).
    - `clock`: seconds since the epoch; tests pass their own.
    """

    def __init__(
        self,
        rules: Sequence[AlertRule],
        telemetry: Telemetry,
        notifiers: Sequence[Notifier] = (),
        *,
        severity_thresholds: Mapping[str, Severity] | None = None,
        evaluation_interval_s: float = 15.0,
        resend_interval_s: float = DEFAULT_RESEND_INTERVAL_S,
        generator_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        thresholds = dict(severity_thresholds or {})
        self._rules = [_Rule(r, parse_duration(r.window), thresholds) for r in rules]
        self._t = telemetry
        self._notifiers = list(notifiers)
        self._interval = evaluation_interval_s
        self._resend = resend_interval_s
        self._generator_url = generator_url or f"http://{socket.gethostname()}:9464/metrics"
        self._clock = clock
        self._states: dict[tuple[int, str], _State] = {}
        self._task: asyncio.Task[None] | None = None

    # -- ResultSink -------------------------------------------------------------------

    async def start(self) -> None:
        for notifier in self._notifiers:
            await notifier.start()
        if self._task is None and self._rules:
            self._task = asyncio.create_task(self._loop(), name="alert-engine")

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        if not self._rules:
            return
        service = self._t.service_cap(record.service)
        now = self._clock()
        for i, rule in enumerate(self._rules):
            samples = rule.samples(results)
            if not samples:
                continue
            state = self._states.get((i, service))
            if state is None:
                state = self._states[(i, service)] = _State(SlidingWindow(rule.window_s))
            for defect in samples:
                state.window.add(now, defect)

    async def close(self) -> None:
        """Stop judging; firing alerts are not resolved (their `endsAt` expires them)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for notifier in self._notifiers:
            try:
                await notifier.close()
            except Exception:
                log.exception("alert notifier %s failed to close", type(notifier).__name__)

    # -- judging ----------------------------------------------------------------------

    def evaluate(self) -> list[Alert]:
        """Judge every (rule, service) now, update the gauges, return what must be sent."""
        now = self._clock()
        out: list[Alert] = []
        for (i, service), state in self._states.items():
            rule = self._rules[i]
            cfg = rule.config
            samples, defects = state.window.totals(now)
            state.samples, state.defects = samples, defects
            state.bounds = lower, upper = wilson_interval(defects, samples, cfg.confidence)
            if samples:
                self._t.defect_rate.labels(service, cfg.name).set(defects / samples)
            else:
                _remove(self._t.defect_rate, service, cfg.name)
            if not state.firing:
                if samples >= cfg.min_samples and lower > cfg.max_defect_rate:
                    state.firing, state.started_at, state.last_sent = True, now, now
                    log.warning(
                        "alert %s firing for %s: %d/%d defects, %.0f%% interval [%.3f, %.3f]",
                        cfg.name,
                        service,
                        defects,
                        samples,
                        cfg.confidence * 100,
                        lower,
                        upper,
                    )
                    out.append(self._alert(rule, service, state, now, "firing"))
            elif samples == 0 or upper < cfg.max_defect_rate:
                state.firing = False
                log.info(
                    "alert %s resolved for service %s (%d/%d)", cfg.name, service, defects, samples
                )
                out.append(self._alert(rule, service, state, now, "resolved"))
            elif now - state.last_sent >= self._resend:
                state.last_sent = now
                out.append(self._alert(rule, service, state, now, "firing"))
            self._t.alert_firing.labels(service, cfg.name, cfg.severity).set(
                1 if state.firing else 0
            )
        return out

    def firing(self) -> list[tuple[str, str]]:
        """(rule, service) pairs currently firing."""
        return sorted(
            (self._rules[i].config.name, service)
            for (i, service), state in self._states.items()
            if state.firing
        )

    def _dispatch(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        for notifier in self._notifiers:
            notifier.notify(alerts)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                self._dispatch(self.evaluate())
            except Exception:
                log.exception("alert evaluation failed")
                self._t.dropped.labels("alerts", "internal_error").inc()

    def _alert(
        self,
        rule: _Rule,
        service: str,
        state: _State,
        now: float,
        status: Literal["firing", "resolved"],
    ) -> Alert:
        cfg = rule.config
        lower, upper = state.bounds
        rate = state.defects / state.samples if state.samples else 0.0
        what = f"evaluator {cfg.evaluator}" if cfg.evaluator else f"safety category {cfg.category}"
        labels = {
            "alertname": cfg.name,
            "service": service,
            "severity": cfg.severity,
            "generator": GENERATOR,
        }
        if cfg.evaluator:
            labels["evaluator"] = cfg.evaluator
        else:
            labels["category"] = str(cfg.category)
        # A firing alert that stops being re-sent expires on its own (as Prometheus does).
        ends = now + 4 * max(self._resend, self._interval) if status == "firing" else now
        return Alert(
            rule=cfg.name,
            service=service,
            status=status,
            labels=labels,
            annotations={
                "summary": (
                    f"{what} defect rate on {service} is {rate:.1%} "
                    f"({state.defects}/{state.samples} in {cfg.window})"
                ),
                "description": (
                    f"{cfg.confidence:.0%} Wilson interval [{lower:.3f}, {upper:.3f}] "
                    f"vs max_defect_rate {cfg.max_defect_rate}; min_samples {cfg.min_samples}"
                ),
                "defect_rate": f"{rate:.4f}",
                "lower_bound": f"{lower:.4f}",
                "upper_bound": f"{upper:.4f}",
                "samples": str(state.samples),
            },
            starts_at=_utc(state.started_at),
            ends_at=_utc(ends),
            generator_url=self._generator_url,
        )


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
