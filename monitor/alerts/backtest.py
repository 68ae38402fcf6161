"""`rag-monitor backtest`: the configured alert rules over a timestamped verdict stream, on
simulated time (docs/alerts.md, "Backtest").

The engine is the sidecar's (`AlertEngine.from_config`), driven by a clock that follows the
rows: before each row, every evaluation due by its time runs. Nothing is sent: each page
and resolve is returned (`Event`); a page's `Where` alert is an event, not a page. Rows are
results lines or verdict rows (`backtest_rows`). A row that cannot be read is refused with
its line and reason; a row earlier than the one before it (evaluations run in parallel) is
replayed at the later time and reported as `late`. Over a stretch without rows the clock
evaluates while something may change (the judging windows, or the longest window while an
alert fires), then jumps to the next row. The summary ends with each (rule, service)'s
defect rate per day and the SLO objective its worst full day would burn at
`SLO_HEADROOM_BURN` of the error budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from monitor.alerts.backtest_rows import MAX_LINE_BYTES as MAX_LINE_BYTES
from monitor.alerts.backtest_rows import Row, TooLong
from monitor.alerts.backtest_rows import read_rows as read_rows
from monitor.alerts.describe import explained, iso, utc
from monitor.alerts.engine import AlertEngine
from monitor.component import Alert
from monitor.config import Config
from monitor.telemetry import telemetry_for

# Refused rows named one by one in the summary; the rest are only counted.
SHOWN_REFUSALS = 20
# The burn rate a healthy service's worst day may reach under the objective the summary
# suggests: the margin below 1 (the one-day row's rate) the README's SLO section keeps.
SLO_HEADROOM_BURN = 0.9
# Days with fewer verdicts than this share of the median day's (a partial first or last
# day) are listed but do not decide the objective.
_FULL_DAY_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Event:
    """A page or a resolve, as the sidecar would have sent it at `time`."""

    time: float
    status: Literal["firing", "resolved"]
    alert: Alert

    def as_json(self) -> dict[str, Any]:
        return {
            "time": iso(utc(self.time)),
            "status": self.status,
            "rule": self.alert.rule,
            "service": self.alert.service,
            "labels": self.alert.labels,
            "annotations": self.alert.annotations,
        }

    def text(self) -> str:
        cohort = self.alert.labels.get("cohort")
        who = f"{self.alert.service}/{cohort}" if cohort else self.alert.service
        notes = self.alert.annotations
        first = (
            f"{iso(utc(self.time))}  {self.status:<8}  "
            f"{self.alert.labels.get('alertname', self.alert.rule)}  {who}: "
            f"{notes.get('description', '')}"
        )
        return "\n".join([first, *(f"    {line}" for line in explained(notes))])


@dataclass
class Summary:
    rows: int = 0
    verdicts: float = 0
    late: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    refusals: list[str] = field(default_factory=list)
    latest_by: float = 0.0
    jumps: list[str] = field(default_factory=list)
    first: float | None = None
    last: float | None = None
    pages: Counter[str] = field(default_factory=Counter)
    # Verdict rows a `no_context` rule could not count, by rule: a row is a verdict, not a
    # record, and says nothing of the record's context.
    not_records: Counter[str] = field(default_factory=Counter)
    # (rule, service) -> day (UTC, days since the epoch) -> [verdicts, defect sum]
    days: dict[tuple[str, str], dict[int, list[float]]] = field(default_factory=dict)

    def refuse(self, where: str, reason: str, detail: str) -> None:
        self.refused[reason] += 1
        if len(self.refusals) < SHOWN_REFUSALS:
            self.refusals.append(f"{where}: {detail}")

    def lines(self) -> list[str]:
        span = (
            f" from {iso(utc(self.first))} to {iso(utc(self.last))}"
            if self.first is not None and self.last is not None
            else ""
        )
        out = [f"backtest: {self.rows:,} rows, {self.verdicts:,.0f} verdicts{span}"]
        pages = ", ".join(f"{rule} {n}" for rule, n in sorted(self.pages.items())) or "none"
        out.append(f"pages: {pages}")
        if self.late:
            out.append(
                f"note: {self.late:,} rows came up to {self.latest_by:,.0f} s after a later "
                "row (normal when evaluations run in parallel); each was replayed at the "
                "time of the row before it"
            )
        out.extend(f"note: {line}" for line in self.jumps)
        out.extend(
            f"note: {rule} counts records without context, which verdict rows do not carry: "
            f"{n:,} rows not counted for it (results files carry records)"
            for rule, n in sorted(self.not_records.items())
        )
        if self.refused:
            reasons = ", ".join(f"{n:,} {reason}" for reason, n in self.refused.most_common())
            out.append(f"refused: {reasons}")
            out.extend(f"  {line}" for line in self.refusals)
        return out + self.day_lines()

    def count_day(self, rule: str, service: str, t: float, verdicts: float, defects: float) -> None:
        by_day = self.days.setdefault((rule, service), {})
        sums = by_day.setdefault(int(t // 86_400), [0.0, 0.0])
        sums[0] += verdicts
        sums[1] += defects

    def day_lines(self) -> list[str]:
        """Each (rule, service)'s defect rate per day, and the objective its worst full day
        would burn at `SLO_HEADROOM_BURN`."""
        if not self.days:
            return []
        out = [
            "defect rate per day (UTC), by rule and service; an SLO objective under which the "
            f"worst full day burns {SLO_HEADROOM_BURN:g} of its error budget:"
        ]
        for (rule, service), by_day in sorted(self.days.items()):
            rates = {day: d / n for day, (n, d) in sorted(by_day.items()) if n > 0}
            if not rates:
                continue
            counts = sorted(n for n, _ in by_day.values())
            median = counts[len(counts) // 2]
            full = [rates[day] for day, (n, _) in by_day.items() if n >= _FULL_DAY_SHARE * median]
            total = sum(n for n, _ in by_day.values())
            mean = sum(d for _, d in by_day.values()) / total
            # Two decimals, rounded down (a lower objective holds); 1 would leave no budget.
            objective = min(0.99, math.floor((1 - max(full) / SLO_HEADROOM_BURN) * 100) / 100)
            held = f"objective {objective:.2f}" if objective > 0 else "no objective holds"
            out.append(
                f"  {rule} {service}: {len(rates)} days, {mean:.4f} over all, worst full day "
                f"{max(full):.4f}: {held}"
            )
            out.append(
                "    "
                + ", ".join(
                    f"{iso(utc(day * 86_400.0))[:10]} {rate:.4f}" for day, rate in rates.items()
                )
            )
        return out


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Backtest:
    """Replays rows through the rules of `config` (see the module docstring)."""

    def __init__(self, config: Config) -> None:
        alerts = config.alerts
        self._clock = _Clock()
        self._engine = AlertEngine.from_config(
            config, telemetry_for(config, self._clock), clock=self._clock
        )
        self._interval = alerts.evaluation_interval_s
        # Past this much time without rows, no rule holds anything: the clock jumps; and
        # past `_judging` without rows, once nothing fires, nothing changes but expiry.
        self._horizon = self._engine.longest_window_s + self._interval
        self._judging = self._engine.judging_window_s + self._interval
        self._next: float | None = None
        self._row = ""
        self._firing: set[tuple[str, str, str]] = set()
        self.summary = Summary()

    @property
    def engine(self) -> AlertEngine:
        return self._engine

    def run(self, rows: Iterable[tuple[str, Any]]) -> Iterator[Event]:
        """The pages and resolves of `rows` (`(where, decoded row)` pairs), as they come,
        then those of one last evaluation after the last row."""
        for where, raw in rows:
            if isinstance(raw, TooLong):
                self.summary.refuse(where, "too_long", str(raw))
                continue
            try:
                row = Row.of(raw)
            except ValueError as exc:
                self.summary.refuse(where, "invalid", str(exc))
                continue
            self._row = where
            yield from self._advance(row.time)
            self._count(row)
            if self._engine.evaluation_due:
                yield from self._evaluate(self._clock.now)
        if self._next is not None:
            yield from self._advance(self._clock.now + self._interval)

    def _advance(self, t: float) -> Iterator[Event]:
        summary = self.summary
        if self._next is None:
            self._next = t + self._interval
            self._clock.now = t
            summary.first = t
        if t < self._clock.now:
            summary.late += 1
            summary.latest_by = max(summary.latest_by, self._clock.now - t)
            t = self._clock.now
        before = self._clock.now
        while self._next <= t:
            if self._next > before + self._horizon or (
                self._next > before + self._judging and not self._engine.firing()
            ):
                yield from self._jump(before, t)
                break
            yield from self._evaluate(self._next)
            self._next += self._interval
        self._clock.now = t
        summary.last = t

    def _jump(self, before: float, t: float) -> Iterator[Event]:
        """Over the rest of a stretch without rows, one evaluation at its end (on the
        interval's grid) instead of every one in it: nothing is held that long."""
        assert self._next is not None
        skipped = math.floor((t - self._next) / self._interval)
        self._next += skipped * self._interval
        self.summary.jumps.append(
            f"{self._row}: {t - before:,.0f} s after the row before it; the clock "
            f"jumped over {skipped:,} evaluations of an empty stretch"
        )
        yield from self._evaluate(self._next)
        self._next += self._interval

    def _evaluate(self, t: float) -> Iterator[Event]:
        self._clock.now = t
        for alert in self._engine.evaluate():
            name = alert.labels.get("alertname", alert.rule)
            key = (name, alert.service, alert.labels.get("cohort", ""))
            if alert.status == "firing":
                if key in self._firing:
                    continue  # a re-send
                self._firing.add(key)
                if name == alert.rule:  # a page, not its `Where` alert
                    self.summary.pages[alert.rule] += 1
            else:
                self._firing.discard(key)
            yield Event(t, alert.status, alert)

    def _count(self, row: Row) -> None:
        engine, now, service = self._engine, self._clock.now, row.origin.service
        self.summary.rows += 1
        if row.results is not None:
            # As the sidecar counted the record (`AlertEngine.emit`).
            engine.count_results(row.origin, row.results, now, row.where)
            if row.paired is not None:
                engine.count_results(row.origin, row.paired, now, paired=row.results)
            self.summary.verdicts += len(row.results)
            for rule in engine.rules:
                values = rule.samples(row.results, row.origin)
                if values:
                    self.summary.count_day(rule.config.name, service, now, len(values), sum(values))
            return
        for i, rule in enumerate(engine.rules):
            cfg = rule.config
            if (cfg.evaluator or cfg.category) != row.source or (
                (cfg.evaluator is None) != (row.evaluator is None)
            ):
                continue
            if cfg.measure == "no_context":
                # A verdict is no record: its outcome says nothing of the context.
                self.summary.not_records[cfg.name] += 1
                continue
            steps = rule.terms.steps
            histogram = row.histogram(steps, cfg.measure == "scores")
            if histogram is not None:
                defects = sum(n * k / steps for k, n in enumerate(histogram))
                self.summary.count_day(cfg.name, service, now, sum(histogram), defects)
                key = engine.count(i, row.origin, histogram, row.revision, now)
                if key is not None:
                    engine.attribution.observe(key, row.where, histogram, None, now)
                if row.previous is not None and cfg.measure != "scores":
                    old = [0.0] * len(histogram)
                    old[-1 if row.previous[1] else 0] = 1.0
                    engine.count(i, row.origin, old, row.previous[0], now, histogram)
        self.summary.verdicts += row.verdicts
