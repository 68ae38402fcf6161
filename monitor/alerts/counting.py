"""How the alert engine counts verdicts: a record's own, its next revisions' (in shadow),
an old revision's paired with its own (`backtest` replaying a results line's `previous`) and
the fleet's, into the entry of each (rule, service,
cohort) that counts them (`Counting`, a part the `AlertEngine` owns and hands them to)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence

from monitor.alerts.attribution import Attribution, retrieval_verdict
from monitor.alerts.entries import Entries
from monitor.alerts.firing import Firing
from monitor.alerts.kinds import Key
from monitor.alerts.rule import Origin, Rule
from monitor.alerts.subjects import Subjects
from monitor.component import Evaluated
from monitor.records.where import Where
from monitor.results import Results
from monitor.telemetry import OVERFLOW, Telemetry

log = logging.getLogger("monitor.alerts.engine")


class Counting:
    """The engine's counting, a part it owns: verdicts of `rules` (but those of
    `fleet_rules`, judged on the fleet's counters) into the `entries` of the services and
    cohorts `subjects` keeps, each counted verdict shown to the `attribution`; a verdict of
    another evaluator revision told to `firing`; `wake_up` called when a test reached its
    budget (an evaluation is due now)."""

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        fleet_rules: Collection[int],
        subjects: Subjects,
        entries: Entries,
        firing: Firing,
        attribution: Attribution,
        telemetry: Telemetry,
        clock: Callable[[], float],
        wake_up: Callable[[], None],
    ) -> None:
        self._rules = rules
        self._fleet_rules = fleet_rules
        self._subjects = subjects
        self._entries = entries
        self._firing = firing
        self.attribution = attribution
        self._t = telemetry
        self._clock = clock
        self._wake_up = wake_up

    def emit(self, batch: Sequence[Evaluated]) -> None:
        """Each record's own verdicts, then its next revisions' in shadow."""
        if not self._rules:
            return
        for evaluated in batch:
            record, now = evaluated.record, self._clock()
            origin = Origin.of(record)
            self.count_results(origin, evaluated.results, now, Where.of(record))
            if evaluated.shadow:
                self._count_revisions(evaluated, origin, now)

    def _count_revisions(self, evaluated: Evaluated, origin: Origin, now: float) -> None:
        """Its next revisions' verdicts in shadow. The own verdicts are counted: a failure
        past here must not reach the stage, whose retry of the whole call would count them
        twice."""
        try:
            self.count_shadow(origin, evaluated.shadow, now, evaluated.results)
        except Exception:
            log.exception(
                "alerts: next revisions' verdicts in shadow on record %s "
                "(service %s) were not paired with its own, which are counted",
                evaluated.record.request_id,
                evaluated.record.service,
            )
            self._t.counter("dropped").labels("alerts", "paired_error").inc()

    def count_shadow(self, origin: Origin, shadow: Results, now: float, own: Results) -> None:
        """Verdicts of revisions scoring `origin`'s record in shadow (`evaluators[].next`)
        beside the record's own `own`, for every rule of one evaluator that counts them (a
        category rule's graders change one at a time: measured after the switch)."""
        for i, rule in enumerate(self._rules):
            histogram = rule.histogram(shadow)
            revision = rule.revision(shadow)
            if i in self._fleet_rules or rule.config.evaluator is None:
                continue
            if histogram is None or revision is None:
                continue
            service = self._subjects.service(origin.service)
            by = rule.cohort_by
            key = (i, service, self._subjects.cohort(by, rule.cohort(origin)))
            own_revision = rule.revision(own)
            self._entries.add_shadow(
                key, histogram, revision, rule.histogram(own) or [], own_revision, now
            )

    def count_results(
        self,
        origin: Origin,
        results: Results,
        now: float,
        where: Where | None = None,
        paired: Results | None = None,
    ) -> None:
        """The verdicts of one record's `results` (with `paired`, its own: they are an old
        revision's, a results line's `previous` that `backtest` replays), for every rule that counts them; `where`: for the attribution."""
        retrieval = retrieval_verdict(results) if where is not None else None
        for i, rule in enumerate(self._rules):
            if i in self._fleet_rules:
                continue  # judged on the fleet's counters
            histogram = rule.histogram(results, origin if paired is None else None)
            own = None if paired is None else rule.histogram(paired) or []
            if histogram is None:
                continue
            key = self.count(i, origin, histogram, rule.revision(results), now, own)
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
        i = next((i for i, rule in enumerate(self._rules) if rule.config.name == rule_name), None)
        if i is not None:
            origin = Origin.of_cohort(service, self._rules[i].cohort_by, cohort)
            self.count(i, origin, histogram, revision, self._clock())

    def count(
        self,
        i: int,
        origin: Origin,
        histogram: Sequence[float],
        revision: str | None,
        now: float,
        paired: Sequence[float] | None = None,
    ) -> Key | None:
        """`histogram[k]` verdicts at level `k / steps` for rule `i`, from `origin`, of
        evaluator `revision` (None: not known). A service folded into `other` by the cap is
        no service under test; a cohort past its cap counts in the rest. Returns the entry
        they went to (None: none)."""
        service = self._subjects.service(origin.service)
        if service == OVERFLOW:
            return None
        cohort = self._subjects.cohort(self._rules[i].cohort_by, self._rules[i].cohort(origin))
        key = (i, service, cohort)
        added = self._entries.add(key, histogram, revision, origin, now, paired)
        if added.replaced is not None:
            self._firing.new_revision(key, added.replaced, added.revision, now)
        if added.due:
            self._wake_up()
        return key
