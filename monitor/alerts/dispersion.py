"""How verdicts cluster, measured from a rule's own history: the correlation of verdicts
within one conversation (`conversation_rho`) and the dispersion of verdicts that came
without one (`solo_dispersion`).

- **rho**: each conversation's defect sum about its hour's rate, against what as many
  independent verdicts would show: `sum (d_u - n_u x)^2 / v = N + rho (sum n_u^2 - N)`
  for conversations of `n_u` verdicts (`N` in all) summing to `d_u`. Until enough pairs of
  verdicts within conversations were seen it is `RHO_PRIOR` (conservative: it widens the
  level's error and damps the weight of large conversations).
- **kappa**: second differences of consecutive buckets' rates (a level, a drift and most of
  a daily cycle cancel in them) against what independent verdicts would give; raw rates,
  not deseasonalised: a season learned from the same buckets would take part of their noise
  with it, and a cycle's curvature over three hours can only raise the estimate. Buckets
  far smaller than the usual hold a few conversations at most and take no part. It
  captures dependence within about a bucket (an hour), and is raised by what its own error
  would cost on average: tempering by `k` where the truth is `K` multiplies false pages by
  about `(J T)^(1 - k / K)`; over a normal error of relative variance `s^2` that averages
  to 1 when `k` is raised by `s^2 ln(J T) / 2` (the margin's argument, `sequential.py`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping

RHO_PRIOR = 0.3
MIN_PAIRS_FOR_RHO = 200
RHO_BOUND_Z = 2.0
# Second differences needed before kappa is trusted (below: KAPPA_PRIOR).
MIN_DIFFERENCES = 12
KAPPA_PRIOR = 2.0
MIN_BUCKET_VERDICTS = 10
# The correlation of overlapping second differences inflates their mean's variance by
# 1 + 2 (2/3)^2 + 2 (1/6)^2.
_OVERLAP = 1.94


def rho_from(spread: float, verdicts: float, pairs: float) -> tuple[float, float]:
    """rho and its upper bound from `spread` (sum of `(d_u - n_u x)^2 / v`), the
    conversations' `verdicts` and their `pairs` of verdicts (`sum n_u^2 - N`)."""
    if pairs < MIN_PAIRS_FOR_RHO:
        return RHO_PRIOR, RHO_PRIOR
    rho = min(1.0, max(0.0, (spread - verdicts) / pairs))
    size = 1 + pairs / verdicts
    se = (1 - rho) * (1 + (size - 1) * rho) * math.sqrt(2 / pairs)
    return rho, min(1.0, rho + RHO_BOUND_Z * se)


def conversation_rho(
    buckets: Iterable[tuple[float, float, float, float, float, float]],
) -> tuple[float, float]:
    """rho and its upper bound over buckets of `(verdicts of conversations, sum of sizes
    squared, sum of defect sums squared, sum of size x defects, the bucket's rate, its
    per-verdict variance)`."""
    spread = verdicts = pairs = 0.0
    for conv_n, m2, dd, nd, x, v in buckets:
        if conv_n <= 0 or v <= 0:
            continue
        spread += (dd - 2 * x * nd + x * x * m2) / v
        verdicts += conv_n
        pairs += m2 - conv_n
    return rho_from(spread, verdicts, pairs)


def solo_dispersion(
    points: Mapping[int, tuple[float, float]], pooled_var: float, log_budget: float
) -> float:
    """kappa of buckets `index -> (verdicts, rate)`, at least 1 (`log_budget`: ln(J T))."""
    if not points or pooled_var <= 0:
        return 1.0
    floor = max(MIN_BUCKET_VERDICTS, 0.2 * statistics.median(n for n, _ in points.values()))
    usual = {index: (n, x) for index, (n, x) in points.items() if n >= floor}
    ratios = []
    for index, (n1, x1) in usual.items():
        before, after = usual.get(index - 1), usual.get(index + 1)
        if before is None or after is None:
            continue
        n0, x0 = before
        n2, x2 = after
        delta = x0 - 2 * x1 + x2
        ratios.append(delta * delta / (pooled_var * (1 / n0 + 4 / n1 + 1 / n2)))
    count = len(ratios)
    if count < MIN_DIFFERENCES:
        return KAPPA_PRIOR
    estimate = sum(ratios) / count
    if estimate <= 0:
        return 1.0
    spread = sum((r - estimate) ** 2 for r in ratios) / (count - 1)
    relative_variance = _OVERLAP * spread / (count * estimate * estimate)
    return max(1.0, estimate * (1 + relative_variance * log_budget / 2))
