"""One test across the fleet (`alerts.fleet`): rules judged on every replica's verdicts.

Replicas of a Kafka consumer group (or one sidecar per pod) each see a share of a service's
verdicts; judged apart, N replicas would page N times slower and make N times the false
pages. With `alerts.fleet.prometheus_url` every replica reads the fleet's counters from the
Prometheus that scrapes them all, every `query_interval_s`, and hands what every replica
counted since the last read to its own engine (`AlertEngine.add_counts`): each replica
then judges the same stream with the same test, and their pages carry the same labels, so
Alertmanager sends one.

Read this way: evaluator rules that count verdicts (`rag_monitor_evaluations_total`, pass
and fail) and category rules (`rag_monitor_safety_evaluations_total`, a defect at the
graders' `severity_threshold`), regression and absolute rules, and cohort rules by `version`
or `route` (labels of those counters). Rules that measure scores, and cohorts by model, keep
judging the replica's own verdicts.

Each series (one replica's counter for one label set) is read whole and differenced here, so
a replica that restarts (its counter falls) counts from zero and one that goes away leaves
nothing behind; the first read only learns where the counters stand. A read that fails is
logged (at most once a minute) and counted in `rag_monitor_alert_fleet_reads_total{outcome}`;
the rules then see no new verdicts until the next read succeeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiohttp

from monitor.config import AlertFleet, AlertRule
from monitor.results import SEVERITIES, Severity
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

Sink = Callable[[str, str, str, list[float]], None]
_DEFAULT_THRESHOLD: Severity = "medium"


class FleetReader:
    """Reads the fleet's verdict counters from Prometheus for the rules it can read."""

    def __init__(
        self,
        config: AlertFleet,
        rules: Sequence[AlertRule],
        telemetry: Telemetry,
        severity_thresholds: Mapping[str, Severity] | None = None,
    ) -> None:
        self._url = config.prometheus_url.rstrip("/") + "/api/v1/query"
        self._selector = config.selector.strip()
        self._interval = config.query_interval_s
        self._timeout = config.timeout_s
        self._rules = [rule for rule in rules if reads(rule)]
        thresholds = list((severity_thresholds or {}).values()) or [_DEFAULT_THRESHOLD]
        # Category counters do not name their grader: a defect at the lowest threshold.
        self._defect_from = min(SEVERITIES.index(t) for t in thresholds)
        self._last: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self._reads = telemetry.counter(
            "alert_fleet_reads",
            "Reads of the fleet's verdict counters from Prometheus (alerts.fleet), by "
            "outcome (ok, error).",
            ("outcome",),
        )
        self._log = RateLimitedLog(log, 60.0)

    def reads(self, rule: AlertRule) -> bool:
        return any(r.name == rule.name for r in self._rules)

    async def run(self, sink: Sink) -> None:
        """Reads every `query_interval_s` until cancelled, handing each rule's new verdicts
        per service and cohort to `sink(rule, service, cohort, histogram)`."""
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                await self.read_once(session, sink)
                await asyncio.sleep(self._interval)

    async def read_once(self, session: aiohttp.ClientSession, sink: Sink) -> None:
        for rule in self._rules:
            try:
                series = await self._query(session, self._query_text(rule))
            except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                self._reads.labels("error").inc()
                self._log.log(
                    "fleet",
                    logging.WARNING,
                    "alerts.fleet: reading the verdict counters from %s failed (%r); rule %s "
                    "sees no new verdicts until a read succeeds",
                    self._url,
                    exc,
                    rule.name,
                )
                continue
            self._reads.labels("ok").inc()
            for (service, cohort), histogram in self._increments(rule, series).items():
                if sum(histogram) > 0:
                    sink(rule.name, service, cohort, histogram)

    def _query_text(self, rule: AlertRule) -> str:
        extra = f",{self._selector}" if self._selector else ""
        if rule.evaluator is not None:
            return (
                f'rag_monitor_evaluations_total{{evaluator="{rule.evaluator}",'
                f'outcome=~"pass|fail"{extra}}}'
            )
        return f'rag_monitor_safety_evaluations_total{{category="{rule.category}"{extra}}}'

    async def _query(
        self, session: aiohttp.ClientSession, query: str
    ) -> list[tuple[dict[str, str], float]]:
        async with session.get(self._url, params={"query": query}) as response:
            body: Any = await response.json(content_type=None)
        if response.status != 200 or body.get("status") != "success":
            raise ValueError(f"HTTP {response.status}: {str(body.get('error', ''))[:200]}")
        return [
            ({str(k): str(v) for k, v in item["metric"].items()}, float(item["value"][1]))
            for item in body["data"]["result"]
        ]

    def _increments(
        self, rule: AlertRule, series: list[tuple[dict[str, str], float]]
    ) -> dict[tuple[str, str], list[float]]:
        """What each (service, cohort) counted since the last read: `[passes, defects]`."""
        previous = self._last.get(rule.name)
        seen: dict[tuple[tuple[str, str], ...], float] = {}
        out: dict[tuple[str, str], list[float]] = {}
        by = rule.cohorts.by if rule.cohorts is not None else None
        for labels, value in series:
            key = tuple(sorted(labels.items()))
            seen[key] = value
            if previous is None:
                continue
            before = previous.get(key)
            # A counter that fell belongs to a restarted replica: it counted from zero.
            delta = value if before is None or value < before else value - before
            if delta <= 0:
                continue
            group = (labels.get("service", ""), labels.get(by, "") if by else "")
            histogram = out.setdefault(group, [0.0, 0.0])
            histogram[1 if self._defect(rule, labels) else 0] += round(delta)
        self._last[rule.name] = seen
        return out

    def _defect(self, rule: AlertRule, labels: Mapping[str, str]) -> bool:
        if rule.evaluator is not None:
            return labels.get("outcome") == "fail"
        names: tuple[str, ...] = SEVERITIES
        severity = labels.get("severity", "")
        return severity in names and names.index(severity) >= self._defect_from


def reads(rule: AlertRule) -> bool:
    """Whether a rule can be judged on the fleet's counters (see the module docstring)."""
    if rule.measure == "scores":
        return False
    return rule.cohorts is None or rule.cohorts.by in ("version", "route")
