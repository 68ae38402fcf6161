"""SLO rules (`slo`): an objective, its error budget and how fast the budget burns, judged
by the SRE workbook's multiwindow, multi-burn-rate rows (docs/alerts.md, "SLO rules": when
a row holds, at which severity the alert fires, when it resolves). Each window length is
one sliding window of counts, saved with the time it began counting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.describe import shown_duration
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Decision, Entry, Judgment
from monitor.alerts.rule import Rule
from monitor.config import AlertRule, AlertSlo, parse_duration
from monitor.evidence import (
    DEFAULT_BUCKETS,
    NOTHING,
    Arrival,
    Moments,
    SlidingWindow,
    Terms,
    Unit,
    restore_slices,
    saved_number,
)

# Windows longer than 60 of these are sliced by them.
_HOUR_S = 3600.0


def slices_for(window_s: float) -> int:
    """How many slices a window of `window_s` is cut into: 60, or hourly past 60 hours."""
    return max(DEFAULT_BUCKETS, math.ceil(window_s / _HOUR_S))


@dataclass(frozen=True, slots=True)
class _Row:
    """One burn-rate row as the kind reads it."""

    index: int
    factor: float
    long_s: float
    short_s: float
    severity: str


@dataclass(slots=True)
class SloState:
    """Windows by length in seconds, and when each began counting."""

    windows: dict[float, SlidingWindow]
    since: dict[float, float] = field(default_factory=dict)
    # What each window held at the last advance (for `publish`), when verdicts last came
    # (not saved).
    seen: dict[float, Moments] = field(default_factory=dict)
    added: float | None = None

    def snapshot(self) -> dict[str, Any]:
        return {
            "windows": {
                _key(length): {"since": self.since.get(length), "slices": window.slices()}
                for length, window in self.windows.items()
            }
        }

    def restore(self, raw: Any) -> None:
        windows = raw["windows"]
        if not isinstance(windows, dict):
            raise TypeError("windows: an object of windows by length expected")
        for length, window in self.windows.items():
            saved = windows.get(_key(length))
            if saved is None:
                continue  # a row added since: its window starts counting now
            if saved["since"] is not None:
                self.since[length] = saved_number(saved["since"])
            window.restore(restore_slices(saved["slices"]))


class Slo:
    def __init__(self, rule: Rule, interval_s: float) -> None:
        slo = rule.config.slo
        assert slo is not None
        self.rule = rule
        self._slo = slo
        self._window_s = rule.terms.window_s
        self.error_budget = 1.0 - slo.objective
        self.rows = [
            _Row(
                k,
                row.factor(self._window_s),
                parse_duration(row.long),
                parse_duration(row.short),
                row.severity,
            )
            for k, row in enumerate(slo.burn_rates)
        ]
        lengths = {self._window_s}
        for row in self.rows:
            lengths.update((row.long_s, row.short_s))
        self._lengths = sorted(lengths)
        self._severities = list(dict.fromkeys(row.severity for row in self.rows))

    @staticmethod
    def summary(config: AlertRule, terms: Terms, budget: str) -> str:
        slo = config.slo
        assert slo is not None
        scores = " on the mean defect score" if config.measure == "scores" else ""
        return f"{slo_text(slo)}{scores}: " + "; ".join(rows_text(slo))

    # -- verdicts in ------------------------------------------------------------------

    def new_state(
        self, previous: Entry | None = None, now: float = 0.0, series: str = ""
    ) -> SloState:
        # After a revision change: windows of the old revision's verdicts, nothing carries.
        return SloState({w: SlidingWindow(w, slices_for(w)) for w in self._lengths})

    def add(
        self,
        state: SloState,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
        firing: bool,
    ) -> bool:
        moments = Moments.of_histogram(histogram)
        quiet = state.added is None or now - state.added >= self._lengths[0]
        state.added = now
        for length, window in state.windows.items():
            # A window that held nothing (a new service, an outage or a silence longer
            # than the window, a restart after one) starts counting again now.
            if quiet and (length not in state.since or not window.moments(now).samples):
                state.since[length] = now
            window.add_counts(now, moments)
        return False

    def add_unit(self, state: SloState, unit: Unit, now: float) -> bool:
        # The SLO counts verdicts; conversations change the noise of a window's rate, not
        # the rate.
        return False

    # -- judging ----------------------------------------------------------------------

    def advance(self, state: SloState, now: float, firing: bool) -> None:
        state.seen = {w: window.moments(now) for w, window in state.windows.items()}

    def settle(self, entry: Entry, judgment: Judgment, now: float) -> None:
        return None  # a resolve changes nothing the windows hold

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        entry = entries[""]
        state: SloState = entry.state
        seen = state.seen
        holding = [row for row in self.rows if self._holds(row, state, seen, now)]
        wanted = holding[0].severity if holding else None
        if not entry.firing:
            decision = Decision.FIRE if holding else Decision.HOLD
            row = holding[0] if holding else self.rows[0]
            return {"": self._judgment(row, seen, decision, severity=wanted)}
        # Restored firing without a severity it still has: take what holds now.
        current = entry.severity if entry.severity in self._severities else wanted
        if current is None:
            current = self.rows[0].severity
        urgency = self._severities.index
        # A more urgent row resolves the alert, to fire at its severity. Else a firing row
        # goes on while its long window burns too fast, and for at least its short window
        # (hysteresis: the short window only starts an alert).
        more_urgent = wanted is not None and urgency(wanted) < urgency(current)
        going = [
            r
            for r in self.rows
            if r.severity == current
            and not more_urgent
            and (self._burns(r, state, seen[r.long_s], now) or now - entry.started_at < r.short_s)
        ]
        if going:
            first = holding[0] if wanted == current else going[0]
            return {"": self._judgment(first, seen, Decision.HOLD, severity=current)}
        note = f"{_holds_text(holding[0])}: it fires at severity {wanted} next" if holding else ""
        row = next(r for r in self.rows if r.severity == current)
        return {"": self._judgment(row, seen, Decision.RESOLVE, severity=current, note=note)}

    def _holds(self, row: _Row, state: SloState, seen: Mapping[float, Moments], now: float) -> bool:
        """Whether `row` starts an alert: both windows burn too fast, the short one holds
        `min_samples` verdicts."""
        short = seen[row.short_s]
        return (
            self._burns(row, state, seen[row.long_s], now)
            and self.rule.terms.enough(short.samples)
            and self._burn(short) > row.factor
        )

    def _burns(self, row: _Row, state: SloState, long: Moments, now: float) -> bool:
        """Whether `row`'s long window, seen whole, burns faster than its rate."""
        began = state.since.get(row.long_s)
        return (
            began is not None
            and now - began >= row.long_s
            and long.samples > 0
            and self._burn(long) > row.factor
        )

    def _judgment(
        self,
        row: _Row,
        seen: Mapping[float, Moments],
        decision: Decision,
        *,
        severity: str | None,
        note: str = "",
    ) -> Judgment:
        long, short, whole = seen[row.long_s], seen[row.short_s], seen[self._window_s]
        return Judgment(
            decision,
            current=long,
            reference=whole,
            note=note,
            figures={
                "row": row.index,
                "burn_rate": self._burn(long),
                "short_burn_rate": self._burn(short),
                "short_defect_rate": short.mean,
                "short_samples": short.samples,
                "remaining": self._remaining(whole),
            },
            severity=severity,
        )

    def _burn(self, moments: Moments) -> float:
        return moments.mean / self.error_budget

    def _remaining(self, whole: Moments) -> float:
        return 1.0 - self._burn(whole) if whole.samples else 1.0

    # -- what a page says, what /metrics shows ------------------------------------------

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        f = judgment.figures
        row = self.rows[int(f["row"])]
        long, short = shown_duration(row.long_s), shown_duration(row.short_s)
        threshold = row.factor * self.error_budget
        objective = self._slo.objective
        remaining = f["remaining"]
        description = (
            f"defect rate {judgment.current.mean:.4f} over {long} and "
            f"{f['short_defect_rate']:.4f} over {short} against {threshold:.4g} "
            f"({row.factor:.3g} x the error budget {self.error_budget:.4g}): burn rate "
            f"{f['burn_rate']:.2f} and {f['short_burn_rate']:.2f} "
            f"({judgment.current.samples:,} and {int(f['short_samples']):,} verdicts); "
            f"{remaining:.0%} of the {self._slo.window} error budget left "
            f"(objective {objective:g}, {judgment.reference.samples:,} verdicts)"
        )
        if judgment.note:
            description += f"; {judgment.note}"
        return {
            "summary": (
                f"{self.rule.subject} on {service} burns its error budget at "
                f"{f['burn_rate']:.2f}x over {long} (objective {objective:g} over "
                f"{self._slo.window}, {judgment.severity or self.rule.config.severity})"
            ),
            "description": description,
            "defect_rate": f"{judgment.current.mean:.4f}",
            "samples": str(judgment.current.samples),
            "burn_rate": f"{f['burn_rate']:.4f}",
            "short_burn_rate": f"{f['short_burn_rate']:.4f}",
            "long_window": long,
            "short_window": short,
            "objective": f"{objective:g}",
            "error_budget_remaining": f"{remaining:.4f}",
        }

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        entry = entries[""]
        state: SloState = entry.state
        name = self.rule.config.name
        seen = state.seen
        whole = seen.get(self._window_s, NOTHING)
        gauges.samples(service, name, "current", whole.samples)
        gauges.rate(service, name, whole.samples, whole.mean)
        gauges.budget_remaining(service, name, whole.samples, self._remaining(whole))
        for length, moments in seen.items():
            gauges.burn_rate(
                service, name, shown_duration(length), moments.samples, self._burn(moments)
            )
        for severity in self._severities:
            firing = entry.firing and entry.severity == severity
            gauges.firing(self.rule, service, "", firing, severity)


def _key(length: float) -> str:
    """A window's key in the state file: its length in seconds, exactly."""
    return str(int(length)) if length.is_integer() else repr(length)


def _holds_text(row: _Row) -> str:
    return (
        f"a {row.severity} row holds (burn rate above {row.factor:.3g} over "
        f"{shown_duration(row.long_s)} and {shown_duration(row.short_s)})"
    )


def slo_text(slo: AlertSlo) -> str:
    """`SLO 0.77 over 28d (error budget 0.23)`."""
    return f"SLO {slo.objective:g} over {slo.window} (error budget {1 - slo.objective:.4g})"


def rows_text(slo: AlertSlo) -> list[str]:
    """Each row as check-config shows it: its severity, burn rate, windows and the defect
    rate it fires above (`never` where that is above 1)."""
    window_s = parse_duration(slo.window)
    out = []
    for row in slo.burn_rates:
        factor = row.factor(window_s)
        threshold = factor * (1 - slo.objective)
        above = f"defect rate > {threshold:.4g}" + (": never" if threshold >= 1 else "")
        out.append(
            f"{row.severity} at burn rate {factor:.3g} over {row.long} and {row.short} ({above})"
        )
    return out
