"""The firing state machine, the one place that moves an entry's firing state, as
Prometheus's alerting rule does (`Firing._step`); and the boosts rules raise while their
evidence builds (`RaisedBoosts`; docs/alerts.md, "Evidence-driven sampling"). With
`alerts.fleet` replicas never send a resolve: an alert ends when no replica re-sends it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping, Sequence

from monitor.alerts import describe
from monitor.alerts.attribution import Attribution
from monitor.alerts.entries import Entries
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Decision, Entry, Judgment, Key, RuleKind, series
from monitor.alerts.outbox import Outbox
from monitor.alerts.rule import Rule
from monitor.boosts import SamplingBoosts
from monitor.component import Alert

# The engine's logger: what users filter on is one name for the engine's lines.
log = logging.getLogger("monitor.alerts.engine")


class Firing:
    """The state machine over `entries`, and what goes with entries that go (dropped, or
    their service's or cohort's slot evicted); the rules of `fleet_rules` (indexes) send no
    resolve."""

    def __init__(
        self,
        rules: Sequence[Rule],
        kinds: Sequence[RuleKind],
        entries: Entries,
        outbox: Outbox,
        *,
        gauges: AlertGauges,
        attribution: Attribution,
        boosted: RaisedBoosts,
        resend_s: float,
        fleet_rules: Collection[int],
    ) -> None:
        self._rules = rules
        self._kinds = kinds
        self._entries = entries
        self._outbox = outbox
        self._gauges = gauges
        self.attribution = attribution
        self._boosted = boosted
        self._resend = resend_s
        self._fleet_rules = fleet_rules

    def evaluate(self, now: float) -> list[Alert]:
        """Every (rule, service) advanced to `now` and judged by its kind (which changes
        nothing); the gauges updated; returns what must be sent."""
        out: list[Alert] = []
        for (i, service), entries in self._entries.groups().items():
            rule, kind = self._rules[i], self._kinds[i]
            try:
                for cohort in entries:
                    self._entries.advance((i, service, cohort), now)
                judgments = kind.judge(entries, now)
                for cohort, judgment in judgments.items():
                    alert = self._step((i, service, cohort), entries[cohort], judgment, now)
                    if alert is not None:
                        out.append(alert)
                kind.publish(self._gauges, service, entries)
                fallback = any(self._entries.fallback((i, service, c)) for c in entries)
                self._gauges.fallback(service, rule.config.name, fallback)
                self._boosted.follow(i, service, entries, judgments)
            except (ArithmeticError, ValueError, TypeError, KeyError) as exc:
                # One entry (a value restored from a hand-edited state file, say) that cannot
                # be judged is dropped alone; the other alerts of this evaluation go on.
                log.error(
                    "alert %s for service %s cannot be evaluated (%r): its state is dropped",
                    rule.config.name,
                    service,
                    exc,
                )
                self._gauges.entries_dropped.labels("evaluation").inc()
                self.drop([(i, service, cohort) for cohort in entries])
                self._boosted.lower(i, service, "its state was dropped")
        return self._outbox.take(out)

    def _step(self, key: Key, entry: Entry, judgment: Judgment, now: float) -> Alert | None:
        """A page when `judgment` fires the entry, a resolve (and the kind's `settle`, its
        side effects) when it resolves it, a re-send while it fires (every
        `resend_interval_s`, or at once when a slice is first named: its `Where` alert);
        each first page and resolve logged. Returns what is sent."""
        i, service, cohort = key
        rule = self._rules[i]
        name = rule.config.name
        subject = f"{rule.cohort_by} {cohort} of {service}" if cohort else service
        entry.judgment = judgment
        if judgment.decision is Decision.FIRE and not entry.firing:
            entry.firing, entry.started_at, entry.last_sent = True, now, now
            entry.severity, entry.fired = judgment.severity, judgment
            alert = self._outbox.alert(key, entry, judgment, now, "firing")
            log.warning("alert %s firing for %s: %s", name, subject, describe.log_text(alert))
            return alert
        if not entry.firing:
            return None
        if judgment.decision is Decision.RESOLVE:
            entry.firing, entry.severity, entry.fired = False, None, None
            self._kinds[i].settle(entry, judgment, now)
            alert = self._outbox.alert(key, entry, judgment, now, "resolved")
            fleet = i in self._fleet_rules
            unsent = " (not sent: with alerts.fleet an alert ends when no replica re-sends it)"
            text = describe.log_text(alert) + (unsent if fleet else "")
            log.info("alert %s resolved for %s: %s", name, subject, text)
            return None if fleet else alert
        # A clock that stepped back before the last send re-sends now, never waits for it.
        due = now - entry.last_sent >= self._resend or now < entry.last_sent
        if due or self.attribution.names_first(key, judgment, now, entry.where):
            entry.last_sent = now
            alert = self._outbox.alert(key, entry, judgment, now, "firing")
            if not due:
                log.warning(
                    "alert %s for %s says where: %s", name, subject, describe.log_text(alert)
                )
            return alert
        return None

    def new_revision(self, key: Key, old: Entry, revision: str | None, now: float) -> None:
        """`key`'s evaluator changed from `old`'s revision to `revision`: logged, counted,
        and a page `old` held resolved, saying why (sent with the next evaluation)."""
        rule = self._rules[key[0]]
        name = rule.config.name
        log.warning(
            "alert %s for %s: %s is now revision %s (was %s): a new baseline starts, and "
            "the rule judges again once it holds one",
            name,
            series(key),
            rule.config.evaluator or rule.config.category,
            revision,
            old.revision,
        )
        self._gauges.baselines_started.labels(name, "revision").inc()
        if old.firing:
            note = (
                f"the evaluator changed (revision {old.revision} -> {revision}): "
                "a new baseline starts"
            )
            last = old.judgment or Judgment(Decision.RESOLVE)
            judgment = dataclasses.replace(last, decision=Decision.RESOLVE, note=note)
            self._outbox.later(self._outbox.alert(key, old, judgment, now, "resolved"))
        self.attribution.forget(lambda k: k != key)

    # -- entries that go -----------------------------------------------------------------

    def forget_service(self, service: str) -> None:
        """`service` lost its slot: its entries were idle, so nothing is judged on it."""
        self.drop([key for key in self._entries if key[1] == service])
        self._boosted.lower_service(service, "the service left")
        self._gauges.forget_service(service)

    def forget_cohort(self, by: str, cohort: str) -> None:
        """`cohort` lost its slot among the cohorts `by` one thing: its entries were idle.
        A service none of whose cohorts is left has nothing to boost on."""
        rules = {i for i, rule in enumerate(self._rules) if rule.cohort_by == by}
        gone = [key for key in self._entries if key[0] in rules and key[2] == cohort]
        self.drop(gone)
        left = {(i, service) for i, service, _ in self._entries}
        for i, service, _ in gone:
            if (i, service) not in left:
                self._boosted.lower(i, service, "its cohorts left")
        self._gauges.forget_cohort({self._rules[i].config.name for i in rules}, cohort)

    def drop(self, gone: Sequence[Key]) -> None:
        self._entries.drop(gone)
        self.attribution.forget(lambda key: key not in gone)


class RaisedBoosts:
    """Which (rule index, service) has raised its boost."""

    def __init__(
        self, rules: Sequence[Rule], boosts: SamplingBoosts | None, gauges: AlertGauges
    ) -> None:
        self._rules = rules
        self._boosts = boosts
        self._gauges = gauges
        self._raised: set[tuple[int, str]] = set()

    def follow(
        self, i: int, service: str, entries: Mapping[str, Entry], judgments: Mapping[str, Judgment]
    ) -> None:
        """Raises or lowers rule `i`'s boost of `service` as its evidence comes and goes."""
        rule = self._rules[i]
        boost, evaluator = rule.config.boost, rule.config.evaluator
        if boost is None or evaluator is None or self._boosts is None:
            return
        firing = any(entry.firing for entry in entries.values())
        p = min((j.p_value for j in judgments.values()), default=1.0)
        if not (firing or p < boost.while_p_below):
            self.lower(i, service, "evidence faded")
            return
        if (i, service) in self._raised:
            return
        self._raised.add((i, service))
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

    def lower(self, i: int, service: str, why: str) -> None:
        """Lowers rule `i`'s boost of `service`, if raised."""
        if (i, service) not in self._raised:
            return
        self._raised.discard((i, service))
        cfg = self._rules[i].config
        assert self._boosts is not None and cfg.evaluator is not None
        self._boosts.lower_rate(cfg.evaluator, service, cfg.name)
        log.info("alert %s: %s for %s: %s back to its rate", cfg.name, why, service, cfg.evaluator)
        self._gauges.boost_active.labels(service, cfg.name).set(0)

    def lower_service(self, service: str, why: str) -> None:
        for i, held in list(self._raised):
            if held == service:
                self.lower(i, service, why)
