"""A page that says where: the slices that carry a regression, retriever or generator, and
the traces to open.

The engine (`monitor.alerts.engine`) shows every record it counts to `observe`, with the
record's dimension values (`monitor.where`) and, when a retrieval evaluator judged
it, that verdict; when an entry pages, and at every re-send, `annotations` explains it.

**Slices.** For every value of every dimension (`where.DIMENSIONS`: version, model, route,
document source, number of documents, context length, tool, question language, question
topic) the counts of the rule's defect values are kept in time buckets: `FINE` over the
rule's window, `COARSE` over the reference before it (the baseline window; a day for an
absolute rule; none for a cohort rule, whose reference is the rest of its service in the
same window). At page time the **current** verdicts are the newest buckets that hold the
page's evidence (a sequential test's strongest run; the window for the other tests), the
**reference** the buckets before them (a cohort rule: the other cohorts).

A value's current rate is compared with what the rest of its dimension predicts: its own
reference rate times the rest's rise (current over reference rate), or, for a value with
fewer than `MIN_REFERENCE` reference verdicts (a new version), the rest's current rate. A
rise spread evenly is the same factor on every value, whatever its own rate, so it names
none. A value is **named** when its excess over that prediction is above half of the
rule's `min_increase` (a rise below it is no rise, as for the rule itself) at the level a
look of the rule may use (`stats.look_level`: one false page per `false_page_every` at
every `evaluation_interval_s`), shared among the values tested: a slice is named only where
a cohort rule on its dimension, at the page's own budget, would have paged. Variances are
widened by the design effect of the rule's units (verdicts of one conversation fail
together): measured from `GROUPS` groups of units hashed apart, whose spread beyond
chance is that effect. Named slices are listed by their share of the excess (what their
verdicts failed beyond their own reference rate, of what the service failed beyond its
own), then by evidence.

**Retriever or generator.** With a retrieval evaluator (`RETRIEVAL`, the first that judged
the record) beside the rule's, the rise `within + mix` splits exactly into the rise at the
same retrieval quality (`within`: the rate among records whose retrieval passed and among
those whose retrieval failed, each against its reference, weighted by the current share)
and the rise that came with retrieval failing more often (`mix`: the change of that share
times the gap between the two rates), each tested above half of `min_increase` at the
look's level shared by the two. `retriever` when retrieval failed significantly more often
and `mix` is significant (`both` when `within` is too); `generator` when `within` is
significant, or when retrieval did not fail more often and `within` carries the rise (the
page itself established the rise; with retrieval unchanged it can only be at the same
retrieval quality); else `unclear`.

**Traces.** The last `TRACES` failing verdicts' trace ids are kept with their values; a
page lists up to `SHOWN_TRACES` of the current verdicts, of the first named slice when there
is one, with a link each through `alerts.trace_url`.

**Memory.** Values of each dimension are capped process-wide (`LabelCap`: the values with
traffic hold at most `CAPS[dimension]` slots, `pipeline.max_versions` / `max_routes` for
version and route; a value without a slot counts as `other`, whose counts are kept like a
value's but never named; one 2 MiB sketch per dimension once its slots are full). Per
(rule, service, cohort): one row of `FINE + COARSE` buckets of two float32 counts per held
value, the service's totals and retrieval strata, `GROUPS` unit groups and `TRACES` trace
ids; `bytes_bound` states it. Nothing of it is in the state file: after a restart the
attribution starts empty, and a page says so (`no data`).
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from monitor._labels import LabelCap
from monitor.alerts.describe import p_text
from monitor.alerts.kinds import Judgment
from monitor.alerts.rule import Rule
from monitor.alerts.stats import look_level, one_sided_z, rise_p_value
from monitor.component import Alert
from monitor.results import EvalResult
from monitor.telemetry import OVERFLOW, Telemetry
from monitor.where import DIMENSIONS, MAX_CHARS, Where

Key = tuple[int, str, str]  # (rule index, service, cohort), as the engine keys entries

FINE = 20
COARSE = 24
GROUPS = 64
# Windows whose design effect is remembered (its median is used).
MEASURED = 16
TRACES = 32
SHOWN_TRACES = 5
SHOWN_SLICES = 3
# A value is tested with at least this many current verdicts (and as many in the rest).
MIN_SLICE = 10
# A value is compared with its own reference rate from this many reference verdicts on.
MIN_REFERENCE = 30
# The reference of a rule without a baseline (absolute rules).
DEFAULT_REFERENCE_S = 86_400.0
# Slots per dimension held at once (version and route follow the pipeline's label caps).
CAPS: dict[str, int] = {"model": 20, "source": 50, "tool": 50, "language": 30, "topic": 50}
# Closed sets (buckets the monitor makes itself): not capped.
UNCAPPED = ("documents", "context")
# Retrieval evaluators, in the order one is chosen when several judged a record.
RETRIEVAL = ("local_retrieval", "retrieval", "context_sufficiency", "chunk_relevance")

Cause = Literal["retriever", "generator", "both", "unclear"]


def retrieval_verdict(results: Mapping[str, EvalResult]) -> tuple[str, bool] | None:
    """(evaluator, failed) of the first retrieval evaluator that gave a verdict."""
    for name in RETRIEVAL:
        result = results.get(name)
        if result is not None and result.outcome != "error":
            return name, result.outcome == "fail"
    return None


@dataclass(frozen=True, slots=True)
class Slice:
    """One value's comparison at page time."""

    dimension: str
    value: str
    samples: int
    rate: float
    reference_samples: int
    reference_rate: float | None  # None: too few reference verdicts of its own
    expected: float
    share: float | None  # of the excess; None when the service has none
    z: float

    @property
    def p_value(self) -> float:
        return 0.5 * math.erfc(self.z / math.sqrt(2))

    def as_json(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "value": self.value,
            "defect_rate": round(self.rate, 4),
            "expected": round(self.expected, 4),
            "reference_defect_rate": (
                None if self.reference_rate is None else round(self.reference_rate, 4)
            ),
            "samples": self.samples,
            "reference_samples": self.reference_samples,
            "share_of_excess": None if self.share is None else round(self.share, 4),
            "p_value": float(f"{self.p_value:.3g}"),
        }


