"""The sidecar's alert engine: a result sink that turns verdicts into pages.

Each rule of `alerts.rules[]` watches one evaluator (defect = `fail`, out of pass + fail, or
1 - the normalised score with `measure: scores`) or one safety category (defect = severity
at or above the grading evaluator's `severity_threshold`). Judge errors are not samples: an
evaluator that could not decide says nothing about the service.

`emit` adds each verdict to the windows of the rules that count it, per (rule, service,
cohort); with `alerts.fleet` the rules read the whole fleet's counters from Prometheus
instead (`monitor.alerts.fleet`), so every replica judges the same stream. Every
`alerts.evaluation_interval_s` (and at once when a sequential test reaches its budget) each
entry is judged by its rule's kind — `absolute.py`, `regression.py`, `cohorts.py`, each
returning a `Decision` — and `_step` turns decisions into `Alert`s: a page when an entry
starts firing, a resolve, a re-send every `resend_interval_s` while it fires. Alerts go to
the `Notifier`s (`monitor.exporters.alertmanager`), which queue and deliver them. Every
rule's false pages are bounded by its budget in time (`false_page_every`, default
`alerts.false_page_every`).

A rule with `boost` raises its evaluator's sampling of a service while the evidence builds
(`monitor.boosts`). State is exported as `rag_monitor_defect_rate{service,rule}`,
`rag_monitor_defect_rate_baseline{service,rule}`, `rag_monitor_alert_samples{service,rule,
window}` (why a rule cannot page yet), `rag_monitor_alert_evidence{service,rule}` (how far a
sequential test is towards a page), `rag_monitor_alert_boost_active{service,rule}`,
`rag_monitor_cohort_defect_rate` and `rag_monitor_alert_cohort_samples{service,rule,cohort}`
and `rag_monitor_alert_firing{service,rule,severity,cohort}`. With `alerts.state_file` the
windows, tests and firing states survive a restart (`snapshot`, `restore`, `state.py`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from monitor.alerts import absolute, cohorts, describe, regression
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.rule import Decision, Rule, RuleState, fingerprint, new_state
from monitor.alerts.state import StateFile
from monitor.boosts import SamplingBoosts
from monitor.component import Alert, Notifier
from monitor.config import FALSE_PAGE_EVERY, AlertRule, parse_duration
from monitor.records import RagRecord
from monitor.results import EvalResult, Severity
from monitor.telemetry import LabelCap, Telemetry

if TYPE_CHECKING:
    from monitor.alerts.fleet import FleetReader

log = logging.getLogger(__name__)

DEFAULT_RESEND_INTERVAL_S = 60.0
Key = tuple[int, str, str]  # (rule index, service, cohort)


class AlertEngine:
    """A `ResultSink` that turns evaluation results into alerts (see the module docstring).

    **Parameters:**
    - `rules`: validated `alerts.rules[]`.
    - `telemetry`: where the gauges live; its `service_cap` gives the bound on services and
      its `version_cap` / `route_cap` the bound on cohorts (the windows keep their own slots,
      idle only past the longest window).
    - `notifiers`: Alertmanager / webhook senders.
    - `severity_thresholds`: evaluator name → `severity_threshold` for category rules.
    - `evaluation_interval_s`: how often rules are judged (`alerts.evaluation_interval_s`).
    - `resend_interval_s`: how often a firing alert is re-sent.
    - `generator_url`: where a human can look at the source (the metrics endpoint).
    - `clock`: seconds since the epoch; tests pass their own.
    - `state_file`: where windows and firing states are kept across restarts.
    - `false_page_every`: the budget of rules that name none (`alerts.false_page_every`).
    - `boosts`: where rules with `boost` raise their evaluator's sampling.
    - `fleet`: reads the fleet's counters from Prometheus; the rules judge those instead of
      this replica's own verdicts.
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
        false_page_every: str = FALSE_PAGE_EVERY,
        boosts: SamplingBoosts | None = None,
        fleet: FleetReader | None = None,
    ) -> None:
        thresholds = dict(severity_thresholds or {})
        self._rules = [
            Rule(
                r,
                parse_duration(r.window),
                parse_duration(r.false_page_every or false_page_every),
                r.false_page_every or false_page_every,
                parse_duration(r.baseline.window) if r.baseline else None,
                thresholds,
            )
            for r in rules
        ]
        self._state_file = state_file
        self._gauges = AlertGauges(telemetry)
        self._t = telemetry
        # Windows are keyed on the service's own name, bounded apart from the metrics'
        # labels: a service keeps its windows while they hold verdicts, and a burst of
        # invented names can take only slots that have been idle that long. Cohorts
        # likewise, one cap per kind of cohort.
        self._services = self._cap(telemetry.service_cap, clock)
        self._services.on_evict(self._forget_service)
        self._cohorts: dict[str, LabelCap] = {}
        for rule in self._rules:
            by = rule.config.cohorts.by if rule.config.cohorts else None
            if by is not None and by not in self._cohorts:
                source = telemetry.route_cap if by == "route" else telemetry.version_cap
                cap = self._cohorts[by] = self._cap(source, clock)
                cap.on_evict(functools.partial(self._forget_cohort, by))
        self._notifiers = list(notifiers)
        self._interval = evaluation_interval_s
        self._resend = resend_interval_s
        self._generator_url = generator_url or f"http://{socket.gethostname()}:9464/metrics"
        self._clock = clock
        self._boosts = boosts
        # (rule index, service) whose boost is raised: lowered whenever the evidence fades
        # or the entries that raised it are gone (dropped, or their slots evicted).
        self._boosted: set[tuple[int, str]] = set()
        self._fleet = fleet
        self._states: dict[Key, RuleState] = {}
        self._task: asyncio.Task[None] | None = None
        self._fleet_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._due = False

    def _cap(self, source: LabelCap, clock: Callable[[], float]) -> LabelCap:
        return LabelCap(
            source.limit,
            allowed=source.allowed,
            idle_s=max(source.idle_s, self._longest_window()),
            max_chars=source.max_chars,
            clock=clock,
        )

    @property
    def rules(self) -> Sequence[Rule]:
        return self._rules

    @property
    def evaluation_due(self) -> bool:
        """A sequential test reached its budget since the last evaluation: one is due now."""
        return self._due

    # -- ResultSink -------------------------------------------------------------------

    async def start(self) -> None:
        if self._state_file is not None:
            self.restore(self._state_file.load(self._clock(), self._longest_window()))
        for notifier in self._notifiers:
            await notifier.start()
        if self._task is None and self._rules:
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._loop(), name="alert-engine")
        if self._fleet is not None and self._fleet_task is None:
            self._fleet_task = asyncio.create_task(
                self._fleet.run(self.add_counts), name="alert-fleet-reader"
            )

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        if not self._rules:
            return
        service = self._services(record.service)
        now = self._clock()
        for i, rule in enumerate(self._rules):
            if self._fleet is not None and self._fleet.reads(rule.config):
                continue  # judged on the fleet's counters
            samples = rule.samples(results)
            if not samples:
                continue
            by = rule.config.cohorts.by if rule.config.cohorts else None
            state = self._state((i, service, self._cohorts[by](rule.cohort(record)) if by else ""))
            for value in samples:
                if regression.add(rule, state, value, now):
                    self._wake_up()

    def add_counts(
        self, rule_name: str, service: str, cohort: str, histogram: Sequence[float]
    ) -> None:
        """Verdicts of the whole fleet that arrived since the last read (`histogram[k]`
        values at level k) for the rule named `rule_name` (`monitor.alerts.fleet`)."""
        for i, rule in enumerate(self._rules):
            if rule.config.name != rule_name:
                continue
            by = rule.config.cohorts.by if rule.config.cohorts else None
            state = self._state(
                (i, self._services(service), self._cohorts[by](cohort) if by else "")
            )
            if regression.add_counts(rule, state, histogram, self._clock()):
                self._wake_up()

    def _state(self, key: Key) -> RuleState:
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = new_state(self._rules[key[0]])
        return state

    def _wake_up(self) -> None:
        self._due = True
        if self._wake is not None:
            self._wake.set()

    async def shutdown(self, deadline_s: float) -> None:
        """Stop judging and save the state file; nothing is sent: a firing alert stays
        firing (the next process, reading the state file, goes on judging and resolves
        it; without one its `endsAt` expires it). Notifiers get what is left of
        `deadline_s` to deliver what they queued."""
        started = time.monotonic()
        for task in (self._task, self._fleet_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._fleet_task = None
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
        self._due = False
        now = self._clock()
        out: list[Alert] = []
        groups: dict[tuple[int, str], dict[str, RuleState]] = {}
        for (i, service, cohort), state in self._states.items():
            groups.setdefault((i, service), {})[cohort] = state
        for (i, service), states in groups.items():
            rule = self._rules[i]
            try:
                decisions = self._judge(rule, states, now)
                for cohort, decision in decisions.items():
                    alert = self._step(rule, service, cohort, states[cohort], now, decision)
                    if alert is not None:
                        out.append(alert)
                self._gauges.publish(rule, service, states)
                self._boost(i, service, states)
            except (ArithmeticError, ValueError, TypeError) as exc:
                # One entry (a value restored from a hand-edited state file, say) that cannot
                # be judged is dropped alone; the other alerts of this evaluation go on.
                log.error(
                    "alert %s for service %s cannot be evaluated (%r): its state is dropped",
                    rule.config.name,
                    service,
                    exc,
                )
                self._gauges.entries_dropped.labels("evaluation").inc()
                for cohort in states:
                    del self._states[(i, service, cohort)]
                self._lower(i, service, "its state was dropped")
        return out

    def _judge(self, rule: Rule, states: dict[str, RuleState], now: float) -> dict[str, Decision]:
        """Each state's decision, by the rule's kind."""
        if rule.config.cohorts is not None:
            return cohorts.judge(rule, states, now, self._interval)
        state = states[""]
        if rule.baseline_s is not None:
            return {"": regression.judge(rule, state, now, self._interval)}
        return {"": absolute.judge(rule, state, now, self._interval)}

    def _step(
        self,
        rule: Rule,
        service: str,
        cohort: str,
        state: RuleState,
        now: float,
        decision: Decision,
    ) -> Alert | None:
        """What one judged state sends: a page when it starts firing, a resolve when a
        firing state may resolve, a re-send while it fires (every `resend_interval_s`);
        each first page and resolve is logged with the alert's description."""
        cfg = rule.config
        subject = f"{describe.by(cfg)} {cohort} of {service}" if cohort else service
        if not state.firing:
            if not decision.fire:
                return None
            state.firing, state.started_at, state.last_sent = True, now, now
            alert = self._alert(rule, service, cohort, state, now, "firing")
            log.warning("alert %s firing for %s: %s", cfg.name, subject, _description(alert))
            return alert
        if decision.resolve:
            state.firing = False
            alert = self._alert(rule, service, cohort, state, now, "resolved")
            log.info("alert %s resolved for %s: %s", cfg.name, subject, _description(alert))
            return alert
        if now - state.last_sent >= self._resend:
            state.last_sent = now
            return self._alert(rule, service, cohort, state, now, "firing")
        return None

    def _boost(self, i: int, service: str, states: dict[str, RuleState]) -> None:
        """Raises or lowers rule `i`'s boost of `service` as its evidence comes and goes."""
        rule = self._rules[i]
        boost, evaluator = rule.config.boost, rule.config.evaluator
        if boost is None or evaluator is None or self._boosts is None:
            return
        firing = any(s.firing for s in states.values())
        p = min(s.p_value for s in states.values())
        if not (firing or p < boost.while_p_below):
            self._lower(i, service, "evidence faded")
            return
        if (i, service) in self._boosted:
            return
        self._boosted.add((i, service))
        name = rule.config.name
        self._boosts.raise_rate(evaluator, service, name, boost.sample_rate)
        log.info(
            "alert %s: %s for %s: %s sampled at %g",
            name,
            "firing" if firing else f"evidence building (p = {p:.3g})",
            service,
            evaluator,
            boost.sample_rate,
        )
        self._gauges.boost_active.labels(service, name).set(1)

    def _lower(self, i: int, service: str, why: str) -> None:
        """Lowers rule `i`'s boost of `service`, if raised."""
        if (i, service) not in self._boosted:
            return
        self._boosted.discard((i, service))
        cfg = self._rules[i].config
        assert self._boosts is not None and cfg.evaluator is not None
        self._boosts.lower_rate(cfg.evaluator, service, cfg.name)
        log.info("alert %s: %s for %s: %s back to its rate", cfg.name, why, service, cfg.evaluator)
        self._gauges.boost_active.labels(service, cfg.name).set(0)

    # -- state across restarts -------------------------------------------------------------

    def _forget_service(self, service: str) -> None:
        """`service` lost its slot: its windows were empty, so nothing is judged on it."""
        for key in [key for key in self._states if key[1] == service]:
            del self._states[key]
        for i, held in list(self._boosted):
            if held == service:
                self._lower(i, service, "the service left")
        self._gauges.forget_service(service)

    def _forget_cohort(self, by: str, cohort: str) -> None:
        """`cohort` lost its slot among the cohorts `by` one thing: its windows were empty.
        A service none of whose cohorts is left has nothing to boost on."""
        rules = {
            i
            for i, rule in enumerate(self._rules)
            if rule.config.cohorts and rule.config.cohorts.by == by
        }
        gone = [key for key in self._states if key[0] in rules and key[2] == cohort]
        for key in gone:
            del self._states[key]
        left = {(i, service) for i, service, _ in self._states}
        for i, service, _ in gone:
            if (i, service) not in left:
                self._lower(i, service, "its cohorts left")
        self._gauges.forget_cohort({self._rules[i].config.name for i in rules}, cohort)

    def _longest_window(self) -> float:
        return max((r.window_s + (r.baseline_s or 0.0) for r in self._rules), default=0.0)

    def snapshot(self) -> dict[str, Any]:
        """Every (rule, service, cohort)'s windows, test and firing state, for the state
        file: `{rule: {"fingerprint", "services": {service: state}}}`, where a cohort rule's
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
                self._gauges.entries_dropped.labels("load").inc()
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
                    self._gauges.entries_dropped.labels("load").inc()
                    continue
                held = self._services(str(service))
                by = rule.config.cohorts.by if rule.config.cohorts else None
                for cohort, state in states.items():
                    self._states[(i, held, self._cohorts[by](cohort) if by else "")] = state
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

    def _alert(
        self,
        rule: Rule,
        service: str,
        cohort: str,
        state: RuleState,
        now: float,
        status: Literal["firing", "resolved"],
    ) -> Alert:
        # A firing alert that stops being re-sent expires on its own (as Prometheus does).
        ends = now + 4 * max(self._resend, self._interval) if status == "firing" else now
        return describe.alert(rule, service, cohort, state, status, _utc(ends), self._generator_url)

    def _dispatch(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        for notifier in self._notifiers:
            notifier.notify(alerts)

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            try:
                # A sequential test that reached its budget wakes the loop at once.
                await asyncio.wait_for(self._wake.wait(), self._interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                self._dispatch(self.evaluate())
            except Exception:
                log.exception("alert evaluation failed")
                self._t.dropped.labels("alerts", "internal_error").inc()
            if self._state_file is not None:
                await asyncio.to_thread(self._state_file.save, self._clock(), self.snapshot())


def _description(alert: Alert) -> str:
    return alert.annotations["description"]


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)
