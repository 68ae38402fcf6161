"""What a regression rule keeps per service (`monitor.alerts.kinds.regression`), and its
form in the state file: its windows, its test and its last judgment here, what it expects
in its `Baseline`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.kinds.regression_expectation import sayer, terms
from monitor.alerts.rule import Rule
from monitor.evidence import (
    Baseline,
    Batch,
    Bets,
    Changeover,
    Expectation,
    History,
    Overlap,
    SequentialTest,
    Shadow,
    SlidingWindow,
    restore_slices,
    saved_number,
)


@dataclass(slots=True)
class Judging:
    """How the rule judges its window: the sequential test (`sequential`) with the units
    waiting for its next batch and its bets against the last expectation, or the window
    test, which follows only since when the window leans up (`leaning_since`; the
    sequential test follows it too while a fresh rule's first verdicts are its level)."""

    sequential: SequentialTest | None
    batch: Batch
    bets: Bets | None = None
    leaning_since: float | None = None

    def building_since(self) -> float | None:
        """Since when evidence of a rise builds (None: it does not)."""
        if self.sequential is not None:
            return self.sequential.building_since()
        return self.leaning_since


@dataclass(slots=True)
class Advance:
    """The last advance: its time, and what the current window is compared with since
    (not saved: an advance comes before every judgment)."""

    at: float | None = None
    expected: Expectation | None = None


@dataclass(slots=True)
class RegressionState:
    current: SlidingWindow
    # The current window's verdicts that came without a conversation.
    solo: SlidingWindow
    baseline: Baseline
    judging: Judging
    last: Advance = field(default_factory=Advance)
    # The service (and cohort) as log lines name it; not saved: whoever makes the state sets it.
    series: str = ""

    @staticmethod
    def empty(rule: Rule, series: str = "") -> RegressionState:
        return RegressionState(
            SlidingWindow(rule.window_s),
            SlidingWindow(rule.window_s),
            Baseline(terms(rule), sayer(rule.config.name, series)),
            Judging(
                SequentialTest() if rule.sequential else None,
                Batch([0.0] * (rule.steps + 1)),
            ),
            series=series,
        )

    @property
    def test(self) -> SequentialTest | None:
        return self.judging.sequential

    @property
    def expected(self) -> Expectation | None:
        return self.last.expected

    # The baseline's parts as the rule's tests read and drive them.
    @property
    def history(self) -> History:
        return self.baseline.history

    @property
    def changeover(self) -> Changeover | None:
        return self.baseline.changeover

    @property
    def translated(self) -> tuple[float, float] | None:
        return self.baseline.translated

    @property
    def shadow(self) -> Shadow | None:
        return self.baseline.shadow

    @property
    def held_overlap(self) -> Overlap | None:
        return self.baseline.held_overlap

    @property
    def building(self) -> bool:
        return self.baseline.building

    def settle_held_overlap(self, now: float, building: bool, firing: bool, hold_s: float) -> None:
        self.baseline.settle_held_overlap(now, building, firing, hold_s)

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "current": self.current.slices(),
            "solo": self.solo.slices(),
            "leaning_since": self.judging.leaning_since,
            "last": self.last.at,
            **self.baseline.saved(),
        }
        if self.judging.sequential is not None:
            out["sequential"] = self.judging.sequential.snapshot()
        return out

    def restore(self, raw: Any) -> None:
        self.current.restore(restore_slices(raw["current"]))
        self.solo.restore(restore_slices(raw["solo"]))
        self.baseline.restore(raw)
        leaning = raw["leaning_since"]
        judging = self.judging
        judging.leaning_since = None if leaning is None else saved_number(leaning, nonnegative=True)
        last = raw["last"]
        self.last.at = None if last is None else saved_number(last, nonnegative=True)
        if judging.sequential is not None and raw.get("sequential") is not None:
            judging.sequential.restore(raw["sequential"])
