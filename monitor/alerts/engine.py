"""The sidecar's alert engine: a result sink that turns verdicts into pages (the map:
monitor/alerts/README.md; what a rule decides: docs/alerts.md).

`emit` adds each verdict a rule counts (`Rule.samples`: judge errors are none) to the
entry of its (rule, service, cohort) (`monitor.alerts.entries`); a service folded into
`other` by the label cap is none under test, and with `alerts.fleet` the fleet's counters
come instead (`add_counts`). A verdict of another evaluator revision starts an entry anew
and resolves its page saying why (`Firing.new_revision`). Every `evaluation_interval_s`,
and at once when a test reaches its budget, `monitor.alerts.firing` judges and moves the
firing state; alerts go out through the `Outbox`; with `alerts.state_file` the entries
survive a restart.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from monitor.alerts import describe
from monitor.alerts.attribution import Attribution
from monitor.alerts.counting import Counting
from monitor.alerts.entries import CONVERSATION_BUDGET, Entries
from monitor.alerts.firing import Firing, RaisedBoosts
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Key, Reported, RuleKind
from monitor.alerts.kinds.pick import kind_for
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.outbox import Outbox
from monitor.alerts.rule import (
    Origin,
    Rule,
    judging_window_s,
    longest_memory_s,
    longest_window_s,
    rules_of,
    severity_thresholds,
)
from monitor.alerts.state import StateFile, add_part
from monitor.alerts.subjects import Subjects
from monitor.boosts import SamplingBoosts
from monitor.component import Alert, Evaluated, Held, Notifier
from monitor.config import FALSE_PAGE_EVERY, AlertRule, Config, JudgeChangedRule, parse_duration
from monitor.records.where import Where
from monitor.results import Results, Severity
from monitor.telemetry import Telemetry

if TYPE_CHECKING:
    from monitor.alerts.fleet import FleetReader

log = logging.getLogger(__name__)

DEFAULT_CONVERSATION_IDLE = "10m"


class AlertEngine:
    """A `ResultSink` that turns evaluation results into alerts (see the module docstring).
    `from_config` makes it from the config, as the pipeline and `backtest` do: most keyword
    arguments are the `alerts.*` keys of those names; `severity_thresholds` are the graders'
    for category rules, `generator_url` where a human looks at the source, `clock` seconds
    since the epoch (tests pass their own). `telemetry`'s caps bound the services and
    cohorts kept (the engine's own slots, idle only past the longest window)."""

    def __init__(
        self,
        rules: Sequence[AlertRule | JudgeChangedRule],
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
        self._kinds: list[RuleKind] = [
            kind_for(rule, evaluation_interval_s) for rule in self._rules
        ]
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
            longest_window_s(self._rules),
            clock,
            forget_service=lambda service: self._firing.forget_service(service),
            forget_cohort=lambda by, cohort: self._firing.forget_cohort(by, cohort),
        )
        # Told, once the state file is restored (`start`), what revision each regression
        # baseline holds (`baselines`): a monitor release that carries the previous revision
        # of an evaluator decides by it whether that revision shadows itself.
        self.restored: list[Callable[[Mapping[str, list[Held]]], None]] = []
        # What a firing page on an evaluator's verdicts adds (pipeline: a judge that changed).
        self.evaluator_note: Callable[[str | None], str | None] = lambda evaluator: None
        self._interval = evaluation_interval_s
        self._outbox = Outbox(
            self._rules,
            self._kinds,
            self.attribution,
            notifiers,
            resend_s=resend_interval_s,
            interval_s=evaluation_interval_s,
            generator_url=generator_url or f"http://{socket.gethostname()}:9464/metrics",
            evaluator_note=lambda evaluator: self.evaluator_note(evaluator),
        )
        self._clock = clock
        self._fleet = fleet
        self._fleet_rules = {
            i
            for i, rule in enumerate(self._rules)
            if fleet is not None and fleet.reads(rule.config)
        }
        self._idle_s = parse_duration(conversation_idle)
        self._entries = Entries(
            self._rules,
            self._kinds,
            self._idle_s,
            conversation_budget,
            lambda opened, closed: self._gauges.evicted(
                opened, closed, self._entries.conversation_bytes, self._clock()
            ),
        )
        self._firing = Firing(
            self._rules,
            self._kinds,
            self._entries,
            self._outbox,
            gauges=self._gauges,
            attribution=self.attribution,
            boosted=RaisedBoosts(self._rules, boosts, self._gauges),
            resend_s=resend_interval_s,
            fleet_rules=self._fleet_rules,
        )
        self._counting = Counting(
            self._rules,
            fleet_rules=self._fleet_rules,
            subjects=self._subjects,
            entries=self._entries,
            firing=self._firing,
            attribution=self.attribution,
            telemetry=telemetry,
            clock=clock,
            wake_up=self._wake_up,
        )
        self._task: asyncio.Task[None] | None = None
        self._fleet_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._due = False

    @classmethod
    def from_config(
        cls,
        config: Config,
        telemetry: Telemetry,
        notifiers: Sequence[Notifier] = (),
        *,
        clock: Callable[[], float] = time.time,
        state_file: StateFile | None = None,
        boosts: SamplingBoosts | None = None,
        fleet: FleetReader | None = None,
    ) -> AlertEngine:
        """The engine of `config`'s `alerts` (with the evaluators' severity thresholds, the
        fleet-aware resend interval and this host's metrics endpoint), as the pipeline and
        `backtest` make it."""
        alerts = config.alerts
        return cls(
            rules_of(config),
            telemetry,
            notifiers,
            severity_thresholds=severity_thresholds(config),
            evaluation_interval_s=alerts.evaluation_interval_s,
            resend_interval_s=describe.resend_interval_s(alerts),
            generator_url=describe.generator_url(config),
            clock=clock,
            state_file=state_file,
            false_page_every=alerts.false_page_every,
            conversation_idle=alerts.conversation_idle,
            boosts=boosts,
            fleet=fleet,
            trace_url=alerts.trace_url,
            conversation_budget=alerts.conversation_budget_bytes,
        )

    @property
    def rules(self) -> Sequence[Rule]:
        return self._rules

    @property
    def evaluation_due(self) -> bool:
        """A test reached its budget since the last evaluation: one is due now."""
        return self._due

    # -- ResultSink, and what else counts verdicts (`Counting`) ---------------------------

    def emit(self, batch: Sequence[Evaluated]) -> None:
        """Each record's own verdicts, then its other revisions' (`Counting.emit`)."""
        self._counting.emit(batch)

    def count_results(
        self,
        origin: Origin,
        results: Results,
        now: float,
        where: Where | None = None,
        paired: Results | None = None,
    ) -> None:
        """One record's verdicts (`Counting.count_results`: `backtest` replays them)."""
        self._counting.count_results(origin, results, now, where, paired)

    def count_shadow(self, origin: Origin, shadow: Results, now: float, own: Results) -> None:
        """Verdicts of revisions scoring a record in shadow (`Counting.count_shadow`)."""
        self._counting.count_shadow(origin, shadow, now, own)

    def add_counts(
        self,
        rule_name: str,
        service: str,
        cohort: str,
        histogram: Sequence[float],
        revision: str | None = None,
    ) -> None:
        """The fleet's verdicts for one rule (`Counting.add_counts`; `monitor.alerts.fleet`)."""
        self._counting.add_counts(rule_name, service, cohort, histogram, revision)

    def count(
        self,
        i: int,
        origin: Origin,
        histogram: Sequence[float],
        revision: str | None,
        now: float,
        paired: Sequence[float] | None = None,
    ) -> Key | None:
        """Verdicts for rule `i` as a histogram (`Counting.count`); the entry they went to."""
        return self._counting.count(i, origin, histogram, revision, now, paired)

    async def start(self) -> None:
        if self._state_file is not None:
            # Reading and parsing, off the event loop; restoring, on it.
            saved = await asyncio.to_thread(
                self._state_file.load, self._clock(), longest_memory_s(self._rules)
            )
            self.restore(saved, release=True)
            del saved
        if self.restored:
            held = self.baselines()
            for told in self.restored:
                told(held)
        await self._outbox.start()
        if self._task is None and self._rules:
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._loop(), name="alert-engine")
        if self._fleet is not None and self._fleet_task is None:
            self._fleet_task = asyncio.create_task(
                self._fleet.run(self.add_counts), name="alert-fleet-reader"
            )

    def report(self, subject: str, figures: Mapping[str, float] | None) -> None:
        """A report on `subject` to every `Reported` kind (the anchor check's on a judge
        evaluator it compared with its baseline: the figures of the change it found, or
        None, its verdicts held); judged at once."""
        now = self._clock()
        for i, kind in enumerate(self._kinds):
            if isinstance(kind, Reported):
                key = (i, subject, "")
                self._entries.add(key, [0.0, 0.0], None, Origin(subject), now)  # made if none
                kind.report(self._entries[key].state, now, figures)
                self._wake_up()

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
        await self._outbox.shutdown(deadline_s, started)

    # -- judging ----------------------------------------------------------------------

    def evaluate(self) -> list[Alert]:
        """Judge every (rule, service) now, update the gauges, return what must be sent."""
        self._due = False
        started = time.perf_counter()
        alerts = self._firing.evaluate(self._clock())
        self._gauges.evaluated(time.perf_counter() - started, self._clock())
        return alerts

    @property
    def judging_window_s(self) -> float:
        """How long after the last verdict a judgment can still change without a firing
        alert (`rule.judging_window_s`)."""
        return judging_window_s(self._rules, self._idle_s)

    @property
    def longest_window_s(self) -> float:
        """The longest any rule counts a verdict in its windows (`rule.longest_window_s`)."""
        return longest_window_s(self._rules)

    # -- state across restarts ---------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Every entry, for the state file (`Entries.snapshot`)."""
        return self._entries.snapshot()

    def restore(self, saved: dict[str, Any], *, release: bool = False) -> None:
        """Takes back what `snapshot` gave (`Entries.restore`; `release`: `saved` is
        emptied as it is restored)."""

        def place(i: int, service: str, cohort: str) -> Key:
            if isinstance(self._kinds[i], Reported):
                return (i, service, cohort)  # what the report is of, as it names it
            by = self._rules[i].cohort_by
            return (i, self._subjects.service(service), self._subjects.cohort(by, cohort))

        self._reported_only(saved)
        dropped = self._entries.restore(saved, place, self._clock(), release=release)
        if dropped:
            self._gauges.entries_dropped.labels("load").inc(dropped)
        restored_firing = self.firing()
        if restored_firing:
            log.info("alert state restored; firing: %s", restored_firing)

    def baselines(self) -> dict[str, list[Held]]:
        """By evaluator, what each regression rule's entry holds: its revision, and the
        revision scoring in shadow beside it with the time of its first pair (None, 0: none)."""
        out: dict[str, list[Held]] = {}
        for key, entry in self._entries.items():
            evaluator = self._rules[key[0]].config.evaluator
            state = entry.state
            if evaluator is None or not isinstance(state, RegressionState):
                continue
            shadow = state.baseline.shadow
            held = Held(
                entry.revision, *((shadow.revision, shadow.first) if shadow else (None, 0.0))
            )
            out.setdefault(evaluator, []).append(held)
        return out

    def screened_senders(self) -> list[dict[str, Any]]:
        """`/alerts`' `senders`: per rule and service whose rule screens its senders, the
        sender keys its screen flags (`monitor.records.sender_key`; an address alone: that
        address's keys the screen does not follow; "": senders past its bound and verdicts
        of no known sender), and why it cannot screen (`Senders.blind`; None: it can)."""
        out = [
            {
                "rule": self._rules[i].config.name,
                "service": service if not cohort else f"{service}/{cohort}",
                "flagged": sorted(screen.flagged),
                "cannot_screen": screen.blind(),
            }
            for (i, service, cohort), screen in self._entries.screens()
        ]
        out.sort(key=lambda row: (row["rule"], row["service"]))
        return out

    def _reported_only(self, saved: dict[str, Any]) -> None:
        """Leaves out of `saved` the pages of `Reported` kinds on subjects the config no
        longer has them report on (a judge no longer configured)."""
        for rule, kind in zip(self._rules, self._kinds, strict=True):
            raw = saved.get(rule.config.name)
            services = raw.get("services") if isinstance(raw, dict) else None
            if not isinstance(kind, Reported) or not isinstance(services, dict):
                continue
            gone = [subject for subject in services if not kind.reports_on(subject)]
            for subject in gone:
                del services[subject]
            if gone:
                log.warning(
                    "alert state: %d pages of %s on subjects no longer reported on left out",
                    len(gone),
                    rule.config.name,
                )

    def firing(self) -> list[tuple[str, str]]:
        """(rule, service) pairs currently firing; for a cohort rule the service is
        written `service/cohort`."""
        return self._entries.firing()

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
                self._outbox.send(self.evaluate())
            except Exception:
                log.exception("alert evaluation failed")
                self._t.counter("dropped").labels("alerts", "internal_error").inc()
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
