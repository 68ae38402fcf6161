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

A rule with a `baseline` (a regression rule) compares the current window with the
trailing `baseline.window` before it: slices leaving the current window move into the
baseline. It fires when both hold their `min_samples`, the current rate is above the
baseline's by at least `min_increase`, and a one-sided two-proportion test says so with
`confidence`; it resolves when the increase falls below half of `min_increase` (or the
current window empties). While it fires the baseline absorbs nothing and its clock stands
still, so it cannot learn the regression it pages on (see README.md here). With
`test: sequential` (the default) the rise is judged by the sequential test of
`monitor.alerts.sequential` on the verdicts since its last restart instead of the z-test.

A rule with `cohorts` (a cohort rule) keeps one window per cohort of a service (its records'
version, model or route) and judges each cohort against the rest of the service in the same
window with the regression rules' z-test and `min_increase`; its alerts carry the cohort.

`emit` only appends to windows (non-blocking); notifications go to `Notifier`s, which
queue and deliver them in the background (`monitor.exporters.alertmanager`).
State is exported as `rag_monitor_defect_rate{service,rule}` (the observed rate),
`rag_monitor_defect_rate_baseline{service,rule}`, `rag_monitor_alert_samples{service,rule,
window}` (why a rule cannot page yet), `rag_monitor_cohort_defect_rate` and
`rag_monitor_alert_cohort_samples{service,rule,cohort}` (cohort rules) and
`rag_monitor_alert_firing{service,rule,severity,cohort}`.
With `alerts.state_file` the windows and firing states survive a restart (`snapshot`,
`restore`, `monitor.alerts.state`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from prometheus_client import Gauge

from monitor.alerts.rule import Rule, RuleState, fingerprint, new_state
from monitor.alerts.state import StateFile
from monitor.alerts.stats import increase_p_value, one_sided_z, wilson_interval
from monitor.alerts.window import Moments
from monitor.component import GENERATOR, Alert, Notifier
from monitor.config import AlertRule, parse_duration
from monitor.records import RagRecord
from monitor.results import EvalResult, Severity
from monitor.telemetry import OVERFLOW, LabelCap, Telemetry

log = logging.getLogger(__name__)

DEFAULT_RESEND_INTERVAL_S = 60.0
# Cohorts that are never judged on their own: records without the cohort's value, and
# values past the cohort cap. Their verdicts still count in the rest of the service.
_UNJUDGED = ("", OVERFLOW)


class AlertEngine:
    """A `ResultSink` that turns evaluation results into alerts (see the module docstring).

    **Parameters:**
    - `rules`: validated `alerts.rules[]`.
    - `telemetry`: where `defect_rate` / `alert_firing` live; its `service_cap` gives the
      bound on services and its `version_cap` / `route_cap` the bound on cohorts (the
      windows keep their own slots, idle only past the longest window).
    - `notifiers`: Alertmanager / webhook senders.
    - `severity_thresholds`: evaluator name → `severity_threshold` for category rules.
    - `evaluation_interval_s`: how often rules are judged (`alerts.evaluation_interval_s`).
    - `resend_interval_s`: how often a firing alert is re-sent.
    - `generator_url`: where a human can look at the source (the metrics endpoint).
    - `clock`: seconds since the epoch; tests pass their own.
    - `state_file`: where windows and firing states are kept across restarts
      (`alerts.state_file`); read by `start`, written after every evaluation and by
      `shutdown`.
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
        state_file: StateFile | None = None,
    ) -> None:
        thresholds = dict(severity_thresholds or {})
        self._rules = [
            Rule(
                r,
                parse_duration(r.window),
                parse_duration(r.baseline.window) if r.baseline else None,
                thresholds,
            )
            for r in rules
        ]
        self._state_file = state_file
        self._baseline_rate = telemetry.gauge(
            "defect_rate_baseline",
            "Defect rate of a regression rule's baseline window.",
            ("service", "rule"),
        )
        self._window_samples = telemetry.gauge(
            "alert_samples",
            "Verdicts in an alert rule's current or baseline window (a rule pages only "
            "with min_samples in each).",
            ("service", "rule", "window"),
        )
        self._cohort_rate = telemetry.gauge(
            "cohort_defect_rate",
            "Defect rate of one cohort of a service in a cohort rule's window.",
            ("service", "rule", "cohort"),
        )
        self._cohort_samples = telemetry.gauge(
            "alert_cohort_samples",
            "Verdicts of one cohort of a service in a cohort rule's window (a cohort is "
            "judged only with min_samples in it and in the rest of its service).",
            ("service", "rule", "cohort"),
        )
        self._entries_dropped = telemetry.counter(
            "alert_state_entries_dropped",
            "Alert state entries (one rule and service) dropped because they could not be "
            "restored from the state file or evaluated, by when (load, evaluation).",
            ("when",),
        )
        self._t = telemetry
        # Windows are keyed on the service's own name, bounded apart from the metrics'
        # labels: a service keeps its windows while they hold verdicts, and a burst of
        # invented names can take only slots that have been idle that long. Cohorts
        # likewise, one cap per kind of cohort.
        self._services = self._cap(telemetry.service_cap, clock)
        self._services.on_evict(self._forget_service)
        self._cohorts: dict[str, LabelCap] = {}
        for rule in self._rules:
            cohorts = rule.config.cohorts
            if cohorts is not None and cohorts.by not in self._cohorts:
                source = telemetry.route_cap if cohorts.by == "route" else telemetry.version_cap
                cap = self._cohorts[cohorts.by] = self._cap(source, clock)
                cap.on_evict(functools.partial(self._forget_cohort, cohorts.by))
        self._notifiers = list(notifiers)
        self._interval = evaluation_interval_s
        self._resend = resend_interval_s
        self._generator_url = generator_url or f"http://{socket.gethostname()}:9464/metrics"
        self._clock = clock
        self._states: dict[tuple[int, str, str], RuleState] = {}
        self._task: asyncio.Task[None] | None = None

    def _cap(self, source: LabelCap, clock: Callable[[], float]) -> LabelCap:
        return LabelCap(
            source.limit,
            allowed=source.allowed,
            idle_s=max(source.idle_s, self._longest_window()),
            max_chars=source.max_chars,
            clock=clock,
        )

    # -- ResultSink -------------------------------------------------------------------

    async def start(self) -> None:
        if self._state_file is not None:
            self.restore(self._state_file.load(self._clock(), self._longest_window()))
        for notifier in self._notifiers:
            await notifier.start()
        if self._task is None and self._rules:
            self._task = asyncio.create_task(self._loop(), name="alert-engine")

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        if not self._rules:
            return
        service = self._services(record.service)
        now = self._clock()
        for i, rule in enumerate(self._rules):
            samples = rule.samples(results)
            if not samples:
                continue
            cohorts = rule.config.cohorts
            cohort = self._cohorts[cohorts.by](rule.cohort(record)) if cohorts else ""
            state = self._states.get((i, service, cohort))
            if state is None:
                state = self._states[(i, service, cohort)] = new_state(rule)
            pending = state.pending
            for value in samples:
                state.window.add(now, value)
                if pending is not None:
                    pending[round(value * rule.steps)] += 1

    async def shutdown(self, deadline_s: float) -> None:
        """Stop judging and save the state file; nothing is sent: a firing alert stays
        firing (the next process, reading the state file, goes on judging and resolves
        it; without one its `endsAt` expires it). Notifiers get what is left of
        `deadline_s` to deliver what they queued."""
        started = time.monotonic()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._state_file is not None:
            await asyncio.to_thread(self._state_file.save, self._clock(), self.snapshot())
        for notifier in self._notifiers:
            try:
                await notifier.shutdown(max(0.0, deadline_s - (time.monotonic() - started)))
            except Exception:
                log.exception("alert notifier %s failed to shut down", type(notifier).__name__)

    # -- judging ----------------------------------------------------------------------

    def evaluate(self) -> list[Alert]:
        """Judge every (rule, service) now, update the gauges, return what must be sent."""
        now = self._clock()
        out: list[Alert] = []
        groups: dict[tuple[int, str], dict[str, RuleState]] = {}
        for (i, service, cohort), state in self._states.items():
            groups.setdefault((i, service), {})[cohort] = state
        for (i, service), states in groups.items():
            try:
                if self._rules[i].config.cohorts is not None:
                    out.extend(self._judge_cohorts(i, service, states, now))
                else:
                    out.extend(self._judge(i, service, states[""], now))
            except (ArithmeticError, ValueError, TypeError) as exc:
                # One entry (a value restored from a hand-edited state file, say) that cannot
                # be judged is dropped alone; the other alerts of this evaluation go on.
                log.error(
                    "alert %s for service %s cannot be evaluated (%r): its state is dropped",
                    self._rules[i].config.name,
                    service,
                    exc,
                )
                self._entries_dropped.labels("evaluation").inc()
                for cohort in states:
                    del self._states[(i, service, cohort)]
        return out

    def _judge(self, i: int, service: str, state: RuleState, now: float) -> list[Alert]:
        """The alerts one (rule, service) entry gives now, its gauges updated."""
        out: list[Alert] = []
        rule = self._rules[i]
        cfg = rule.config
        if rule.baseline_s is not None:
            alert = self._judge_regression(rule, service, state, now)
            if alert is not None:
                out.append(alert)
            self._t.alert_firing.labels(service, cfg.name, cfg.severity, "").set(
                1 if state.firing else 0
            )
            return out
        state.current = current = state.window.moments(now)
        samples, defects = current.samples, current.defects
        self._window_samples.labels(service, cfg.name, "current").set(samples)
        state.bounds = lower, upper = wilson_interval(defects, samples, cfg.confidence)
        if samples:
            self._t.defect_rate.labels(service, cfg.name).set(current.mean)
        else:
            _remove(self._t.defect_rate, service, cfg.name)
        threshold = cfg.max_defect_rate if cfg.max_defect_rate is not None else 1.0
        alert = self._step(
            rule,
            service,
            "",
            state,
            now,
            fire=samples >= cfg.min_samples and lower > threshold,
            resolve=samples == 0 or upper < threshold,
            story=lambda: (
                f"{defects:g}/{samples} defects, {cfg.confidence:.0%} interval "
                f"[{lower:.3f}, {upper:.3f}]"
            ),
        )
        if alert is not None:
            out.append(alert)
        self._t.alert_firing.labels(service, cfg.name, cfg.severity, "").set(
            1 if state.firing else 0
        )
        return out

    def _judge_regression(
        self, rule: Rule, service: str, state: RuleState, now: float
    ) -> Alert | None:
        cfg = rule.config
        assert cfg.baseline is not None and state.baseline is not None
        if state.firing and state.last_evaluated is not None:
            state.paused_s += max(0.0, now - state.last_evaluated)
        state.last_evaluated = now
        for gone in state.window.expire(now):
            start = gone.index * state.window.width
            if not state.firing and start >= state.resolved_at:
                state.baseline.add_counts(
                    start - state.paused_s, Moments(gone.samples, gone.defects, gone.squares)
                )
        current = state.window.moments(now)
        base = state.baseline.moments(now - state.paused_s - state.window.window_s)
        state.current, state.reference = current, base
        increase, state.p_value = increase_p_value(current, base)
        self._window_samples.labels(service, cfg.name, "current").set(current.samples)
        self._window_samples.labels(service, cfg.name, "baseline").set(base.samples)
        if current.samples:
            self._t.defect_rate.labels(service, cfg.name).set(current.mean)
        else:
            _remove(self._t.defect_rate, service, cfg.name)
        if base.samples:
            self._baseline_rate.labels(service, cfg.name).set(base.mean)
        else:
            _remove(self._baseline_rate, service, cfg.name)
        min_increase = cfg.min_increase or 0.0
        ready = current.samples >= cfg.min_samples and base.samples >= cfg.baseline.min_samples
        if rule.sequential:
            self._sequential(rule, state, base)
        resolve = current.samples == 0 or (
            increase < min_increase / 2
            # A sequential page may come when the window holds little of the rise: it
            # holds until a whole window has passed since.
            and (not rule.sequential or now - state.started_at >= state.window.window_s)
        )
        if state.firing and resolve:
            state.resolved_at = now
            state.current = current
            if state.sequential is not None:
                state.sequential.reset()
        return self._step(
            rule,
            service,
            "",
            state,
            now,
            fire=ready
            and state.current.mean - base.mean >= min_increase
            and state.p_value <= 1 - cfg.confidence,
            resolve=resolve,
            story=lambda: _story(rule, state),
        )

    def _sequential(self, rule: Rule, state: RuleState, base: Moments) -> None:
        """Feeds what arrived since the last evaluation to the sequential test (against the
        baseline's upper confidence bound, once the baseline holds its `min_samples`), and
        sets `state.p_value` and `state.current` (the test's evidence)."""
        cfg = rule.config
        assert state.sequential is not None and state.pending is not None and cfg.baseline
        pending, state.pending = state.pending, [0] * (rule.steps + 1)
        if base.samples >= cfg.baseline.min_samples and not state.firing:
            variance = base.variance if rule.steps > 1 else base.mean * (1 - base.mean)
            mu = base.mean + one_sided_z(cfg.confidence) * math.sqrt(variance / base.samples)
            if rule.steps == 1:
                variance = mu * (1 - mu)
            state.sequential.update(
                pending,
                [k / rule.steps for k in range(rule.steps + 1)],
                mu,
                variance,
                cfg.min_increase or 0.0,
            )
        state.p_value = state.sequential.p_value()
        evidence = state.sequential.strongest()
        if evidence.samples:
            state.current = evidence

    def _judge_cohorts(
        self, i: int, service: str, states: dict[str, RuleState], now: float
    ) -> list[Alert]:
        """Each cohort of one service against the rest of that service, in the same
        window: the regression rule's test, `min_samples` on both sides."""
        rule = self._rules[i]
        cfg = rule.config
        min_increase = cfg.min_increase or 0.0
        counts = {cohort: state.window.moments(now) for cohort, state in states.items()}
        total = Moments()
        for moments in counts.values():
            total = total.plus(moments)
        out: list[Alert] = []
        for cohort, state in states.items():
            current = counts[cohort]
            self._cohort_samples.labels(service, cfg.name, cohort).set(current.samples)
            if current.samples:
                self._cohort_rate.labels(service, cfg.name, cohort).set(current.mean)
            else:
                _remove(self._cohort_rate, service, cfg.name, cohort)
            if cohort in _UNJUDGED:
                continue
            rest = total.minus(current)
            state.current, state.reference = current, rest
            increase, state.p_value = increase_p_value(current, rest)
            ready = current.samples >= cfg.min_samples and rest.samples >= cfg.min_samples
            alert = self._step(
                rule,
                service,
                cohort,
                state,
                now,
                fire=ready and increase >= min_increase and state.p_value <= 1 - cfg.confidence,
                resolve=current.samples == 0 or increase < min_increase / 2,
                story=functools.partial(_cohort_story, cfg, cohort, service, state),
            )
            if alert is not None:
                out.append(alert)
            self._t.alert_firing.labels(service, cfg.name, cfg.severity, cohort).set(
                1 if state.firing else 0
            )
        return out

    def _step(
        self,
        rule: Rule,
        service: str,
        cohort: str,
        state: RuleState,
        now: float,
        *,
        fire: bool,
        resolve: bool,
        story: Callable[[], str],
    ) -> Alert | None:
        """What one judged state sends: a page when it starts firing (`fire`), a resolve
        when a firing state may resolve (`resolve`), a re-send while it fires (every
        `resend_interval_s`); each first page and resolve is logged with `story()`."""
        cfg = rule.config
        subject = f"{_by(cfg)} {cohort} of {service}" if cohort else service
        if not state.firing:
            if not fire:
                return None
            state.firing, state.started_at, state.last_sent = True, now, now
            log.warning("alert %s firing for %s: %s", cfg.name, subject, story())
            return self._alert(rule, service, cohort, state, now, "firing")
        if resolve:
            state.firing = False
            log.info("alert %s resolved for %s: %s", cfg.name, subject, story())
            return self._alert(rule, service, cohort, state, now, "resolved")
        if now - state.last_sent >= self._resend:
            state.last_sent = now
            return self._alert(rule, service, cohort, state, now, "firing")
        return None

    # -- state across restarts -------------------------------------------------------------

    def _forget_service(self, service: str) -> None:
        """`service` lost its slot: its windows were empty, so nothing is judged on it."""
        for key in [key for key in self._states if key[1] == service]:
            del self._states[key]
        for gauge in (
            self._t.defect_rate,
            self._t.alert_firing,
            self._baseline_rate,
            self._window_samples,
            self._cohort_rate,
            self._cohort_samples,
        ):
            gauge.remove_by_labels({"service": service})

    def _forget_cohort(self, by: str, cohort: str) -> None:
        """`cohort` lost its slot among the cohorts `by` one thing: its windows were empty."""
        rules = {
            i
            for i, rule in enumerate(self._rules)
            if rule.config.cohorts and rule.config.cohorts.by == by
        }
        for key in [key for key in self._states if key[0] in rules and key[2] == cohort]:
            del self._states[key]
        names = {self._rules[i].config.name for i in rules}
        for gauge in (self._t.alert_firing, self._cohort_rate, self._cohort_samples):
            for name in names:
                gauge.remove_by_labels({"rule": name, "cohort": cohort})

    def _longest_window(self) -> float:
        return max((r.window_s + (r.baseline_s or 0.0) for r in self._rules), default=0.0)

    def snapshot(self) -> dict[str, Any]:
        """Every (rule, service, cohort)'s windows and firing state, for the state file:
        `{rule: {"fingerprint", "services": {service: state}}}`, where a cohort rule's
        service holds `{"cohorts": {cohort: state}}`."""
        out: dict[str, Any] = {}
        for (i, service, cohort), state in self._states.items():
            rule = self._rules[i]
            entry = out.setdefault(
                rule.config.name, {"fingerprint": fingerprint(rule), "services": {}}
            )
            if rule.config.cohorts is None:
                entry["services"][service] = state.snapshot()
            else:
                held = entry["services"].setdefault(service, {"cohorts": {}})
                held["cohorts"][cohort] = state.snapshot()
        return out

    def restore(self, saved: dict[str, Any]) -> None:
        """Takes back what `snapshot` gave, for rules that still exist with the same
        evaluator and windows; anything else is logged and left out."""
        by_name = {rule.config.name: i for i, rule in enumerate(self._rules)}
        for name, entry in saved.items():
            i = by_name.get(name)
            if i is None or not isinstance(entry, dict):
                log.warning("alert state of rule %s left out: the rule is gone", name)
                continue
            rule = self._rules[i]
            if entry.get("fingerprint") != fingerprint(rule):
                log.warning("alert state of rule %s left out: the rule changed", name)
                continue
            services = entry.get("services")
            if not isinstance(services, dict):
                log.error("alert state of rule %s is malformed (no services): left out", name)
                self._entries_dropped.labels("load").inc()
                continue
            for service, raw in services.items():
                try:
                    states = self._restored(rule, raw)
                except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
                    log.error(
                        "alert state of rule %s, service %s, is malformed (%r): left out",
                        name,
                        service,
                        exc,
                    )
                    self._entries_dropped.labels("load").inc()
                    continue
                held = self._services(str(service))
                cohorts = rule.config.cohorts
                for cohort, state in states.items():
                    key = self._cohorts[cohorts.by](cohort) if cohorts else ""
                    self._states[(i, held, key)] = state
        restored = self.firing()
        if restored:
            log.info("alert state restored; firing: %s", restored)

    def _restored(self, rule: Rule, raw: Any) -> dict[str, RuleState]:
        """One service's saved states by cohort (`""` for a rule without cohorts)."""
        if rule.config.cohorts is None:
            state = new_state(rule)
            state.restore(raw)
            return {"": state}
        out = {}
        for cohort, saved in raw["cohorts"].items():
            state = new_state(rule)
            state.restore(saved)
            out[str(cohort)] = state
        return out

    def firing(self) -> list[tuple[str, str]]:
        """(rule, service) pairs currently firing; for a cohort rule the service is
        written `service/cohort`."""
        return sorted(
            (self._rules[i].config.name, f"{service}/{cohort}" if cohort else service)
            for (i, service, cohort), state in self._states.items()
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
            if self._state_file is not None:
                await asyncio.to_thread(self._state_file.save, self._clock(), self.snapshot())

    def _alert(
        self,
        rule: Rule,
        service: str,
        cohort: str,
        state: RuleState,
        now: float,
        status: Literal["firing", "resolved"],
    ) -> Alert:
        cfg = rule.config
        lower, upper = state.bounds
        current = state.current
        rate = current.mean
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
        if cfg.cohorts is not None:
            labels["cohort"] = cohort
        # A firing alert that stops being re-sent expires on its own (as Prometheus does).
        ends = now + 4 * max(self._resend, self._interval) if status == "firing" else now
        if cfg.cohorts is not None:
            annotations = _cohort_annotations(cfg, cohort, service, state, what)
        elif cfg.baseline is not None:
            annotations = _regression_annotations(rule, state, what, service)
        else:
            annotations = {
                "summary": (
                    f"{what} defect rate on {service} is {rate:.1%} "
                    f"({current.defects:g}/{current.samples} in {cfg.window})"
                ),
                "description": (
                    f"{cfg.confidence:.0%} Wilson interval [{lower:.3f}, {upper:.3f}] "
                    f"vs max_defect_rate {cfg.max_defect_rate}; min_samples {cfg.min_samples}"
                ),
                "defect_rate": f"{rate:.4f}",
                "lower_bound": f"{lower:.4f}",
                "upper_bound": f"{upper:.4f}",
                "samples": str(current.samples),
            }
        return Alert(
            rule=cfg.name,
            service=service,
            status=status,
            labels=labels,
            annotations=annotations,
            starts_at=_utc(state.started_at),
            ends_at=_utc(ends),
            generator_url=self._generator_url,
        )


def _p(p: float) -> str:
    return f"p = {p:.3f}" if p >= 0.001 else f"p < {_ceil_power(p)}"


def _ceil_power(p: float) -> str:
    exponent = -3
    while p < 10.0 ** (exponent - 1) and exponent > -12:
        exponent -= 1
    return f"{10.0**exponent:g}"


def _measured(cfg: AlertRule) -> str:
    return "mean defect score" if cfg.measure == "scores" else "defect rate"


def _story(rule: Rule, state: RuleState) -> str:
    """ "defect rate 0.49 over 10m against 0.40 over the previous 24h (600 / 86,400
    verdicts), +0.09, p < 0.001"; a sequential rule names the verdicts of its evidence."""
    cfg = rule.config
    assert cfg.baseline is not None
    current, base = state.current, state.reference
    span = (
        f"over the last {current.samples:,} verdicts" if rule.sequential else f"over {cfg.window}"
    )
    test = " (sequential test)" if rule.sequential else ""
    return (
        f"{_measured(cfg)} {current.mean:.2f} {span} against {base.mean:.2f} over the previous "
        f"{cfg.baseline.window} ({current.samples:,} / {base.samples:,} verdicts), "
        f"{current.mean - base.mean:+.2f}, {_p(state.p_value)}{test}"
    )


def _regression_annotations(
    rule: Rule, state: RuleState, what: str, service: str
) -> dict[str, str]:
    current, base = state.current, state.reference
    return {
        "summary": (
            f"{what} {_measured(rule.config)} on {service} rose from {base.mean:.2f} "
            f"to {current.mean:.2f}"
        ),
        "description": _story(rule, state),
        "defect_rate": f"{current.mean:.4f}",
        "baseline_defect_rate": f"{base.mean:.4f}",
        "increase": f"{current.mean - base.mean:.4f}",
        "p_value": f"{state.p_value:.3g}",
        "samples": str(current.samples),
        "baseline_samples": str(base.samples),
    }


def _by(cfg: AlertRule) -> str:
    assert cfg.cohorts is not None
    return cfg.cohorts.by


def _cohort_story(cfg: AlertRule, cohort: str, service: str, state: RuleState) -> str:
    """ "defect rate 0.46 for version v2 against 0.21 for the rest of shop over 30m
    (412 / 1,650 verdicts), +0.25, p < 1e-05"."""
    current, rest = state.current, state.reference
    return (
        f"{_measured(cfg)} {current.mean:.2f} for {_by(cfg)} {cohort} against "
        f"{rest.mean:.2f} for the rest of {service} over {cfg.window} "
        f"({current.samples:,} / {rest.samples:,} verdicts), "
        f"{current.mean - rest.mean:+.2f}, {_p(state.p_value)}"
    )


def _cohort_annotations(
    cfg: AlertRule, cohort: str, service: str, state: RuleState, what: str
) -> dict[str, str]:
    current, rest = state.current, state.reference
    return {
        "summary": (
            f"{what} {_measured(cfg)} of {_by(cfg)} {cohort} on {service} is "
            f"{current.mean:.2f} against {rest.mean:.2f} for the rest"
        ),
        "description": _cohort_story(cfg, cohort, service, state),
        "defect_rate": f"{current.mean:.4f}",
        "rest_defect_rate": f"{rest.mean:.4f}",
        "increase": f"{current.mean - rest.mean:.4f}",
        "p_value": f"{state.p_value:.3g}",
        "samples": str(current.samples),
        "rest_samples": str(rest.samples),
    }


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
