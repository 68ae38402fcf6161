"""Cohort rules (`cohorts: {by: version|model|route}`): each cohort of a service against the
rest of that service in the same window.

A canary is compared with the stable version at the same time, on the same traffic mix. A
cohort fires when it and the rest each hold `min_samples` verdicts and a one-sided pooled
z-test rejects "the cohort's rate is at most `min_increase / 2` above the rest's" at the
level a look may use, shared among the cohorts judged (`stats.look_level`); each side's
variance is widened by its conversations' design effect. It resolves when its increase falls
below half of `min_increase` or its window empties (a canary scaled away). Cohorts without
a value (`""`) and past the cap (`other`) count in the rest and are never judged on their
own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from monitor.alerts.describe import p_text
from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Entry, Judgment
from monitor.alerts.kinds.absolute import (
    WindowState,
    add_unit,
    add_verdicts,
    new_window_state,
    restore_window,
    snapshot_window,
)
from monitor.alerts.rule import Rule
from monitor.alerts.stats import increase_p_value, look_level
from monitor.alerts.units import Arrival, Unit
from monitor.alerts.window import Moments, design_effect
from monitor.config import AlertRule
from monitor.telemetry import OVERFLOW

# Cohorts that are never judged on their own: records without the cohort's value, and
# values past the cohort cap. Their verdicts still count in the rest of the service.
UNJUDGED = ("", OVERFLOW)


class Cohorts:
    def __init__(self, rule: Rule, interval_s: float) -> None:
        self.rule = rule
        self._interval = interval_s

    @staticmethod
    def summary(config: AlertRule, budget: str) -> str:
        assert config.cohorts is not None
        measured = "mean defect score" if config.measure == "scores" else "defect rate"
        return (
            f"{measured} of each {config.cohorts.by} over {config.window} up by "
            f"{config.min_increase:g} or more on the rest of its service ({budget})"
        )

    def new_state(self) -> WindowState:
        return new_window_state(self.rule)

    def succeed(self, state: WindowState, now: float) -> WindowState:
        return self.new_state()  # windows of the old revision's verdicts: nothing carries

    def add(
        self,
        state: WindowState,
        histogram: Sequence[float],
        conversation: Arrival | None,
        now: float,
    ) -> bool:
        return add_verdicts(state, histogram, now)

    def add_unit(self, state: WindowState, unit: Unit, now: float) -> bool:
        return add_unit(state, unit, now)

    def judge(self, entries: Mapping[str, Entry], now: float) -> dict[str, Judgment]:
        """A judgment for every judged cohort of one service."""
        cfg = self.rule.config
        m = self.rule.min_increase
        counts: dict[str, Moments] = {}
        total = Moments()
        all_units = [0.0, 0.0, 0.0, 0.0, 0.0]
        for cohort, entry in entries.items():
            state: WindowState = entry.state
            state.last = now
            counts[cohort] = state.window.moments(now)
            state.units.expire(now)
            total = total.plus(counts[cohort])
            all_units = [a + b for a, b in zip(all_units, state.units.totals, strict=True)]
        judged = [cohort for cohort in entries if cohort not in UNJUDGED]
        level = look_level(self._interval, self.rule.budget_s, len(judged))
        out: dict[str, Judgment] = {}
        for cohort in judged:
            state = entries[cohort].state
            current = counts[cohort]
            rest = total.minus(current)
            others = [a - b for a, b in zip(all_units, state.units.totals, strict=True)]
            designs = (design_effect(current, state.units.totals), design_effect(rest, others))
            increase, p = increase_p_value(current, rest, m / 2, designs)
            ready = current.samples >= cfg.min_samples and rest.samples >= cfg.min_samples
            out[cohort] = Judgment(
                fire=ready and p <= level,
                resolve=current.samples == 0 or increase < m / 2,
                current=current,
                reference=rest,
                p_value=p if ready else 1.0,
                figures={"increase": increase, "p": p},
            )
        return out

    def describe(self, service: str, cohort: str, judgment: Judgment) -> dict[str, str]:
        cfg = self.rule.config
        by = self.rule.cohort_by
        current, rest = judgment.current, judgment.reference
        measured = self.rule.measured
        p = judgment.figures.get("p", judgment.p_value)
        return {
            "summary": (
                f"{self.rule.subject} {measured} of {by} {cohort} on {service} is "
                f"{current.mean:.2f} against {rest.mean:.2f} for the rest"
            ),
            "description": (
                f"{measured} {current.mean:.2f} for {by} {cohort} against "
                f"{rest.mean:.2f} for the rest of {service} over {cfg.window} "
                f"({current.samples:,} / {rest.samples:,} verdicts), "
                f"{current.mean - rest.mean:+.2f}, {p_text(p)}"
            ),
            "defect_rate": f"{current.mean:.4f}",
            "rest_defect_rate": f"{rest.mean:.4f}",
            "increase": f"{current.mean - rest.mean:.4f}",
            "p_value": f"{p:.3g}",
            "samples": str(current.samples),
            "rest_samples": str(rest.samples),
            "false_page_every": self.rule.budget,
        }

    def publish(self, gauges: AlertGauges, service: str, entries: Mapping[str, Entry]) -> None:
        name = self.rule.config.name
        for cohort, entry in entries.items():
            state: WindowState = entry.state
            current = state.window.moments(state.last)
            gauges.cohort(service, name, cohort, current.samples, current.mean)
            if cohort not in UNJUDGED:
                gauges.firing(self.rule, service, cohort, entry.firing)

    def snapshot(self, state: WindowState) -> dict[str, Any]:
        return snapshot_window(state)

    def restore(self, state: WindowState, raw: Any) -> None:
        restore_window(state, raw)
