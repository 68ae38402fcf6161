"""Absolute rules (`max_defect_rate`): the window's defect rate against a known threshold.

Fires when the window holds `min_samples` verdicts and the lower Wilson bound of its rate is
above `max_defect_rate`; resolves when the upper bound falls below it or the window empties.
The bounds are taken at the level a look may use (`stats.look_level`: the evaluation
interval over the rule's false-page budget), so a rate that stays at the threshold pages at
most once per `false_page_every`.
"""

from __future__ import annotations

from monitor.alerts.rule import Decision, Rule, RuleState
from monitor.alerts.stats import look_level, wilson_interval


def judge(rule: Rule, state: RuleState, now: float, interval_s: float) -> Decision:
    cfg = rule.config
    state.current = current = state.window.moments(now)
    level = look_level(interval_s, rule.budget_s)
    # A two-sided interval at 1 - 2 x level has `level` in each tail.
    state.bounds = lower, upper = wilson_interval(current.defects, current.samples, 1 - 2 * level)
    state.p_value = level
    threshold = cfg.max_defect_rate if cfg.max_defect_rate is not None else 1.0
    return Decision(
        fire=current.samples >= cfg.min_samples and lower > threshold,
        resolve=current.samples == 0 or upper < threshold,
    )
