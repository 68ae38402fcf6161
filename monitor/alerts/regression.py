"""Regression rules (`baseline`): a service against its own past.

The **current window** (`window`) is compared with the **baseline**, the trailing
`baseline.window` before it (`window.Windows`: what a rise may not teach the baseline). A
rise is judged as a user means `min_increase`, the smallest rise worth a page: the null
hypothesis is "the mean rose by at most half of it", so a smaller rise is no rise, and a
rise of at least `min_increase` pages as fast as the evidence allows.

- `test: sequential` (the default): the verdicts go to the sequential test
  (`monitor.alerts.sequential`) in batches of `BATCH` (and at every evaluation); a batch
  that takes its statistic past the rule's budget asks for an evaluation at once, which
  pages. The test's false pages are bounded in time, whatever the traffic.
- `test: window`: a one-sided pooled z-test of "the current window's mean is at most
  `min_increase / 2` above the baseline's" at each evaluation, at the level a look may use
  (`stats.look_level`). While the window leans up (p below `WINDOW_HOLD_P`) what leaves it
  is held out of the baseline, as the sequential test's evidence holds it.

Either fires only with `min_samples` verdicts in the current window and
`baseline.min_samples` in the baseline. It **resolves** when the current window's increase
falls below half of `min_increase` (a sequential page holds at least one `window`, since it
may come while the window holds little of the rise), or the window empties.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.alerts.rule import Decision, Rule, RuleState
from monitor.alerts.sequential import bets
from monitor.alerts.stats import increase_p_value, look_level
from monitor.alerts.window import Moments

# Verdicts per batch of the sequential test between evaluations: small enough that a page
# waits for few verdicts, large enough that a busy service costs little per verdict.
BATCH = 8
# A window test holds back what leaves its window while the window leans up this much.
WINDOW_HOLD_P = 0.1


def add(rule: Rule, state: RuleState, value: float, now: float) -> bool:
    """Counts one verdict's defect value; True when the sequential test just reached the
    rule's budget (an evaluation is due now)."""
    state.window.add(now, value)
    pending = state.pending
    if pending is None:
        return False
    pending[round(value * rule.steps)] += 1
    return sum(pending) >= BATCH and _batch(rule, state, now)


def add_counts(rule: Rule, state: RuleState, histogram: Sequence[float], now: float) -> bool:
    """Counts `histogram[k]` values at level `k / steps` that arrived together (a fleet's
    counters between two reads); True as `add`."""
    levels = [k / rule.steps for k in range(rule.steps + 1)]
    moments = Moments(
        int(sum(histogram)),
        float(sum(c * v for c, v in zip(histogram, levels, strict=True))),
        float(sum(c * v * v for c, v in zip(histogram, levels, strict=True))),
    )
    state.window.add_counts(now, moments)
    if state.pending is None:
        return False
    for k, count in enumerate(histogram):
        state.pending[k] += count
    return _batch(rule, state, now)


def _batch(rule: Rule, state: RuleState, now: float) -> bool:
    """Feeds the pending values to the sequential test (none while it has no baseline or the
    rule fires: those are counted in the windows only); True when it crossed the budget."""
    test, pending = state.sequential, state.pending
    assert test is not None and pending is not None
    if sum(pending) and state.bets is not None and not state.firing:
        test.update(state.bets, pending, now)
    pending[:] = [0.0] * len(pending)
    return not state.firing and test.crossed(rule.budget_s)


def judge(rule: Rule, state: RuleState, now: float, interval_s: float) -> Decision:
    cfg = rule.config
    windows, test = state.windows, state.sequential
    assert windows is not None and cfg.baseline is not None
    m = rule.min_increase
    windows.advance(
        now,
        firing=state.firing,
        hold_from=test.building_since() if test is not None else state.leaning_since,
    )
    current, base = windows.moments()
    state.reference = base
    ready = current.samples >= cfg.min_samples and base.samples >= cfg.baseline.min_samples
    increase, p_window = increase_p_value(current, base, m / 2)
    if test is None:
        state.current, state.p_value = current, p_window
        if p_window >= WINDOW_HOLD_P:
            state.leaning_since = None
        elif state.leaning_since is None:
            state.leaning_since = now - windows.current.window_s
        fire = ready and p_window <= look_level(interval_s, rule.budget_s)
    else:
        crossed = _batch(rule, state, now)
        enough = base.samples >= cfg.baseline.min_samples
        state.bets = bets(base, m, rule.steps, rule.budget_s) if enough else None
        state.p_value = test.p_value()
        evidence = test.strongest()
        state.current = evidence if evidence.samples else current
        fire = ready and crossed
    resolve = current.samples == 0 or (
        increase < m / 2
        # A sequential page may come when the window holds little of the rise: it holds
        # until a whole window has passed since.
        and (test is None or now - state.started_at >= windows.current.window_s)
    )
    if state.firing and resolve:
        windows.resolved_at = now
        state.current = current
        if test is not None:
            test.reset()
    return Decision(fire=fire, resolve=resolve)