@dataclass(frozen=True, slots=True)
class Split:
    """Retriever or generator: the rise split into what came with retrieval failing more
    often (`mix`) and what came at the same retrieval quality (`within`)."""

    cause: Cause
    evaluator: str
    retrieval_rate: tuple[float, float]  # share of failed retrieval: reference, current
    mix: float
    within: float

    def text(self) -> str:
        before, now = self.retrieval_rate
        verdict = {
            "retriever": "the retriever (the index, the documents): retrieval fell with it",
            "generator": "the generator (the model, the prompt): groundedness fell at the "
            "same retrieval quality",
            "both": "both: retrieval fell with it, and groundedness fell at the same "
            "retrieval quality too",
            "unclear": "unclear: neither part is significant alone",
        }[self.cause]
        return (
            f"{verdict}; {self.evaluator} failed {before:.2f} -> {now:.2f} of the time; "
            f"{self.mix:+.2f} came with retrieval, {self.within:+.2f} at the same retrieval"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "retrieval_evaluator": self.evaluator,
            "retrieval_defect_rate": {
                "reference": round(self.retrieval_rate[0], 4),
                "current": round(self.retrieval_rate[1], 4),
            },
            "with_retrieval": round(self.mix, 4),
            "at_same_retrieval": round(self.within, 4),
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    named: list[Slice]
    tested: int
    level: float
    samples: int
    reference_samples: int
    design_effect: float
    split: Split | None
    traces: list[str]
    links: list[str]
    budget: str

    def where_text(self) -> str:
        if self.samples == 0:
            return "no data: the attribution has seen no verdicts of this alert (restarted?)"
        if not self.named:
            return (
                f"no slice: the rise is spread evenly (none of {self.tested} slices rose "
                f"beyond the rest at one false page per {self.budget})"
            )
        parts = []
        for s in self.named[:SHOWN_SLICES]:
            share = f", {s.share:.0%} of the excess" if s.share is not None else ""
            before = f" ({s.reference_rate:.2f} before)" if s.reference_rate is not None else ""
            parts.append(
                f"{s.dimension} {s.value}: {s.rate:.2f} against {s.expected:.2f} "
                f"expected{before}, {s.samples:,} verdicts{share}, {p_text(s.p_value)}"
            )
        more = len(self.named) - SHOWN_SLICES
        tail = f"; {more} more" if more > 0 else ""
        return (
            "; ".join(parts)
            + tail
            + f" ({len(self.named)} of {self.tested} slices named at one false page per "
            f"{self.budget})"
        )

    def annotations(self) -> dict[str, str]:
        out = {"where": self.where_text()}
        if self.named:
            top = self.named[0]
            out["slice"] = f"{top.dimension}={top.value}"
        if self.split is not None:
            out["cause"] = self.split.cause
            out["cause_detail"] = self.split.text()
        if self.traces:
            out["trace_ids"] = " ".join(self.traces)
        if self.links:
            out["trace_urls"] = " ".join(self.links)
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "slices": [s.as_json() for s in self.named],
            "tested": self.tested,
            "level": float(f"{self.level:.3g}"),
            "samples": self.samples,
            "reference_samples": self.reference_samples,
            "design_effect": round(self.design_effect, 3),
            "cause": self.split.as_json() if self.split is not None else None,
            "traces": [
                {"trace_id": t, "url": self.links[k] if k < len(self.links) else None}
                for k, t in enumerate(self.traces)
            ],
        }


