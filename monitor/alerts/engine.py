"""The sidecar's alert engine: a result sink that turns verdicts into pages.

Each rule of `alerts.rules[]` watches one evaluator (defect = `fail`, out of pass + fail, or
1 - the normalised score with `measure: scores`) or one safety category (defect = severity
at or above the grading evaluator's `severity_threshold`). Judge errors are not samples: an
evaluator that could not decide says nothing about the service.

`emit` adds each verdict to the entry of every rule that counts it, per (rule, service,
cohort): at once to the rule's windows and tests, a conversation's with what its earlier
verdicts were (`monitor.alerts.evidence.units`), and each conversation once more when it goes quiet,
as one unit to the history (how verdicts cluster).
A service folded into `other` by the label cap is never a service under test. With
`alerts.fleet` the rules read the whole fleet's counters from Prometheus instead
(`monitor.alerts.fleet`), so every replica judges the same stream.

An entry belongs to one **evaluator revision** (the monitor's version and detector, a
judge's model, prompt and parameters: `EvalResult.revision`): a verdict of another
revision starts the entry anew, with a log line and `alert_baselines_started_total`, and a
firing alert is resolved saying why; late verdicts of the revision just replaced (within
one window of the change) are left out. An evaluator change is not a regression.

Every `alerts.evaluation_interval_s` (and at once when a test reaches its budget) each
(rule, service) is judged by its rule's kind (`monitor.alerts.kinds`: absolute, regression,
cohorts), which returns a `Judgment` per cohort; `_step` turns judgments into `Alert`s: a
page when an entry starts firing, a resolve, a re-send every `resend_interval_s` while it
fires, and the page's `Where` alert when it first names a slice (`monitor.alerts.attribution`).
With `alerts.fleet` replicas never send a resolve: an alert ends when no replica re-sends
it (its `endsAt`). Alerts go to the `Notifier`s (`monitor.exporters.alertmanager`).

A rule with `boost` raises its evaluator's sampling of a service while its evidence builds
(`monitor.boosts`), with the rule's own thresholds met. With `alerts.state_file` the
entries survive a restart (`snapshot`, `restore`, `state.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from monitor.alerts import describe
from monitor.alerts.attribution import Attribution, Explanation, retrieval_verdict
from monitor.alerts.boosting import RaisedBoosts
from monitor.alerts.entries import CONVERSATION_BUDGET, Entries, Key, add_part
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Entry, Judgment, Kind
from monitor.alerts.kinds.forms import kind_for
from monitor.alerts.rule import Origin, Rule
from monitor.alerts.state import StateFile
from monitor.alerts.subjects import Subjects
from monitor.boosts import SamplingBoosts
from monitor.component import Alert, Notifier
from monitor.config import FALSE_PAGE_EVERY, AlertRule, parse_duration
from monitor.records import RagRecord
from monitor.records.where import Where
from monitor.results import EvalResult, Severity
from monitor.telemetry import OVERFLOW, Telemetry

if TYPE_CHECKING:
    from monitor.alerts.fleet import FleetReader

log = logging.getLogger(__name__)

DEFAULT_CONVERSATION_IDLE = "10m"
EVICTIONS_LOGGED_EVERY_S = 60.0


class AlertEngine:
    """A `ResultSink` that turns evaluation results into alerts (see the module docstring).

    **Parameters:**
    - `rules`, `evaluation_interval_s`, `false_page_every`, `conversation_idle`,
      `trace_url`: the `alerts.*` keys of those names (`rules` validated).
    - `telemetry`: where the gauges live; its `service_cap` gives the bound on services and
      its `version_cap` / `route_cap` the bound on cohorts (the engine keeps its own slots,
      idle only past the longest window).
    - `notifiers`: Alertmanager / webhook senders; `severity_thresholds`: evaluator name →
      `severity_threshold` for category rules.
    - `resend_interval_s`: how often a firing alert is re-sent.
    - `generator_url`: where a human can look at the source (the metrics endpoint).
    - `clock`: seconds since the epoch; tests and `backtest` pass their own.
    - `state_file`: where entries are kept across restarts.
    - `boosts`: where rules with `boost` raise their evaluator's sampling.
    - `fleet`: reads the fleet's counters from Prometheus; the rules judge those instead of
      this replica's own verdicts, and never send a resolve.
    - `conversation_budget`: the bytes all rules' conversations may hold together
      (`monitor.alerts.entries`).
    """

    def __init__(
        self,
        rules: Sequence[AlertRule],
        telemetry: Telemetry,
        notifiers: Sequence[Notifier] = (),
        *,
        severity_thresholds: Mapping[str, Severity] | None = None,
        evaluation_interval_s: float = 15.0,
        resend_interval_s: float = describe.DEFAULT_RESEND_INTERVAL_S,
        generator_url: str | None = None,
        clock: Callable[[], float] = time.time,
        state_file: StateFile | None = None,
        false_page_every: str = FALSE_PAGE_EVERY,
        conversation_idle: str = DEFAULT_CONVERSATION_IDLE,
        boosts: SamplingBoosts | None = None,
        fleet: FleetReader | None = None,
        trace_url: str | None = None,
        conversation_budget: int = CONVERSATION_BUDGET,
    ) -> None:
        thresholds = dict(severity_thresholds or {})
        self._rules = [Rule.of(r, false_page_every, thresholds) for r in rules]
        self._kinds: list[Kind] = [kind_for(rule, evaluation_interval_s) for rule in self._rules]
        # Where a page's excess is: the slices, retriever or generator, the traces.
        self.attribution = Attribution(
            self._rules, telemetry, evaluation_interval_s, trace_url=trace_url, clock=clock
        )
        self._state_file = state_file
        self._gauges = AlertGauges(telemetry)
        self._t = telemetry
        # Entries are keyed on the service's own name, bounded apart from the metrics' labels.
        self._subjects = Subjects(
            self._rules,
            telemetry,
            self._longest_window(),
            clock,
            forget_service=self._forget_service,
            forget_cohort=self._forget_cohort,
        )
        self._notifiers = list(notifiers)
        # What a firing page on an evaluator's verdicts adds (pipeline: a judge that changed).
        self.evaluator_note: Callable[[str | None], str | None] = lambda evaluator: None
        self._interval = evaluation_interval_s
        self._resend = resend_interval_s
        self._generator_url = generator_url or f"http://{socket.gethostname()}:9464/metrics"
        self._clock = clock
        self._boosted = RaisedBoosts(self._rules, boosts, self._gauges)
        self._fleet = fleet
        self._fleet_rules = {
            i
            for i, rule in enumerate(self._rules)
            if fleet is not None and fleet.reads(rule.config)
        }
        self._evicted = telemetry.counter(
            "alert_conversations_evicted",
            "Conversations the alert rules forgot early, oldest first, to keep their memory "
            "within its budget, by state (open: closed into its unit early; closed: no "
            "longer remembered).",
            ("state",),
        )
        self._evictions_logged = -math.inf
        self._idle_s = parse_duration(conversation_idle)
        self._entries = Entries(
            self._rules,
            self._kinds,
            self._idle_s,
            conversation_budget,
            self._count_evictions,
        )
        # Resolves decided between evaluations (an evaluator revision replaced a firing
        # entry's), returned by the next `evaluate`.
        self._resolved: list[Alert] = []
        self._companions: list[Alert] = []
        self._task: asyncio.Task[None] | None = None
        self._fleet_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._due = False

    @property
    def rules(self) -> Sequence[Rule]:
        return self._rules

    @property
    def evaluation_due(self) -> bool:
        """A test reached its budget since the last evaluation: one is due now."""
        return self._due

    # -- ResultSink -------------------------------------------------------------------

    async def start(self) -> None:
        if self._state_file is not None:
            # Reading and parsing, off the event loop; restoring, on it.
            saved = await asyncio.to_thread(
                self._state_file.load, self._clock(), self._longest_memory()
            )
            self.restore(saved, release=True)
            del saved
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
        if self._rules:
            self.count_results(Origin.of(record), results, self._clock(), Where.of(record))

    def count_results(
        self,
        origin: Origin,
        results: Mapping[str, EvalResult],
        now: float,
        where: Where | None = None,
    ) -> None:
        """The verdicts of one record's `results`, for every rule that counts them (and,
        with `where`, the record's dimensions for the attribution)."""
        retrieval = retrieval_verdict(results) if where is not None else None
        for i, rule in enumerate(self._rules):
            if i in self._fleet_rules:
                continue  # judged on the fleet's counters
            values = rule.samples(results)
            if not values:
                continue
            histogram = [0.0] * (rule.steps + 1)
            for value in values:
                histogram[round(value * rule.steps)] += 1
            key = self.count(i, origin, histogram, rule.revision(results), now)
            if key is not None and where is not None:
                self.attribution.observe(key, where, histogram, retrieval, now)

    def add_counts(
        self,
        rule_name: str,
        service: str,
        cohort: str,
        histogram: Sequence[float],
        revision: str | None = None,
    ) -> None:
        """Verdicts of the whole fleet that arrived since the last read (`histogram[k]`
        values at level k, of evaluator `revision`) for the rule named `rule_name`
        (`monitor.alerts.fleet`)."""
        i = self.rule_index(rule_name)
        if i is not None:
            by = self._rules[i].cohort_by
            origin = Origin(service, **({by: cohort} if by else {}))
            self.count(i, origin, histogram, revision, self._clock())

    def count(
        self,
        i: int,
        origin: Origin,
        histogram: Sequence[float],
        revision: str | None,
        now: float,
    ) -> Key | None:
        """`histogram[k]` verdicts at level `k / steps` for rule `i`, from `origin`, of
        evaluator `revision` (None: not known). A service folded into `other` by the cap is
        no service under test; a cohort past its cap counts in the rest. Returns the entry
        they went to (None: none)."""
        service = self._subjects.service(origin.service)
        if service == OVERFLOW:
            return None
        cohort = self._subjects.cohort(self._rules[i].cohort_by, self._rules[i].cohort(origin))
        self._add(
            (i, service, cohort), histogram, revision, origin.conversation, now, origin.fingerprint
        )
        return (i, service, cohort)

    def rule_index(self, name: str) -> int | None:
        for i, rule in enumerate(self._rules):
            if rule.config.name == name:
                return i
        return None

    def _add(
        self,
        key: Key,
        histogram: Sequence[float],
        revision: str | None,
        conversation: str | None,
        now: float,
        request: str | None = None,
    ) -> None:
        """`histogram` for entry `key` (a rule index, service and cohort as the caps hold
        them), of `conversation` and `request` (the conversation id, the request's
        fingerprint; None: not known)."""
        added = self._entries.add(key, histogram, revision, conversation, now, request)
        if added.replaced is not None:
            self._new_revision(key, added.replaced, added.revision, now)
        if added.due:
            self._wake_up()

    def _new_revision(self, key: Key, old: Entry, revision: str | None, now: float) -> None:
        """`key`'s evaluator changed from `old`'s revision to `revision`: logged, counted,
        and a page `old` held resolved, saying why (sent with the next evaluation)."""
        i, service, cohort = key
        rule = self._rules[i]
        name = rule.config.name
        log.warning(
            "alert %s for %s: %s is now revision %s (was %s): a new baseline starts, and "
            "the rule judges again once it holds one",
            name,
            f"{service}/{cohort}" if cohort else service,
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
            last = old.judgment or Judgment(fire=False, resolve=True)
            judgment = dataclasses.replace(last, fire=False, resolve=True, note=note)
            self._resolved.append(
                self._alert(rule, service, cohort, old, judgment, now, "resolved")
            )
        self.attribution.forget(lambda k: k != key)

    def _count_evictions(self, opened: int, closed: int) -> None:
        self._evicted.labels("open").inc(opened)
        self._evicted.labels("closed").inc(closed)
        now = self._clock()
        if now - self._evictions_logged >= EVICTIONS_LOGGED_EVERY_S:
            self._evictions_logged = now
            log.warning(
                "alert rules' conversations reached their memory budget (%d bytes): the "
                "oldest forgotten, %d open (closed into their units early) and %d closed; "
                "an app that writes each request its own conversation id fills it (this is "
                "logged at most once a minute, alert_conversations_evicted_total counts all)",
                self._entries.conversation_bytes,
                opened,
                closed,
            )

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
        await self._save()
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
        out, self._resolved = self._resolved, []
        for (i, service), entries in self._entries.groups().items():
            rule, kind = self._rules[i], self._kinds[i]
            try:
                for cohort in entries:
                    self._entries.close_idle((i, service, cohort), now)
                judgments = kind.judge(entries, now)
                for cohort, judgment in judgments.items():
                    entry = entries[cohort]
                    entry.judgment = judgment
                    alert = self._step(i, service, cohort, entry, judgment, now)
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
                self._drop([(i, service, cohort) for cohort in entries])
                self._boosted.lower(i, service, "its state was dropped")
        # The pages' `Where` alerts (`monitor.alerts.attribution`), after them.
        out, self._companions = out + self._companions, []
        return out

    def _step(
        self, i: int, service: str, cohort: str, entry: Entry, judgment: Judgment, now: float
    ) -> Alert | None:
        """What one judged entry sends: a page when it starts firing, a resolve when a
        firing entry may resolve, a re-send while it fires (every `resend_interval_s`);
        each first page and resolve is logged with the alert's description."""
        rule = self._rules[i]
        name = rule.config.name
        subject = f"{rule.cohort_by} {cohort} of {service}" if cohort else service
        if not entry.firing:
            if not judgment.fire:
                return None
            entry.firing, entry.started_at, entry.last_sent = True, now, now
            alert = self._alert(rule, service, cohort, entry, judgment, now, "firing")
            log.warning("alert %s firing for %s: %s", name, subject, describe.log_text(alert))
            return alert
        if judgment.resolve:
            entry.firing = False
            alert = self._alert(rule, service, cohort, entry, judgment, now, "resolved")
            if i in self._fleet_rules:
                log.info(
                    "alert %s resolved for %s: %s (not sent: with alerts.fleet an alert "
                    "ends when no replica re-sends it)",
                    name,
                    subject,
                    describe.log_text(alert),
                )
                return None
            log.info("alert %s resolved for %s: %s", name, subject, describe.log_text(alert))
            return alert
        # A slice first named between re-sends goes out at once (its `Where` alert). A
        # clock that stepped back before the last send re-sends now, never waits for it.
        due = now - entry.last_sent >= self._resend or now < entry.last_sent
        if due or self.attribution.names_first((i, service, cohort), judgment, now, entry.where):
            entry.last_sent = now
            alert = self._alert(rule, service, cohort, entry, judgment, now, "firing")
            if not due:
                log.warning(
                    "alert %s for %s says where: %s", name, subject, describe.log_text(alert)
                )
            return alert
        return None

    # -- bounded services and cohorts --------------------------------------------------

    def _forget_service(self, service: str) -> None:
        """`service` lost its slot: its entries were idle, so nothing is judged on it."""
        self._drop([key for key in self._entries if key[1] == service])
        self._boosted.lower_service(service, "the service left")
        self._gauges.forget_service(service)

    def _forget_cohort(self, by: str, cohort: str) -> None:
        """`cohort` lost its slot among the cohorts `by` one thing: its entries were idle.
        A service none of whose cohorts is left has nothing to boost on."""
        rules = {i for i, rule in enumerate(self._rules) if rule.cohort_by == by}
        gone = [key for key in self._entries if key[0] in rules and key[2] == cohort]
        self._drop(gone)
        left = {(i, service) for i, service, _ in self._entries}
        for i, service, _ in gone:
            if (i, service) not in left:
                self._boosted.lower(i, service, "its cohorts left")
        self._gauges.forget_cohort({self._rules[i].config.name for i in rules}, cohort)

    def _drop(self, gone: Sequence[Key]) -> None:
        self._entries.drop(gone)
        self.attribution.forget(lambda key: key not in gone)

    @property
    def judging_window_s(self) -> float:
        """How long after the last verdict a judgment can still change without a firing
        alert (what resolves one may take up to `longest_window_s`): the rules' current
        windows (an SLO rule's longest burn-rate window) and the conversations' idle time."""
        windows = [
            max(parse_duration(row.long) for row in r.config.slo.burn_rates)
            if r.config.slo is not None
            else r.window_s
            for r in self._rules
        ]
        return max([self._idle_s, *windows])

    @property
    def longest_window_s(self) -> float:
        """The longest any rule counts a verdict in its windows (a regression rule's
        current and baseline windows)."""
        return self._longest_window()

    def _longest_window(self) -> float:
        return max((r.window_s + (r.baseline_s or 0.0) for r in self._rules), default=0.0)

    def _longest_memory(self) -> float:
        """How long saved state stays of use: a regression rule's history spans weeks."""
        return max((r.memory_s for r in self._rules), default=0.0)

    # -- state across restarts ---------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Every entry, for the state file (`Entries.snapshot`)."""
        return self._entries.snapshot()

    def restore(self, saved: dict[str, Any], *, release: bool = False) -> None:
        """Takes back what `snapshot` gave (`Entries.restore`; `release`: `saved` is
        emptied as it is restored)."""

        def place(i: int, service: str, cohort: str) -> Key:
            by = self._rules[i].cohort_by
            return (i, self._subjects.service(service), self._subjects.cohort(by, cohort))

        dropped = self._entries.restore(saved, place, self._clock(), release=release)
        if dropped:
            self._gauges.entries_dropped.labels("load").inc(dropped)
        restored_firing = self.firing()
        if restored_firing:
            log.info("alert state restored; firing: %s", restored_firing)

    def firing(self) -> list[tuple[str, str]]:
        """(rule, service) pairs currently firing; for a cohort rule the service is
        written `service/cohort`."""
        return self._entries.firing()

    def _alert(
        self,
        rule: Rule,
        service: str,
        cohort: str,
        entry: Entry,
        judgment: Judgment,
        now: float,
        status: Literal["firing", "resolved"],
    ) -> Alert:
        # A firing alert that stops being re-sent expires on its own (as Prometheus does).
        ends = now + 4 * max(self._resend, self._interval) if status == "firing" else now
        i = self._rules.index(rule)
        annotations = self._kinds[i].describe(service, cohort, judgment)
        if entry.revision is not None:
            annotations["evaluator_revision"] = entry.revision
        explanation: Explanation | None = None
        if status == "firing":
            explanation = self.attribution.explain((i, service, cohort), judgment, now)
            annotations.update(explanation.annotations())
            note = self.evaluator_note(rule.config.evaluator)
            if note:
                annotations["description"] = f"{annotations['description'].rstrip('.')}. {note}"
                annotations["judge_changed"] = note
        alert = describe.alert(
            rule,
            service,
            cohort,
            annotations,
            entry.started_at,
            status,
            describe.utc(ends),
            self._generator_url,
            judgment.severity,
        )
        key = (i, service, cohort)
        companions, entry.where = self.attribution.sent(key, alert, explanation, entry.where)
        self._companions.extend(companions)
        return alert

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
            await self._save()

    async def _save(self) -> None:
        """The state file, written in a thread from a snapshot taken an entry at a time
        (`Entries.snapshot_parts`), so the event loop serves other work in between."""
        if self._state_file is None:
            return
        saved: dict[str, Any] = {}
        for part in self._entries.snapshot_parts():
            add_part(saved, part)
            await asyncio.sleep(0)
        await asyncio.to_thread(self._state_file.save, self._clock(), saved)
