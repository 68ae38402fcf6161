"""The audit sink: the detector's verdicts on every evaluated record and the reference's on
the audited share, per service over a trailing window, turned into the estimate of the
true defect rate with its interval (`estimate`), exported as gauges and on `GET /audit`.

Which records count is decided by the sampling hash alone (`Share`, from the wiring), so
that the audited records are a random sample of the counted ones: a record counts when its
sampling position is below the detector's base rate for its service and route (records
sampled only because of their feedback or error status, or only by a boost, are left out:
they are not a random part of the traffic), and it is audited when its position is below
`audit.share` of that rate, which is exactly the set the reference judge samples (the
pipeline gives the reference that rate). A label fed back joins its record by `request_id` while the record waits in a
bounded memory of pending records (oldest dropped first, counted); unknown ids,
malformed labels and labels for records whose window has passed are counted and refused.

Records that share a trace are audited together (one hash), so the estimate's variance is
per trace (`estimate`): each open trace's sums per tally are kept (`OpenTrace`) while its
bucket is in the window, so that a later record of it, or a label that comes late, adds to
the same trace; at most `OPEN_TRACES` in all, past which the service holding the most drops
its least recently seen (counted: its later records count as another trace), so that one
service's flood never drops another's sums nor makes another's interval ready.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from aiohttp import web

from monitor.audit._ticker import Ticker
from monitor.audit.access import LabelAccess
from monitor.audit.anchors import JudgeChanges
from monitor.audit.kept import KeptState, Pair
from monitor.audit.saved import (
    OPEN_TRACES,
    Awaiting,
    Bucket,
    OpenTrace,
    OpenTraces,
    Pending,
    State,
    Windows,
)
from monitor.component import Evaluated
from monitor.config._audit import LABELS, Audit
from monitor.evidence import Estimate, Tally, Trace, estimate
from monitor.records import RagRecord
from monitor.records.where import Where
from monitor.results import EvalResult
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
PATH = "/audit"
BUCKETS = 24  # a window is kept as this many buckets; it slides one bucket at a time
AWAITING_SHOWN = 1000  # request ids awaiting a label that `GET /audit` lists
WITHHELD = (
    "the request ids awaiting a label are shown only to a label sender's credential "
    "(Authorization: Bearer <the token audit.labels.token_env holds>, or the web config's)"
)

Share = Callable[[RagRecord], bool | None]
"""Whether a record the detector evaluated is audited (True), counted unaudited (False),
or not part of the random share (None)."""


class AuditSink:
    """A `ResultSink` (and the `LabelSink` of the label feeds)."""

    def __init__(
        self,
        audit: Audit,
        telemetry: Telemetry,
        share: Share,
        *,
        state: State | None = None,
        clock: Callable[[], float] = time.time,
        access: LabelAccess | None = None,
        checks: JudgeChanges | None = None,
    ) -> None:
        assert audit.evaluator is not None and audit.reference is not None
        self._evaluator = audit.evaluator
        self._reference = audit.reference
        self._labelled = audit.reference == LABELS
        self._min_audited = audit.min_audited
        self._max_pending = audit.max_pending
        self._window_s = audit.window_s
        self._bucket_s = audit.window_s / BUCKETS
        self._window = audit.window
        self._share = share
        self._access = access or LabelAccess()
        # A judge reference's anchor checks (None: not checked, as labels never are).
        self._checks = checks if audit.reference != LABELS else None
        self._withheld: str | None = None
        self._clock = clock
        self._t = telemetry
        self._windows: Windows = {}
        self._pending = Awaiting()
        self._traces = OpenTraces()
        # Buckets age out of the window while no record comes: the gauges follow.
        self._ticker = Ticker(min(self._bucket_s, 60.0), self._refresh_async)
        self._quiet = RateLimitedLog(log)
        self._estimates: dict[str, Estimate] = {}
        t = telemetry
        self._bounds = t.gauge("defect_rate_estimate")
        self._raw = t.gauge("audit_raw_defect_rate")
        self._miss = t.gauge("evaluator_miss_rate")
        self._false_alarm = t.gauge("evaluator_false_alarm_rate")
        self._audited = t.gauge("audited_records")
        self._records = t.counter("audit_records")
        self._labels = t.counter("audit_labels")
        self._dropped = t.counter("audit_pending_dropped")
        self._traces_dropped = t.counter("audit_traces_dropped")
        self._withheld_gauge = t.gauge("audit_estimate_withheld")
        if self._checks is not None:
            self._withheld_gauge.labels(self._evaluator).set(1)
            self._withheld = self._checks.withheld(self._reference)
        # A reading, not an event: the count of the records awaiting labels when scraped.
        t.gauge("audit_pending_labels").set_function(lambda: len(self._pending))
        self._kept = (
            KeptState(
                state,
                telemetry,
                Pair(self._evaluator, self._reference),
                max_pending=self._max_pending,
                service_name=telemetry.service_cap,
            )
            if state is not None
            else None
        )

    async def start(self) -> None:
        if self._kept is not None:
            now = self._bucket()
            restored = await self._kept.restore(
                self._clock(), self._window_s, oldest=now - BUCKETS + 1, newest=now
            )
            self._windows = restored.windows
            self._pending = restored.pending
            self._traces = restored.traces
            self._publish(set(self._windows))
            if restored.windows or restored.pending:
                log.info(
                    "audit state restored: %d services, %d records awaiting a label",
                    len(self._windows),
                    len(self._pending),
                )
        self._ticker.start()

    async def shutdown(self, deadline_s: float) -> None:
        await self._ticker.stop()
        await self._save()

    async def _refresh_async(self) -> None:
        self.refresh()
        await self._save()

    async def _save(self) -> None:
        """The window and the records awaiting a label, to the state file (a restart
        keeps the estimate; a crash loses what came since the last refresh)."""
        if self._kept is not None:
            await self._kept.save(self._clock(), self._windows, self._pending, self._traces)

    def emit(self, batch: Sequence[Evaluated]) -> None:
        bucket = self._bucket()
        touched: set[str] = set()
        for evaluated in batch:
            record, results = evaluated.record, evaluated.results
            verdict = results.get(self._evaluator)
            if verdict is None or verdict.passed is None:
                continue
            audited = self._share(record)
            if audited is None:
                continue  # forced by feedback or error, or sampled only by a boost
            service = self._t.service_cap(record.service)
            defect = not verdict.passed
            touched.add(service)
            where = Where.of(record).values
            trace = record.sampling_key
            opened = self._open(service, trace, bucket)
            if not audited:
                self._add(service, opened, where, defect, None)
                self._count(service, "unaudited")
            elif self._labelled:
                pending = Pending(service, opened.bucket, defect, where, trace)
                self._await_label(record.request_id, pending)
            else:
                reference = results.get(self._reference)
                self._judged(record, service, opened, defect, where, reference)
        self._publish(touched)

    def _judged(
        self,
        record: RagRecord,
        service: str,
        opened: OpenTrace,
        defect: bool,
        where: tuple[str, ...],
        reference: EvalResult | None,
    ) -> None:
        if reference is None:
            self._count(service, "reference_missing")
            self._quiet.warning(
                "missing",
                "audit: %s did not score audited record %s of %r (over budget, or a part it "
                "needs is missing); it is left out of the estimate",
                self._reference,
                record.request_id,
                service,
            )
        elif reference.passed is None:
            self._count(service, "reference_error")
            self._quiet.warning(
                "error",
                "audit: the reference %s failed on audited record %s of %r: %s; it is left "
                "out of the estimate",
                self._reference,
                record.request_id,
                service,
                reference.error,
            )
        else:
            self._add(service, opened, where, defect, not reference.passed)
            self._count(service, "audited")

    def _await_label(self, request_id: str, pending: Pending) -> None:
        self._count(pending.service, "awaiting_label")
        for dropped_id, dropped in self._pending.put(request_id, pending, self._max_pending):
            self._t.child(self._dropped, dropped.service).inc()
            self._quiet.warning(
                "dropped",
                "audit: record %s of %r dropped before its label came (audit.max_pending %d "
                "in all, the service awaiting the most drops its oldest)",
                dropped_id,
                dropped.service,
                self._max_pending,
            )

    def label(self, request_id: str, defect: bool, source: str) -> str | None:
        """Join a label to its audited record (`LabelSink`): None when joined, else why
        not (counted and logged)."""
        pending = self._pending.get(request_id)
        if pending is None:
            why = (
                f"unknown_id: no audited record awaits a label with request_id {request_id!r} "
                "(not evaluated, not in the audited share, already labelled, or dropped)"
            )
            return self._refuse(source, "unknown_id", why)
        if pending.bucket <= self._bucket() - BUCKETS:
            self._pending.pop(request_id)
            why = f"expired: the window of record {request_id!r} ({self._window}) has passed"
            return self._refuse(source, "expired", why)
        self._pending.pop(request_id)
        opened = self._traces.get((pending.service, pending.trace))
        if opened is None:
            opened = self._seen(pending.service, pending.trace, OpenTrace(pending.bucket))
        elif opened.bucket != pending.bucket:
            # Its trace was dropped and opened again in another bucket since: the record
            # counts in its own bucket, as a trace of its own.
            opened = OpenTrace(pending.bucket)
        self._add(pending.service, opened, pending.where, pending.detector_defect, defect)
        self._t.child(self._labels, source, "joined").inc()
        self._publish({pending.service})
        return None

    def malformed(self, source: str, problem: str) -> None:
        self._refuse(source, "malformed", problem)

    def unreadable(self, source: str, problem: str) -> None:
        self._t.child(self._labels, source, "unreadable").inc()
        self._quiet.warning("labels-unreadable", "audit: %s", problem)

    def _refuse(self, source: str, outcome: str, why: str) -> str:
        self._t.child(self._labels, source, outcome).inc()
        self._quiet.warning(f"label-{outcome}", "audit: label refused (%s): %s", source, why)
        return why

    def _bucket(self) -> int:
        return int(self._clock() // self._bucket_s)

    def _open(self, service: str, trace: str, bucket: int) -> OpenTrace:
        """The open trace `trace` of `service`, opened in `bucket` unless it is open in a
        bucket still in the window (a trace's records count in its first bucket)."""
        opened = self._traces.get((service, trace))
        if opened is None or opened.bucket <= self._bucket() - BUCKETS:
            opened = OpenTrace(bucket)
        return self._seen(service, trace, opened)

    def _seen(self, service: str, trace: str, opened: OpenTrace) -> OpenTrace:
        """`opened` kept as the most recently seen open trace of its service; past
        `OPEN_TRACES` in all, the service holding the most drops its least recently seen
        (counted): another service's flood never drops this one's sums."""
        for dropped, dropped_trace in self._traces.put((service, trace), opened, OPEN_TRACES):
            self._t.child(self._traces_dropped, dropped).inc()
            self._quiet.warning(
                "trace-dropped",
                "audit: the sums of trace %s of %r dropped before its bucket left the window "
                "(more than %d open); a later record of it counts as another trace",
                dropped_trace,
                dropped,
                OPEN_TRACES,
            )
        return opened

    def _add(
        self,
        service: str,
        opened: OpenTrace,
        where: tuple[str, ...],
        detector: bool,
        reference: bool | None,
    ) -> None:
        """Count a record of trace `opened` in the tallies of its bucket (its service's, and
        its slices'): audited with the `reference`'s verdict, unaudited without one."""
        buckets = self._windows.setdefault(service, {})
        found = buckets.get(opened.bucket)
        if found is None:
            found = buckets[opened.bucket] = Bucket()
        audited = reference is not None
        for (dimension, value), tally in found.tallies(where):
            key = (audited, dimension, value)
            before = opened.sums.get(key, Trace())
            if reference is None:
                opened.sums[key] = tally.add_unaudited(detector, before)
            else:
                opened.sums[key] = tally.add_audited(detector, reference, before)

    def _count(self, service: str, outcome: str) -> None:
        self._t.child(self._records, service, outcome).inc()

    def refresh(self) -> None:
        """Drop the buckets and the pending records that left the window (those counted
        as dropped), and publish every service again."""
        oldest = self._bucket() - BUCKETS + 1
        for pending in self._pending.drop_older(oldest):
            self._t.child(self._dropped, pending.service).inc()
        self._traces.drop_older(oldest)
        self._publish(set(self._windows))

    def _publish(self, services: set[str]) -> None:
        oldest = self._bucket() - BUCKETS + 1
        for service in services:
            buckets = self._windows.get(service, {})
            for old in [b for b in buckets if b < oldest]:
                del buckets[old]
            if not buckets:
                self._windows.pop(service, None)
                self._estimates.pop(service, None)
                self._clear(service)
                continue
            window = Tally()
            for part in buckets.values():
                window.merge(part.total)
            got = self._trusted(estimate(window, min_audited=self._min_audited))
            self._estimates[service] = got
            self._set(service, got)

    def _trusted(self, got: Estimate) -> Estimate:
        """`got`, without its intervals while the reference's anchor check withholds them."""
        if self._checks is None:
            return got
        why = self._checks.withheld(self._reference)
        if why != self._withheld:
            self._withheld = why
            self._withheld_gauge.labels(self._evaluator).set(why is not None)
            if why is not None:
                log.warning("audit of %s: the estimate is withheld: %s", self._evaluator, why)
        if why is None:
            return got
        return replace(got, corrected=None, audited_only=None)

    def _set(self, service: str, got: Estimate) -> None:
        name = self._evaluator
        self._raw.labels(service, name).set(got.raw)
        self._audited.labels(service, name).set(got.audited)
        for gauge, value in (
            (self._miss, got.miss_rate),
            (self._false_alarm, got.false_alarm_rate),
        ):
            if value is None:
                _remove(gauge, service, name)
            else:
                gauge.labels(service, name).set(value)
        corrected = got.corrected
        for bound in ("estimate", "lower", "upper"):
            if corrected is None:
                _remove(self._bounds, service, name, bound)
            else:
                self._bounds.labels(service, name, bound).set(getattr(corrected, bound))

    def _clear(self, service: str) -> None:
        name = self._evaluator
        for gauge in (self._raw, self._audited, self._miss, self._false_alarm):
            _remove(gauge, service, name)
        for bound in ("estimate", "lower", "upper"):
            _remove(self._bounds, service, name, bound)

    def page(self, show_awaiting: bool = True) -> dict[str, Any]:
        """What `GET /audit` shows: each service's window figures, with those of its
        slices (dimension → value → figures), and the request ids awaiting a label (oldest
        first, at most `AWAITING_SHOWN`; with `show_awaiting` False, null and why)."""
        services = {}
        for service, got in sorted(self._estimates.items()):
            slices: dict[str, dict[str, Any]] = {}
            merged: dict[tuple[str, str], Tally] = {}
            for part in self._windows.get(service, {}).values():
                for key, tally in part.slices.items():
                    merged.setdefault(key, Tally()).merge(tally)
            for (dimension, value), tally in sorted(merged.items()):
                figures = self._trusted(estimate(tally, min_audited=self._min_audited)).as_json()
                slices.setdefault(dimension, {})[value] = figures
            services[service] = {**got.as_json(), "slices": slices}
        awaiting: list[str] = []
        for request_id in self._pending if show_awaiting else ():
            if len(awaiting) == AWAITING_SHOWN:
                break
            awaiting.append(request_id)
        withheld = {} if show_awaiting else {"awaiting_labels_withheld": WITHHELD}
        return {
            "evaluator": self._evaluator,
            "reference": self._reference,
            "window": self._window,
            "min_audited": self._min_audited,
            "withheld": self._withheld,
            "services": services,
            "awaiting_labels": awaiting if show_awaiting else None,
            **withheld,
            "pending_labels": len(self._pending),
        }

    async def handle(self, request: web.Request) -> web.Response:
        shown = self._access.shows_awaiting(request.headers.get("Authorization"))
        return web.json_response(self.page(shown))


def _remove(gauge: Any, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
