"""What a regression rule keeps per service (`monitor.alerts.kinds.regression`), and its
form in the state file: its windows and test here, what it expects in its `Baseline`."""

from __future__ import annotations

from dataclasses import dataclass
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
class RegressionState:
    current: SlidingWindow
    # The current window's verdicts that came without a conversation.
    solo: SlidingWindow
    baseline: Baseline
    test: SequentialTest | None
    # What waits for the sequential test's next batch.
    batch: Batch
    # The service (and cohort) as log lines name it; not saved: whoever makes the state sets it.
    series: str = ""
    bets: Bets | None = None
    leaning_since: float | None = None
    last: float | None = None
    # What the current window is compared with, as of the last advance (not saved: an
    # advance comes before every judgment).
    expected: Expectation | None = None

    @staticmethod
    def empty(rule: Rule, series: str = "") -> RegressionState:
        return RegressionState(
            SlidingWindow(rule.window_s),
            SlidingWindow(rule.window_s),
            Baseline(terms(rule), sayer(rule.config.name, series)),
            SequentialTest() if rule.sequential else None,
            Batch([0.0] * (rule.steps + 1)),
            series=series,
        )

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
            "leaning_since": self.leaning_since,
            "last": self.last,
            **self.baseline.saved(),
        }
        if self.test is not None:
            out["sequential"] = self.test.snapshot()
        return out

    def restore(self, raw: Any) -> None:
        self.current.restore(restore_slices(raw["current"]))
        self.solo.restore(restore_slices(raw["solo"]))
        self.baseline.restore(raw)
        leaning = raw["leaning_since"]
        self.leaning_since = None if leaning is None else saved_number(leaning, nonnegative=True)
        last = raw["last"]
        self.last = None if last is None else saved_number(last, nonnegative=True)
        if self.test is not None and raw.get("sequential") is not None:
            self.test.restore(raw["sequential"])
