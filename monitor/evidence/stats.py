"""Interval estimates and fixed-sample tests for defect rates, and the level a look may use.
Absolute rules compare a rate's Wilson score interval with their threshold, not the rate
(3 defects of 5 is 60 %, but 23 %-88 % at 95 %): it holds for small samples and rates near
0 or 1. `deploy/prometheus/rules.yml` writes the same formula in PromQL.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

from monitor.evidence.counts import Moments


@lru_cache(maxsize=32)
def z_score(confidence: float) -> float:
    """Two-sided standard normal quantile: 0.95 → 1.96."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def design_interval(moments: Moments, design: float, confidence: float) -> tuple[float, float]:
    """The Wilson interval of `moments`' mean for as many independent verdicts as they are
    worth (`design`: their design effect)."""
    effective = moments.samples / design
    return wilson_interval(
        moments.mean * effective,
        max(1, round(effective)) if moments.samples else 0,
        confidence,
    )


def wilson_interval(defects: float, samples: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of `defects / samples`; (0, 1) when nothing was seen."""
    if samples <= 0:
        return 0.0, 1.0
    if not 0 <= defects <= samples:
        raise ValueError(f"defects must be in [0, {samples}], got {defects}")
    z = z_score(confidence)
    z2 = z * z
    p = defects / samples
    denominator = 1 + z2 / samples
    centre = (p + z2 / (2 * samples)) / denominator
    half = z * math.sqrt(p * (1 - p) / samples + z2 / (4 * samples * samples)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def increase_p_value(
    current: Moments,
    base: Moments,
    shift: float = 0.0,
    designs: tuple[float, float] = (1.0, 1.0),
) -> tuple[float, float]:
    """(increase, p): the current mean defect value minus the reference's, and the one-sided
    p-value of a pooled two-sample z-test that the current mean is at most `shift` above the
    reference's (1.0 when either side is empty). For pass/fail verdicts this is the pooled
    two-proportion test (the pooled variance is p (1 - p)); for scores the pooled variance
    is the one the scores show. `designs`: each side's design effect (how much more its
    verdicts vary than independent ones, e.g. verdicts of one conversation)."""
    if current.samples <= 0 or base.samples <= 0:
        return 0.0, 1.0
    increase = current.mean - base.mean
    variance = current.plus(base).variance * (
        designs[0] / current.samples + designs[1] / base.samples
    )
    return increase, rise_p_value(increase, variance, shift)


def rise_p_value(increase: float, variance: float, shift: float) -> float:
    """The one-sided p-value of "the increase is at most `shift`" for an observed
    `increase` of the given variance (normal)."""
    if variance <= 0:
        return 1.0 if increase <= shift else 0.0
    return NormalDist().cdf(-(increase - shift) / math.sqrt(variance))


def look_level(interval_s: float, budget_s: float, looks: int = 1) -> float:
    """The chance of a false page allowed at one look of a test judged every `interval_s`
    (`looks` tests at each, e.g. the cohorts of a service) so that false pages come at most
    once per `budget_s`: looks at overlapping windows are positively correlated, so the sum
    over the looks of a budget is an upper bound."""
    return min(0.5, interval_s / (budget_s * max(1, looks)))


def one_sided_z(level: float) -> float:
    """The standard normal quantile a one-sided test at `level` must pass: 1e-5 → 4.265."""
    return NormalDist().inv_cdf(1 - level)
