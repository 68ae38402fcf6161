"""What the alert engine sends (`monitor.alerts.engine`): each alert of a judged entry as
its kind describes it, with the attribution's explanation (`monitor.alerts.attribution`),
and the pages' `Where` alerts after them; resolves decided between evaluations wait for the
next. All of it goes to the notifiers (`monitor.exporters.alertmanager`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Literal

from monitor.alerts import describe
from monitor.alerts.attribution import Attribution, Explanation
from monitor.alerts.kinds import Entry, Judgment, Key, Kind, Reported
from monitor.alerts.rule import Rule
from monitor.component import Alert, Notifier

log = logging.getLogger(__name__)


class Outbox:
    """The alerts of the rules `rules` judged by `kinds`; a firing alert's `endsAt` is four
    re-sends (`resend_s`) or evaluations (`interval_s`) ahead; `generator_url`: where a
    human can look at the source; `evaluator_note(evaluator)`: what a firing page on that
    evaluator's verdicts adds (None: nothing)."""

    def __init__(
        self,
        rules: Sequence[Rule],
        kinds: Sequence[Kind],
        attribution: Attribution,
        notifiers: Sequence[Notifier],
        *,
        resend_s: float,
        interval_s: float,
        generator_url: str,
        evaluator_note: Callable[[str | None], str | None],
    ) -> None:
        self._rules = rules
        self._kinds = kinds
        self._attribution = attribution
        self._notifiers = list(notifiers)
        self._resend = resend_s
        self._interval = interval_s
        self._generator_url = generator_url
        self._evaluator_note = evaluator_note
        # Resolves decided between evaluations (an evaluator revision replaced a firing
        # entry's), sent with the next evaluation's alerts.
        self._resolved: list[Alert] = []
        self._where_alerts: list[Alert] = []

    def alert(
        self,
        key: Key,
        entry: Entry,
        judgment: Judgment,
        now: float,
        status: Literal["firing", "resolved"],
    ) -> Alert:
        """The alert `entry` sends at `now` on `judgment` (its `Where` alerts wait for
        `take`)."""
        i, service, cohort = key
        rule = self._rules[i]
        # A firing alert that stops being re-sent expires on its own (as Prometheus does).
        ends = now + 4 * max(self._resend, self._interval) if status == "firing" else now
        annotations = self._kinds[i].describe(service, cohort, judgment)
        if entry.revision is not None:
            annotations["evaluator_revision"] = entry.revision
        explanation: Explanation | None = None
        kind = self._kinds[i]
        reported = kind if isinstance(kind, Reported) else None
        if status == "firing" and reported is None:
            # (A reported page is of no service's verdicts: nothing to attribute.)
            explanation = self._attribution.explain(key, judgment, now)
            annotations.update(explanation.annotations())
            note = self._evaluator_note(rule.config.evaluator)
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
            None if reported is None else reported.labels(service, judgment.severity),
        )
        where_alerts, entry.where = self._attribution.sent(key, alert, explanation, entry.where)
        self._where_alerts.extend(where_alerts)
        return alert

    def later(self, alert: Alert) -> None:
        """A resolve decided between evaluations: sent with the next one's alerts."""
        self._resolved.append(alert)

    def take(self, alerts: list[Alert]) -> list[Alert]:
        """What an evaluation sends: the resolves waiting, its `alerts`, then the `Where`
        alerts of both."""
        out = self._resolved + alerts + self._where_alerts
        self._resolved, self._where_alerts = [], []
        return out

    def send(self, alerts: list[Alert]) -> None:
        if not alerts:
            return
        for notifier in self._notifiers:
            notifier.notify(alerts)

    async def start(self) -> None:
        for notifier in self._notifiers:
            await notifier.start()

    async def shutdown(self, deadline_s: float, started: float) -> None:
        """Notifiers get what is left of `deadline_s` since `started` (`time.monotonic`)
        to deliver what they queued."""
        for notifier in self._notifiers:
            try:
                await notifier.shutdown(max(0.0, deadline_s - (time.monotonic() - started)))
            except Exception:
                log.exception("alert notifier %s failed to shut down", type(notifier).__name__)
