"""What the alert engine shows on `/metrics` after each evaluation, per rule and service:
the rates it compared, how many verdicts each side held (why a rule cannot page yet), how
far a sequential test is towards a page, whether a boost is on, and whether it fires."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Gauge

from monitor.alerts.cohorts import UNJUDGED
from monitor.alerts.rule import Rule, RuleState
from monitor.telemetry import Telemetry


class AlertGauges:
    def __init__(self, telemetry: Telemetry) -> None:
        self._t = telemetry
        self.baseline_rate = telemetry.gauge(
            "defect_rate_baseline",
            "Defect rate of a regression rule's baseline window.",
            ("service", "rule"),
        )
        self.window_samples = telemetry.gauge(
            "alert_samples",
            "Verdicts in an alert rule's current or baseline window (a rule pages only "
            "with min_samples in each).",
            ("service", "rule", "window"),
        )
        self.evidence = telemetry.gauge(
            "alert_evidence",
            "How far a sequential regression test is towards a page, on a log scale "
            "(1 pages; see monitor/alerts/README.md).",
            ("service", "rule"),
        )
        self.boost_active = telemetry.gauge(
            "alert_boost_active",
            "1 while a rule with a boost raises its evaluator's sampling of a service.",
            ("service", "rule"),
        )
        self.cohort_rate = telemetry.gauge(
            "cohort_defect_rate",
            "Defect rate of one cohort of a service in a cohort rule's window.",
            ("service", "rule", "cohort"),
        )
        self.cohort_samples = telemetry.gauge(
            "alert_cohort_samples",
            "Verdicts of one cohort of a service in a cohort rule's window (a cohort is "
            "judged only with min_samples in it and in the rest of its service).",
            ("service", "rule", "cohort"),
        )
        self.entries_dropped = telemetry.counter(
            "alert_state_entries_dropped",
            "Alert state entries (one rule and service) dropped because they could not be "
            "restored from the state file or evaluated, by when (load, evaluation).",
            ("when",),
        )

    def publish(self, rule: Rule, service: str, states: dict[str, RuleState]) -> None:
        """The gauges of one judged (rule, service)."""
        cfg = rule.config
        name = cfg.name
        if cfg.cohorts is not None:
            for cohort, state in states.items():
                current = state.current
                self.cohort_samples.labels(service, name, cohort).set(current.samples)
                _set_or_remove(
                    self.cohort_rate, current.samples, current.mean, service, name, cohort
                )
                if cohort not in UNJUDGED:
                    self._firing(rule, service, cohort, state)
            return
        state = states[""]
        windows = state.windows
        if windows is not None and windows.last is not None:
            current, base = windows.moments()
            self.window_samples.labels(service, name, "baseline").set(base.samples)
            _set_or_remove(self.baseline_rate, base.samples, base.mean, service, name)
            if state.sequential is not None:
                self.evidence.labels(service, name).set(state.sequential.progress(rule.budget_s))
        else:
            current = state.current
        self.window_samples.labels(service, name, "current").set(current.samples)
        _set_or_remove(self._t.defect_rate, current.samples, current.mean, service, name)
        self._firing(rule, service, "", state)

    def _firing(self, rule: Rule, service: str, cohort: str, state: RuleState) -> None:
        cfg = rule.config
        self._t.alert_firing.labels(service, cfg.name, cfg.severity, cohort).set(
            1 if state.firing else 0
        )

    def forget_service(self, service: str) -> None:
        for gauge in (
            self._t.defect_rate,
            self._t.alert_firing,
            self.baseline_rate,
            self.window_samples,
            self.evidence,
            self.boost_active,
            self.cohort_rate,
            self.cohort_samples,
        ):
            gauge.remove_by_labels({"service": service})

    def forget_cohort(self, rules: Iterable[str], cohort: str) -> None:
        for gauge in (self._t.alert_firing, self.cohort_rate, self.cohort_samples):
            for name in rules:
                gauge.remove_by_labels({"rule": name, "cohort": cohort})


def _set_or_remove(gauge: Gauge, samples: int, value: float, *labels: str) -> None:
    """A rate is shown only while its window holds verdicts."""
    if samples:
        gauge.labels(*labels).set(value)
        return
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
