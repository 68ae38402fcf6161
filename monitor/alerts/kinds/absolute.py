"""Absolute rules (`max_defect_rate`): the window's defect rate against a known threshold,
by its Wilson bounds at the look's level (docs/alerts.md, "Absolute rules"); and what they
and cohort rules keep, a window of verdicts (`WindowKind`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Entry, Judgment, decide
from monitor.alerts.rule import Rule
from monitor.config import AlertRule
from monitor.evidence import (
    Arrival,
    Moments,
    SlidingWindow,
    Terms,
    Unit,
    UnitSums,
    design_effect,
    design_interval,
    restore_slices,
)


@dataclass(slots=True)
class WindowState:
    """A window of verdicts, and the conversations that closed in it."""

    window: SlidingWindow
    units: UnitSums
    last: float = 0.0

    def snapshot(self) -> dict[str, Any]:
        return {"current": self.window.slices(), "units": self.units.slices()}

    def restore(self, raw: Any) -> None:
        self.window.restore(restore_slices(raw["current"]))
        self.units.restore(raw["units"])


class WindowKind:
    """How absolute and cohort rules keep their `WindowState`; a resolve changes nothing of
    it."""

    state_type: type[WindowState] = WindowState

    def __init__(self, rule: Rule, interval_s: float) -> None:
        self.rule = rule
        self.terms = rule.terms
        self._interval = interval_s

    def new_state(
        self, previous: Entry | None = None, now: float = 0.0, series: str = ""
    ) -> WindowState:
        # After a revision change: windows of the old revision's verdicts, nothing carries.
        window_s = self.terms.window_s
        return self.state_type(SlidingWindow(window_s), UnitSums(window_s))

    def add(
        self,
        state: WindowState,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
        firing: bool,
    ) -> bool:
        state.window.add_counts(now, Moments.of_histogram(histogram))
        return False

    def add_unit(self, state: WindowState, unit: Unit, now: float) -> bool:
        if unit.conversation:
            state.units.add(now, unit.samples, unit.defects)
        return False

    def advance(self, state: WindowState, now: float, firing: bool) -> None:
        state.last = now
        state.window.expire(now)
        state.units.expire(now)

    def settle(self, entry: Entry, judgment: Judgment, now: float) -> None:
        return None


class Absolute(WindowKind):
    @staticmethod
    def summary(config: AlertRule, terms: Terms, budget: str) -> str:
        return f"defect rate > {terms.max_rate:g} over {config.window} ({budget})"

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        terms = self.terms
        entry = entries[""]
        state: WindowState = entry.state
        current = state.window.moments(now)
        design = design_effect(current, state.units.totals)
        level = terms.level(self._interval)
        # A two-sided interval at 1 - 2 x level has `level` in each tail, for as many
        # independent verdicts as the window's are worth.
        lower, upper = design_interval(current, design, 1 - 2 * level)
        fire = terms.enough(current.samples) and lower > terms.max_rate
        resolve = current.samples == 0 or upper < terms.max_rate
        return {
            "": Judgment(
                decide(entry.firing, fire, resolve),
                current=current,
                p_value=level,
                figures={"lower": lower, "upper": upper, "design": design},
            )
        }

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        cfg = self.rule.config
        current = judgment.current
        lower, upper = judgment.figures["lower"], judgment.figures["upper"]
        return {
            "summary": (
                f"{self.rule.subject} defect rate on {service} is {current.mean:.1%} "
                f"({current.defects:g}/{current.samples} in {cfg.window})"
            ),
            "description": (
                f"{current.defects:g}/{current.samples} defects, Wilson interval "
                f"[{lower:.3f}, {upper:.3f}] vs max_defect_rate {self.terms.max_rate}; "
                f"min_samples {self.terms.min_samples}; one false page per {self.rule.budget}"
            ),
            "defect_rate": f"{current.mean:.4f}",
            "lower_bound": f"{lower:.4f}",
            "upper_bound": f"{upper:.4f}",
            "samples": str(current.samples),
        }

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        entry = entries[""]
        state: WindowState = entry.state
        current = state.window.moments(state.last)
        name = self.rule.config.name
        gauges.samples(service, name, "current", current.samples)
        gauges.rate(service, name, current.samples, current.mean)
        gauges.firing(self.rule, service, "", entry.firing)
