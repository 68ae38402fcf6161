"""`Attribution`: what the engine shows it of each counted record, and the explanation of
a page."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from monitor.alerts.attribution._buckets import (
    COARSE,
    FINE,
    GROUPS,
    MEASURED,
    TRACES,
    Buckets,
    Side,
    change_point,
    totals_of,
)
from monitor.alerts.attribution._compare import changes_at_rise, compare_slices, split_rise
from monitor.alerts.attribution._explanation import Explanation, Slice
from monitor.alerts.attribution._where_alert import successor_of, where_alert
from monitor.alerts.describe import iso, utc
from monitor.alerts.kinds import Judgment, Key, Named
from monitor.alerts.rule import Rule, longest_window_s
from monitor.component import Alert
from monitor.evidence import one_sided_z, screen_bytes
from monitor.records.where import DIMENSIONS, MAX_CHARS, Where
from monitor.results import EvalResult
from monitor.shared.labels import LabelCap
from monitor.telemetry import OVERFLOW, Telemetry

SHOWN_TRACES = 5
# The sender screen's bucket (`monitor.evidence.senders`): an hour, as the history's.
SCREEN_BUCKET_S = 3600.0
# How often the screen is run again within its bucket: a decoy new this hour is flagged
# within minutes of its first verdicts, not once the hour is over, so its hour's verdicts
# are out of the slices a later page compares (the Where is of screened verdicts).
SCREEN_EVERY_S = 60.0
# The reference of a rule without a baseline (absolute rules).
DEFAULT_REFERENCE_S = 86_400.0
# Slots per dimension held at once (version and route follow the pipeline's label caps).
CAPS: dict[str, int] = {"model": 20, "source": 50, "tool": 50, "language": 30, "topic": 50}
# Closed sets (buckets the monitor makes itself): not capped.
UNCAPPED = ("documents", "context")
# Retrieval evaluators, in the order one is chosen when several judged a record.
RETRIEVAL = ("local_retrieval", "retrieval", "context_sufficiency", "chunk_relevance")


def retrieval_verdict(results: Mapping[str, EvalResult]) -> tuple[str, bool] | None:
    """(evaluator, failed) of the first retrieval evaluator that gave a verdict."""
    for name in RETRIEVAL:
        result = results.get(name)
        if result is not None and result.outcome != "error":
            return name, result.outcome == "fail"
    return None


@dataclass
class _Sent:
    alert: Alert
    explanation: Explanation | None
    gauges: list[tuple[str, ...]] = field(default_factory=list)


class Attribution:
    """The attribution of one engine's `rules`, in its order. `telemetry` holds the
    `alert_slice` gauge and the version and route caps; `interval_s`: the engine's
    evaluation interval; `trace_url`: `alerts.trace_url`, with `{trace_id}` in it."""

    def __init__(
        self,
        rules: Sequence[Rule],
        telemetry: Telemetry,
        interval_s: float,
        *,
        trace_url: str | None = None,
        clock: Callable[[], float],
    ) -> None:
        self._rules = list(rules)
        self._interval = interval_s
        self._trace_url = trace_url
        pipeline_caps = {"version": telemetry.version_cap, "route": telemetry.route_cap}
        self._caps: list[LabelCap | None] = []
        for d, name in enumerate(DIMENSIONS):
            if name in UNCAPPED:
                self._caps.append(None)
                continue
            source = pipeline_caps.get(name)
            cap = LabelCap(
                source.limit if source is not None else CAPS[name],
                allowed=source.allowed if source is not None else (),
                idle_s=max(600.0, longest_window_s(rules)),
                max_chars=MAX_CHARS,
                clock=clock,
            )
            cap.on_evict(lambda value, d=d: self._fold(d, value))  # type: ignore[misc]
            self._caps.append(cap)
        self._keys: dict[Key, Buckets] = {}
        self._sent: dict[Key, _Sent] = {}
        self._clock = clock
        self._gauge = telemetry.gauge("alert_slice")

    # -- in -----------------------------------------------------------------------------

    def observe(
        self,
        key: Key,
        where: Where,
        histogram: Sequence[float],
        retrieval: tuple[str, bool] | None,
        now: float,
    ) -> None:
        """`histogram[k]` verdicts at level `k / steps` of entry `key`, from a record with
        `where`'s values; `retrieval`: a retrieval evaluator's verdict on it."""
        rule = self._rules[key[0]]
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = Buckets(rule.terms.window_s, self._reference_s(rule))
        steps = len(histogram) - 1
        n = x = q = 0.0
        for k, count in enumerate(histogram):
            if count:
                level = k / steps
                n += count
                x += count * level
                q += count * level * level
        if n <= 0:
            return
        s = state.slot(now)
        if s is None:
            return
        flagged = self._screened(state, where.sender, n, x, q, now)
        for totals in (state.totals, state.flagged_totals) if flagged else (state.totals,):
            totals[3 * s] += n
            totals[3 * s + 1] += x
            totals[3 * s + 2] += q
        held = []
        for d, value in enumerate(where.values):
            if not value:
                held.append("")
                continue
            cap = self._caps[d]
            value = cap(value) if cap is not None else value
            held.append(value)
            row = state.values[d].get(value)
            if row is None:
                row = state.values[d][value] = array("f", bytes(8 * (state.nf + state.nc)))
            row[2 * s] += n
            row[2 * s + 1] += x
            if flagged:
                row = state.flagged[d].get(value)
                if row is None:
                    row = state.flagged[d][value] = array("f", bytes(8 * (state.nf + state.nc)))
                row[2 * s] += n
                row[2 * s + 1] += x
        if retrieval is not None and retrieval[0] != rule.config.evaluator:
            state.retrieval = state.retrieval or retrieval[0]
            base = 4 * s + (2 if retrieval[1] else 0)
            state.strata[base] += n
            state.strata[base + 1] += x
        state.add_unit(where.unit, n, x, q, now, rule.terms.window_s)
        if where.trace_id and x >= 0.5 * n:
            state.traces.append((now, where.trace_id, tuple(held)))

    @staticmethod
    def _screened(
        state: Buckets, sender: str | None, n: float, x: float, q: float, now: float
    ) -> bool:
        """Counts verdicts of `sender` for the entry's screen (`monitor.evidence.senders`,
        hourly buckets, screened every `SCREEN_EVERY_S`); whether the screen flagged it."""
        if sender is None:
            return False
        bucket = int(now // SCREEN_BUCKET_S)
        tick = int(now // SCREEN_EVERY_S)
        if tick > state.screened_tick:
            state.screen.screen()
            state.screened_tick = tick
        state.screen.add(bucket, sender, n, x, q, solo=False)
        return state.screen.flags(sender)

    def forget(self, keep: Callable[[Key], bool]) -> None:
        """Drops what is kept of the entries `keep` says no to (the engine dropped them)."""
        for key in [k for k in self._keys if not keep(k)]:
            del self._keys[key]
        for key in [k for k in self._sent if not keep(k)]:
            for labels in self._sent.pop(key).gauges:
                self._gauge.remove(*labels)

    def _fold(self, d: int, value: str) -> None:
        """`value` of dimension `d` lost its slot: its counts join `other`."""
        for state in self._keys.values():
            for rows in (state.values[d], state.flagged[d]):
                row = rows.pop(value, None)
                if row is None:
                    continue
                other = rows.get(OVERFLOW)
                if other is None:
                    rows[OVERFLOW] = row
                else:
                    for k in range(len(row)):
                        other[k] += row[k]

    @staticmethod
    def _reference_s(rule: Rule) -> float:
        if rule.cohort_by is not None:
            return 0.0
        return rule.terms.baseline_s or DEFAULT_REFERENCE_S

    # -- out ----------------------------------------------------------------------------

    def sent(
        self, key: Key, alert: Alert, explanation: Explanation | None, where: Named | None
    ) -> tuple[list[Alert], Named | None]:
        """The alert sent for `key`, with the explanation its annotations came from (kept
        while it fires). `where`: the slice its page named first (the entry's; None: none
        yet). Returns the `Where` alerts to send with it (the old one resolved when another
        slice `takes_over`) and the entry's `where` after it."""
        old = self._sent.pop(key, None)
        if old is not None:
            for labels in old.gauges:
                self._gauge.remove(*labels)
        if alert.status != "firing":
            return ([] if where is None else [_where(alert, where, "resolved")]), None
        entry = self._sent[key] = _Sent(alert, explanation)
        if explanation is not None:
            rule = self._rules[key[0]].config.name
            for s in explanation.named:
                labels = (key[1], rule, key[2], s.dimension, s.value)
                self._gauge.labels(*labels).set(s.share if s.share is not None else 0.0)
                entry.gauges.append(labels)
        out = []
        successor = successor_of(explanation, where) if where is not None else None
        if where is not None and successor is not None:
            out.append(_where(alert, where, "resolved"))
            where = Named(successor.dimension, successor.value, self._clock())
        if where is None:
            if explanation is None or not explanation.named:
                return out, None
            top = explanation.named[0]
            where = Named(top.dimension, top.value, self._clock())
        out.append(_where(alert, where, "firing"))
        return out, where

    def names_first(self, key: Key, judgment: Judgment, now: float, where: Named | None) -> bool:
        """Whether `key`'s firing page, sent without naming a slice (`where`, the entry's,
        is None), names one now (its `Where` alert is then due). A page restored from the
        state file counts as sent: this process has not sent it yet, but the pager has it."""
        explanation = self.explain(key, judgment, now)
        if where is not None:
            return successor_of(explanation, where) is not None
        return bool(explanation.named)

    def firing_alerts(self) -> list[dict[str, Any]]:
        """The firing alerts as last sent, with their attribution (the `/alerts` page)."""
        out = []
        for key, sent in sorted(self._sent.items()):
            alert = sent.alert
            out.append(
                {
                    "rule": alert.rule,
                    "service": alert.service,
                    "cohort": key[2] or None,
                    "status": alert.status,
                    "startsAt": iso(alert.starts_at),
                    "labels": alert.labels,
                    "annotations": alert.annotations,
                    "attribution": sent.explanation.as_json() if sent.explanation else None,
                }
            )
        return out

    def explain(self, key: Key, judgment: Judgment, now: float) -> Explanation:
        """The slices, split and traces of entry `key`'s page now."""
        rule = self._rules[key[0]]
        state = self._keys.get(key)
        empty = Explanation([], 0, 1.0, 0, 0, 1.0, None, [], [], rule.budget)
        if state is None:
            return empty
        state.slot(now)
        fine = state.current_fine()
        deff = state.design_effect()
        screened = False
        named: list[Slice] = []
        tested, level = 0, 1.0
        if rule.cohort_by is not None:
            others = [o for k, o in self._keys.items() if k[:2] == key[:2] and k != key]
            for other in others:
                other.slot(now)
            sides: tuple[Side, Side] = ([(state, fine)], [(o, o.current_fine()) for o in others])
            since = now - rule.terms.window_s
        else:
            horizon = now - rule.terms.window_s - self._reference_s(rule)
            newest_first = fine + state.coarse(horizon)
            # The rise's verdicts: at least what the page rests on and what the rule asks of
            # a window, so that a page on a few units still compares the values it holds.
            evidence = max(judgment.current.samples, rule.terms.min_samples)
            # The Where is of screened verdicts (a decoy's hour, flagged, neither starts
            # the rise nor inflates the rest a slice is compared with); of all of them
            # when nothing rises without flagged senders (a flagged canary's version).
            for screened in (True, False) if any(state.flagged_totals) else (False,):
                count = change_point(state, newest_first, evidence, screened=screened)
                current, reference = newest_first[:count], newest_first[count:]
                sides = ([(state, current)], [(state, reference)])
                t1, t0 = (
                    totals_of(sides[0], screened=screened),
                    totals_of(sides[1], screened=screened),
                )
                if t1[0] <= 0:
                    continue
                named, tested, level = self._named(rule, sides, t1, t0, deff, screened)
                if named:
                    break
            since = state.start(current[-1])
        if rule.cohort_by is not None:
            t1, t0 = totals_of(sides[0]), totals_of(sides[1])
            if t1[0] > 0:
                named, tested, level = self._named(rule, sides, t1, t0, deff, False)
        if t1[0] <= 0:
            return empty
        later: list[Slice] = []
        if rule.cohort_by is None:
            newest = self._newest(state, sides[0][0][1], rule, now)
            if newest < len(sides[0][0][1]):
                recent: tuple[Side, Side] = ([(state, sides[0][0][1][:newest])], sides[1])
                t_recent = totals_of(recent[0], screened=screened)
                later = self._named(rule, recent, t_recent, t0, deff, screened)[0]
        split = split_rise(rule, state.retrieval, sides, deff, self._interval)
        traces = self._traces(state, since, named[0] if named else None)
        links = (
            [self._trace_url.replace("{trace_id}", t) for t in traces] if self._trace_url else []
        )
        samples = (int(t1[0]), int(t0[0]))
        changes = () if rule.cohort_by is not None else tuple(changes_at_rise(sides, t1[0], t0[0]))
        return Explanation(
            named,
            tested,
            level,
            *samples,
            deff,
            split,
            traces,
            links,
            rule.budget,
            changes,
            tuple(later),
        )

    def _named(
        self,
        rule: Rule,
        sides: tuple[Side, Side],
        t1: tuple[float, float, float],
        t0: tuple[float, float, float],
        deff: float,
        screened: bool,
    ) -> tuple[list[Slice], int, float]:
        """The slices named of `sides` (the largest share of the excess first), how many
        were tested, and the level they were named at (`screened`: of the verdicts of
        senders not flagged)."""
        named, tested = compare_slices(rule, sides, t1, t0, deff, screened=screened)
        level = rule.terms.level(self._interval, max(1, tested))
        z_level = one_sided_z(level)
        # A slice whose rise came from flagged senders (it does not rise without them) is
        # named only when no other slice rises: a canary pod is flagged too, and its version
        # is then still named.
        named = [replace(s, flagged_only=s.screened_z < z_level) for s in named if s.z >= z_level]
        named = [s for s in named if not s.flagged_only] or named
        named.sort(key=lambda s: (-(s.share if s.share is not None else -1.0), -s.z))
        return named, tested, level

    @staticmethod
    def _newest(state: Buckets, newest_first: list[int], rule: Rule, now: float) -> int:
        """How many of the rise's newest buckets make its newest window: the rule's window,
        widened to the rule's `min_samples` verdicts."""
        n = 0.0
        for count, s in enumerate(newest_first, 1):
            n += state.totals[3 * s]
            if state.start(s) <= now - rule.terms.window_s and rule.terms.enough(n):
                return count
        return len(newest_first)

    @staticmethod
    def _traces(state: Buckets, since: float, top: Slice | None) -> list[str]:
        d = DIMENSIONS.index(top.dimension) if top is not None else -1
        out: list[str] = []
        for t, trace_id, values in reversed(state.traces):
            if t < since:
                break
            if top is not None and values[d] != top.value:
                continue
            if trace_id not in out:
                out.append(trace_id)
            if len(out) == SHOWN_TRACES:
                break
        return out

    def bytes_bound(self, key: Key) -> int:
        """The most bytes one entry's counts take, whatever its values."""
        rule = self._rules[key[0]]
        slots = FINE + (COARSE if self._reference_s(rule) > 0 else 0)
        # A capped dimension's held values, its allowed ones and `other`; the buckets of
        # an uncapped one are at most 8.
        held = sum(cap.limit + len(cap.allowed) + 1 if cap is not None else 8 for cap in self._caps)
        fixed = 7 * 8 * slots + 6 * 8 * GROUPS + 8 * MEASURED + TRACES * TRACE_BYTES
        # Each held value's row, and its row of flagged senders' verdicts.
        return 2 * held * (8 * slots + ROW_OVERHEAD) + fixed + SCREEN_BYTES


# Bytes of a value's row beyond its counts: the array object and its dict entry and key.
ROW_OVERHEAD = 300
# Bytes of the sender screen (`monitor.evidence.Senders`).
SCREEN_BYTES = screen_bytes(ROW_OVERHEAD)
# Bytes of a kept trace: its id, time and the tuple of its values (shared strings).
TRACE_BYTES = 400


def _where(alert: Alert, where: Named, status: Literal["firing", "resolved"]) -> Alert:
    return where_alert(alert, where.dimension, where.value, status, utc(where.at))