class _Slices:
    """What one (rule, service, cohort) keeps (see the module docstring, "Memory")."""

    __slots__ = (
        "coarse_at",
        "coarse_head",
        "coarse_w",
        "fine_at",
        "fine_head",
        "fine_w",
        "group_start",
        "groups",
        "measured",
        "nc",
        "nf",
        "retrieval",
        "round_robin",
        "strata",
        "totals",
        "traces",
        "values",
    )

    def __init__(self, window_s: float, reference_s: float) -> None:
        self.nf = FINE
        self.nc = COARSE if reference_s > 0 else 0
        self.fine_w = window_s / FINE
        self.coarse_w = reference_s / COARSE if reference_s > 0 else 1.0
        self.fine_at = [-1] * self.nf
        self.coarse_at = [-1] * self.nc
        self.fine_head = -1
        self.coarse_head = -1
        slots = self.nf + self.nc
        self.totals = array("d", bytes(8 * 3 * slots))  # n, sum, sum of squares
        self.strata = array("d", bytes(8 * 4 * slots))  # n, sum: retrieval passed, failed
        self.values: list[dict[str, array[float]]] = [{} for _ in DIMENSIONS]
        self.groups = array("d", bytes(8 * 6 * GROUPS))  # current then previous: n, sum, sq
        self.group_start: float | None = None
        self.measured: deque[float] = deque(maxlen=MEASURED)
        self.traces: deque[tuple[float, str, tuple[str, ...]]] = deque(maxlen=TRACES)
        self.retrieval: str | None = None
        self.round_robin = 0

    # -- time ---------------------------------------------------------------------------

    def slot(self, t: float) -> int | None:
        """The bucket slot of time `t` (None: older than the reference)."""
        b = math.floor(t / self.fine_w)
        if b > self.fine_head:
            for index in range(max(self.fine_head + 1, b - self.nf + 1), b + 1):
                s = index % self.nf
                old = self.fine_at[s]
                if old >= 0:
                    self._move(s, self._coarse_slot((old + 0.5) * self.fine_w))
                self.fine_at[s] = index
            self.fine_head = b
        if b > self.fine_head - self.nf and self.fine_at[b % self.nf] == b:
            return b % self.nf
        return self._coarse_slot(t)

    def _coarse_slot(self, t: float) -> int | None:
        if not self.nc:
            return None
        b = math.floor(t / self.coarse_w)
        if b > self.coarse_head:
            for index in range(max(self.coarse_head + 1, b - self.nc + 1), b + 1):
                s = index % self.nc
                self._clear(self.nf + s)
                self.coarse_at[s] = index
            self.coarse_head = b
        if b <= self.coarse_head - self.nc or self.coarse_at[b % self.nc] != b:
            return None
        return self.nf + b % self.nc

    def _move(self, source: int, target: int | None) -> None:
        """Adds slot `source` into `target` (None: dropped), and clears it."""
        if target is not None:
            for data, width in ((self.totals, 3), (self.strata, 4)):
                for k in range(width):
                    data[target * width + k] += data[source * width + k]
            for values in self.values:
                for row in values.values():
                    row[2 * target] += row[2 * source]
                    row[2 * target + 1] += row[2 * source + 1]
        self._clear(source)

    def _clear(self, s: int) -> None:
        for data, width in ((self.totals, 3), (self.strata, 4)):
            for k in range(width):
                data[s * width + k] = 0.0
        for values in self.values:
            for row in values.values():
                row[2 * s] = row[2 * s + 1] = 0.0

    def current_fine(self) -> list[int]:
        """The fine slots that hold the last window, newest first."""
        out = []
        for index in range(self.fine_head, self.fine_head - self.nf, -1):
            if index >= 0 and self.fine_at[index % self.nf] == index:
                out.append(index % self.nf)
        return out

    def coarse(self, since: float) -> list[int]:
        """The coarse slots from `since` on, newest first."""
        first = math.floor(since / self.coarse_w)
        held = [
            (index, self.nf + s)
            for s, index in enumerate(self.coarse_at)
            if index >= first and index > self.coarse_head - self.nc
        ]
        return [s for _, s in sorted(held, reverse=True)]

    def start(self, s: int) -> float:
        """When slot `s`'s bucket begins."""
        if s < self.nf:
            return self.fine_at[s] * self.fine_w
        return self.coarse_at[s - self.nf] * self.coarse_w

    # -- units ---------------------------------------------------------------------------

    def add_unit(
        self, unit: str | None, n: float, x: float, q: float, now: float, span: float
    ) -> None:
        if self.group_start is None or now - self.group_start >= span:
            previous = self.group_start is not None and now - self.group_start < 2 * span
            measured = self._dispersion(0)
            if previous and measured is not None:
                self.measured.append(measured)
            for k in range(3 * GROUPS):
                self.groups[3 * GROUPS + k] = self.groups[k] if previous else 0.0
                self.groups[k] = 0.0
            self.group_start = now
        if unit is None:  # verdicts of no known unit: independent, spread evenly
            self.round_robin += 1
            g = 3 * (self.round_robin % GROUPS)
        else:
            g = 3 * (hash(unit) % GROUPS)
        self.groups[g] += n
        self.groups[g + 1] += x
        self.groups[g + 2] += q

    def design_effect(self) -> float:
        """How much more a mean varies than over independent verdicts: the spread of the
        unit groups' sums beyond what independent verdicts give, the median over the last
        `MEASURED` windows (a rise of a few windows, which spreads the groups too, does not
        move it), or over the last two windows while fewer were measured."""
        if len(self.measured) >= 3:
            return max(1.0, statistics.median(self.measured))
        both = self._dispersion(0, 3 * GROUPS)
        return 1.0 if both is None else max(1.0, both)

    def _dispersion(self, *offsets: int) -> float | None:
        """The spread of the unit groups at `offsets` (0: this window's, `3 * GROUPS`: the
        last one's, summed) over chance; None with too few verdicts."""
        groups = self.groups
        sizes = [sum(groups[o + 3 * g] for o in offsets) for g in range(GROUPS)]
        sums = [sum(groups[o + 3 * g + 1] for o in offsets) for g in range(GROUPS)]
        squares = sum(groups[o + 3 * g + 2] for o in offsets for g in range(GROUPS))
        n = sum(sizes)
        if n < 2 * GROUPS:
            return None
        mean = sum(sums) / n
        variance = squares / n - mean * mean
        if variance <= 1e-9:
            return None
        spread = sum((x - k * mean) ** 2 for k, x in zip(sizes, sums, strict=True))
        chance = n * variance * (1 - sum(k * k for k in sizes) / (n * n))
        return spread / chance if chance > 0 else None


