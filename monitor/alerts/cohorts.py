"""Cohort rules (`cohorts: {by: version|model|route}`): each cohort of a service against the
rest of that service in the same window.

A canary is compared with the stable version at the same time, on the same traffic mix. A
cohort fires when it and the rest each hold `min_samples` verdicts and a one-sided pooled
z-test rejects "the cohort's rate is at most `min_increase / 2` above the rest's" at the
level a look may use, shared among the cohorts judged (`stats.look_level`); it resolves when
its increase falls below half of `min_increase` or its window empties (a canary scaled
away). Cohorts without a value (`""`) and past the cap (`other`) count in the rest and are
never judged on their own.
"""

from __future__ import annotations

from monitor.alerts.rule import Decision, Rule, RuleState
from monitor.alerts.stats import increase_p_value, look_level
from monitor.alerts.window import Moments
from monitor.telemetry import OVERFLOW

# Cohorts that are never judged on their own: records without the cohort's value, and
# values past the cohort cap. Their verdicts still count in the rest of the service.
UNJUDGED = ("", OVERFLOW)


def judge(
    rule: Rule, states: dict[str, RuleState], now: float, interval_s: float
) -> dict[str, Decision]:
    """A decision for every judged cohort of one service; every state's `current` (and the
    judged ones' `reference` and `p_value`) set."""
    cfg = rule.config
    m = rule.min_increase
    counts = {cohort: state.window.moments(now) for cohort, state in states.items()}
    total = Moments()
    for moments in counts.values():
        total = total.plus(moments)
    judged = [cohort for cohort in states if cohort not in UNJUDGED]
    level = look_level(interval_s, rule.budget_s, len(judged))
    out: dict[str, Decision] = {}
    for cohort, state in states.items():
        state.current = current = counts[cohort]
        if cohort in UNJUDGED:
            continue
        state.reference = rest = total.minus(current)
        increase, state.p_value = increase_p_value(current, rest, m / 2)
        ready = current.samples >= cfg.min_samples and rest.samples >= cfg.min_samples
        out[cohort] = Decision(
            fire=ready and state.p_value <= level,
            resolve=current.samples == 0 or increase < m / 2,
        )
    return out
