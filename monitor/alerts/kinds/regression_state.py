"""What a regression rule keeps per service (`monitor.alerts.kinds.regression`), and its
form in the state file: its windows here, how it judges them (`Judging`: the test and the
last advance) and what it expects (`Baseline`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.alerts.kinds.regression_expectation import sayer
from monitor.alerts.rule import Rule
from monitor.evidence import Baseline, Judging, SlidingWindow


@dataclass(slots=True)
class RegressionState:
    current: SlidingWindow
    # The current window's verdicts that came without a conversation.
    solo: SlidingWindow
    baseline: Baseline
    judging: Judging
    # The service (and cohort) as log lines name it; not saved: whoever makes the state sets it.
    series: str = ""

    @staticmethod
    def empty(rule: Rule, series: str = "") -> RegressionState:
        return RegressionState(
            SlidingWindow(rule.terms.window_s),
            SlidingWindow(rule.terms.window_s),
            Baseline(rule.terms, sayer(rule.config.name, series)),
            Judging.empty(rule.sequential, rule.terms.steps),
            series=series,
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "current": self.current.slices(),
            "solo": self.solo.slices(),
            **self.judging.saved(),
            **self.baseline.saved(),
        }

    def restore(self, raw: Any) -> None:
        self.current.load(raw["current"])
        self.solo.load(raw["solo"])
        self.baseline.restore(raw)
        self.judging.restore(raw)