@dataclass
class _Sent:
    alert: Alert
    explanation: Explanation | None
    gauges: list[tuple[str, ...]] = field(default_factory=list)


class Attribution:
    """The attribution of one engine's rules (see the module docstring).

    **Parameters:**
    - `rules`: the engine's rules, in its order.
    - `telemetry`: where the `alert_slice` gauge lives; its `version_cap` and `route_cap`
      give the caps of those two dimensions.
    - `interval_s`: the engine's evaluation interval (a look's level follows from it).
    - `trace_url`: `alerts.trace_url`, a link with `{trace_id}` in it.
    - `clock`: the engine's.
    """

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
        longest = max((r.window_s + (r.baseline_s or 0.0) for r in rules), default=0.0)
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
                idle_s=max(600.0, longest),
                max_chars=MAX_CHARS,
                clock=clock,
            )
            cap.on_evict(lambda value, d=d: self._fold(d, value))  # type: ignore[misc]
            self._caps.append(cap)
        self._keys: dict[Key, _Slices] = {}
        self._sent: dict[Key, _Sent] = {}
        self._gauge = telemetry.gauge(
            "alert_slice",
            "Share of a firing alert's excess carried by a slice the page names (a value of "
            "a dimension: version, model, route, source, documents, context, tool, "
            "language, topic); present while it fires.",
            ("service", "rule", "cohort", "dimension", "value"),
        )

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
        state = self._keys.get(key)
        if state is None:
            rule = self._rules[key[0]]
            state = self._keys[key] = _Slices(rule.window_s, self._reference_s(rule))
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
        totals = state.totals
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
        rule = self._rules[key[0]]
        if retrieval is not None and retrieval[0] != rule.config.evaluator:
            state.retrieval = state.retrieval or retrieval[0]
            base = 4 * s + (2 if retrieval[1] else 0)
            state.strata[base] += n
            state.strata[base + 1] += x
        state.add_unit(where.unit, n, x, q, now, rule.window_s)
        if where.trace_id and x >= 0.5 * n:
            state.traces.append((now, where.trace_id, tuple(held)))

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
            row = state.values[d].pop(value, None)
            if row is None:
                continue
            other = state.values[d].get(OVERFLOW)
            if other is None:
                state.values[d][OVERFLOW] = row
            else:
                for k in range(len(row)):
                    other[k] += row[k]

    @staticmethod
    def _reference_s(rule: Rule) -> float:
        if rule.cohort_by is not None:
            return 0.0
        return rule.baseline_s if rule.baseline_s is not None else DEFAULT_REFERENCE_S

    # -- out ----------------------------------------------------------------------------

    def sent(self, key: Key, alert: Alert, explanation: Explanation | None) -> None:
        """The alert sent for `key`, with the explanation its annotations came from: kept
        for `firing_alerts` and the `alert_slice` gauge while it fires."""
        old = self._sent.pop(key, None)
        if old is not None:
            for labels in old.gauges:
                self._gauge.remove(*labels)
        if alert.status != "firing":
            return
        entry = self._sent[key] = _Sent(alert, explanation)
        if explanation is not None:
            rule = self._rules[key[0]].config.name
            for s in explanation.named:
                labels = (key[1], rule, key[2], s.dimension, s.value)
                self._gauge.labels(*labels).set(s.share if s.share is not None else 0.0)
                entry.gauges.append(labels)

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
                    "startsAt": _iso(alert.starts_at),
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
        if rule.cohort_by is not None:
            current = fine
            others = [
                (other, other.current_fine())
                for k, other in self._keys.items()
                if k[:2] == key[:2] and k != key
            ]
            for other, _ in others:
                other.slot(now)
            sides: tuple[list[tuple[_Slices, list[int]]], list[tuple[_Slices, list[int]]]] = (
                [(state, current)],
                [(o, o.current_fine()) for o, _ in others],
            )
            since = now - rule.window_s
        else:
            horizon = now - rule.window_s - self._reference_s(rule)
            newest_first = fine + state.coarse(horizon)
            # The rise's verdicts: at least what the page rests on and what the rule asks of
            # a window, so that a page on a few units still compares the values it holds.
            evidence = max(judgment.current.samples, rule.config.min_samples)
            count = _change_point(state, newest_first, evidence)
            current, reference = newest_first[:count], newest_first[count:]
            since = state.start(current[-1])
            sides = ([(state, current)], [(state, reference)])
        t1, t0 = _totals(sides[0]), _totals(sides[1])
        if t1[0] <= 0:
            return empty
        deff = state.design_effect()
        named, tested = self._slices(rule, sides, t1, t0, deff)
        level = look_level(self._interval, rule.budget_s, max(1, tested))
        z_level = one_sided_z(level)
        named = [s for s in named if s.z >= z_level]
        named.sort(key=lambda s: (-(s.share if s.share is not None else -1.0), -s.z))
        split = self._split(rule, state.retrieval, sides, deff)
        traces = self._traces(state, since, named[0] if named else None)
        links = (
            [self._trace_url.replace("{trace_id}", t) for t in traces] if self._trace_url else []
        )
        return Explanation(
            named,
            tested,
            level,
            int(t1[0]),
            int(t0[0]),
            deff,
            split,
            traces,
            links,
            rule.budget,
        )

    def _slices(
        self,
        rule: Rule,
        sides: tuple[list[tuple[_Slices, list[int]]], list[tuple[_Slices, list[int]]]],
        t1: tuple[float, float, float],
        t0: tuple[float, float, float],
        deff: float,
    ) -> tuple[list[Slice], int]:
        """Every tested value's comparison, and how many were tested."""
        n1_all, x1_all, q1_all = t1
        n0_all, x0_all, q0_all = t0
        mu0 = x0_all / n0_all if n0_all > 0 else None
        pooled = (
            _variance(n1_all, x1_all, q1_all),
            _variance(n0_all, x0_all, q0_all) if n0_all > 0 else _variance(n1_all, x1_all, q1_all),
        )
        binary = rule.steps == 1

        def var(rate: float, side: int) -> float:
            """A verdict's variance at `rate`: the binomial one for pass/fail verdicts,
            the side's own for scores."""
            return _bernoulli(rate) if binary else pooled[side]

        margin = rule.min_increase / 2
        excess_all = x1_all - n1_all * mu0 if mu0 is not None else 0.0
        out: list[Slice] = []
        tested = 0
        for d, name in enumerate(DIMENSIONS):
            values: set[str] = set()
            for state, _ in (*sides[0], *sides[1]):
                values.update(state.values[d])
            for value in sorted(values):
                if value == OVERFLOW:
                    continue
                n1, x1 = _sums(sides[0], d, value)
                if n1 < MIN_SLICE or n1_all - n1 < MIN_SLICE:
                    continue
                n0, x0 = _sums(sides[1], d, value)
                r1n, r1x = n1_all - n1, x1_all - x1
                r0n, r0x = n0_all - n0, x0_all - x0
                p1 = x1 / n1
                # A rest without a defect still has an uncertain rate.
                p1r = max(r1x, 0.5) / r1n
                own = n0 >= MIN_REFERENCE and r0n >= MIN_REFERENCE and r0x > 0
                if own:
                    p0 = x0 / n0
                    p0r = r0x / r0n
                    ratio = p1r / p0r
                    expected = min(1.0, ratio * p0)
                    # The value's two rates, and the rest's ratio (delta method).
                    variance = deff * (
                        var(p1, 0) / n1
                        + ratio * ratio * var(p0, 1) / n0
                        + (p0 * ratio) ** 2
                        * (var(p1r, 0) / (r1n * p1r * p1r) + var(p0r, 1) / (r0n * p0r * p0r))
                    )
                else:
                    expected = p1r
                    variance = deff * (var(p1, 0) / n1 + var(p1r, 0) / r1n)
                tested += 1
                rise = p1 - expected
                z = (rise - margin) / math.sqrt(variance) if variance > 0 else 0.0
                base = x0 / n0 if own else mu0
                share = None
                if base is not None and excess_all > 0:
                    share = (x1 - n1 * base) / excess_all
                out.append(
                    Slice(
                        name,
                        value,
                        int(n1),
                        p1,
                        int(n0),
                        x0 / n0 if own else None,
                        expected,
                        share,
                        z,
                    )
                )
        return out, tested

    def _split(
        self,
        rule: Rule,
        evaluator: str | None,
        sides: tuple[list[tuple[_Slices, list[int]]], list[tuple[_Slices, list[int]]]],
        deff: float,
    ) -> Split | None:
        """Retriever or generator (see the module docstring); None without a retrieval
        evaluator's verdicts on both sides."""
        if evaluator is None:
            return None
        (np1, xp1, nf1, xf1), (np0, xp0, nf0, xf0) = _strata(sides[0]), _strata(sides[1])
        if min(np1, np0) < MIN_SLICE or min(nf1 + np1, nf0 + np0) < MIN_REFERENCE:
            return None
        if nf0 < MIN_SLICE and nf1 < MIN_SLICE:
            return None
        s1, s0 = nf1 / (nf1 + np1), nf0 / (nf0 + np0)
        pp1, pp0 = xp1 / np1, xp0 / np0
        pf0 = xf0 / nf0 if nf0 > 0 else pp0
        pf1 = xf1 / nf1 if nf1 > 0 else pf0
        within = (1 - s1) * (pp1 - pp0) + s1 * (pf1 - pf0)
        mix = (s1 - s0) * (pf0 - pp0)
        level = look_level(self._interval, rule.budget_s, 2)
        z_level = one_sided_z(level)
        margin = rule.min_increase / 2
        share_var = deff * (s1 * (1 - s1) / (nf1 + np1) + s0 * (1 - s0) / (nf0 + np0))
        # Retrieval failed more often, and that carries a rise.
        moved = rise_p_value(s1 - s0, share_var, 0.0) <= level
        gap = pf0 - pp0
        mix_var = share_var * gap * gap + (s1 - s0) ** 2 * deff * (
            _bernoulli(pf0) / max(nf0, 1.0) + _bernoulli(pp0) / np0
        )
        retriever = moved and mix > 0 and rise_p_value(mix, mix_var, margin) <= level
        within_var = deff * (
            (1 - s1) ** 2 * (_bernoulli(pp1) / np1 + _bernoulli(pp0) / np0)
            + (s1**2 * (_bernoulli(pf1) / nf1 + _bernoulli(pf0) / max(nf0, 1.0)) if nf1 else 0.0)
        )
        significant = z_level * math.sqrt(max(within_var, 1e-12)) <= within - margin
        cause: Cause
        if retriever:
            cause = "both" if significant else "retriever"
        elif significant or (not moved and within > max(mix, margin)):
            # The page's rise, at retrieval that did not fail more often: the generator.
            cause = "generator"
        else:
            cause = "unclear"
        return Split(cause, evaluator, (s0, s1), mix, within)

    @staticmethod
    def _traces(state: _Slices, since: float, top: Slice | None) -> list[str]:
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
        """The most bytes one entry's counts take, whatever its values (see "Memory")."""
        rule = self._rules[key[0]]
        slots = FINE + (COARSE if self._reference_s(rule) > 0 else 0)
        # A capped dimension's held values, its allowed ones and `other`; the buckets of
        # an uncapped one are at most 8.
        held = sum(cap.limit + len(cap.allowed) + 1 if cap is not None else 8 for cap in self._caps)
        fixed = 7 * 8 * slots + 6 * 8 * GROUPS + 8 * MEASURED + TRACES * TRACE_BYTES
        return held * (8 * slots + ROW_OVERHEAD) + fixed


# Bytes of a value's row beyond its counts: the array object and its dict entry and key.
ROW_OVERHEAD = 300
# Bytes of a kept trace: its id, time and the tuple of its values (shared strings).
TRACE_BYTES = 400


def _change_point(state: _Slices, newest_first: list[int], evidence: int) -> int:
    """How many of the newest buckets hold the rise: the split of the buckets into newer
    and older whose difference of means is the most significant, with at least the page's
    `evidence` verdicts among the newer (they paged) and `MIN_REFERENCE` on each side; the
    whole window when no split has."""
    totals = state.totals
    all_n = sum(totals[3 * s] for s in newest_first)
    all_x = sum(totals[3 * s + 1] for s in newest_first)
    all_q = sum(totals[3 * s + 2] for s in newest_first)
    best, best_z = min(FINE, len(newest_first)), -math.inf
    if all_n <= 0:
        return max(1, best)
    variance = _variance(all_n, all_x, all_q)
    n1 = x1 = 0.0
    for count, s in enumerate(newest_first[:-1], 1):
        n1 += totals[3 * s]
        x1 += totals[3 * s + 1]
        n0, x0 = all_n - n1, all_x - x1
        if n1 < max(MIN_REFERENCE, evidence) or n0 < MIN_REFERENCE:
            continue
        z = (x1 / n1 - x0 / n0) / math.sqrt(variance * (1 / n1 + 1 / n0))
        if z > best_z:
            best, best_z = count, z
    return max(1, best)


def _totals(side: list[tuple[_Slices, list[int]]]) -> tuple[float, float, float]:
    n = x = q = 0.0
    for state, slots in side:
        for s in slots:
            n += state.totals[3 * s]
            x += state.totals[3 * s + 1]
            q += state.totals[3 * s + 2]
    return n, x, q


def _strata(side: list[tuple[_Slices, list[int]]]) -> tuple[float, float, float, float]:
    out = [0.0, 0.0, 0.0, 0.0]
    for state, slots in side:
        for s in slots:
            for k in range(4):
                out[k] += state.strata[4 * s + k]
    return out[0], out[1], out[2], out[3]


def _sums(side: list[tuple[_Slices, list[int]]], d: int, value: str) -> tuple[float, float]:
    n = x = 0.0
    for state, slots in side:
        row = state.values[d].get(value)
        if row is None:
            continue
        for s in slots:
            n += row[2 * s]
            x += row[2 * s + 1]
    return n, x


def _variance(n: float, x: float, q: float) -> float:
    mean = x / n
    return max(q / n - mean * mean, 1e-4)


def _bernoulli(p: float) -> float:
    return max(p * (1 - p), 1e-4)


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
