"""How verdicts cluster, measured from a rule's own history: the correlation of verdicts
within one conversation (`conversation_rho`), the dispersion of verdicts that came
without one (`solo_dispersion`), and how blocks of buckets vary about the buckets around
them (`block_dispersion`: clustering that lasts several buckets).

- **rho**: each conversation's defect sum about its hour's rate `x`, against what as many
  independent verdicts would show. `x` includes the conversation's own verdicts, so for
  conversations of `n_u` verdicts (`N` in all, `m2 = sum n_u^2`, `m3 = sum n_u^3`) summing to
  `d_u`, in an hour of `T` verdicts (theirs and those without a conversation),
  `E sum (d_u - n_u x)^2 / v = A + rho B` with `A = N - m2 / T` and
  `B = (m2 - N) - 2 (m3 - m2) / T + m2 (m2 - N) / T^2` (an hour of one conversation has
  `A = B = 0`: it tells nothing). The hour's variance `v = x (1 - x)` is itself measured
  about `x` (`E v = V (1 - (T + rho (m2 - N)) / T^2)`) and dividing by it biases rho low,
  so each hour gives the linear equation `num = rho den`, `num = S (1 - 1 / T) - v A`,
  `den = v B + S (m2 - N) / T^2` (`S` the spread before dividing by `v`); rho is
  `sum num / sum den`, its error the sandwich over hours (each an independent cluster, a
  conversation closing into one), `sqrt(G / (G - 1) sum (num - rho den)^2) / sum den`; the
  bound is the estimate plus `RHO_BOUND_Z` errors. Until enough pairs of verdicts within
  conversations, in enough hours that tell something, were seen both are `RHO_PRIOR`
  (conservative: it widens the level's error and damps the weight of large conversations).
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
# Buckets that tell something about rho (more than one conversation) needed before its
# sandwich error is trusted (below: RHO_PRIOR).
MIN_RHO_BUCKETS = 12
# Second differences needed before kappa is trusted (below: KAPPA_PRIOR).
MIN_DIFFERENCES = 12
KAPPA_PRIOR = 2.0
MIN_BUCKET_VERDICTS = 10
# The correlation of overlapping second differences inflates their mean's variance by
# 1 + 2 (2/3)^2 + 2 (1/6)^2.
_OVERLAP = 1.94


# A conversation bucket: (verdicts of conversations N, sum of sizes squared m2, sum of sizes
# cubed m3, sum of defect sums squared, sum of size x defects, all verdicts of the bucket T,
# its rate, its per-verdict variance).
Bucket = tuple[float, float, float, float, float, float, float, float]


def _terms(bucket: Bucket) -> tuple[float, float, float] | None:
    """A bucket's moment equation `num = rho den` (`num`, `den`) and its pairs of
    verdicts within conversations; None if it holds no conversation."""
    conv_n, m2, m3, dd, nd, total, x, v = bucket
    if conv_n <= 0 or v <= 0:
        return None
    total = max(total, conv_n)
    pairs = m2 - conv_n
    raw = dd - 2 * x * nd + x * x * m2
    fixed = conv_n - m2 / total
    slope = pairs - 2 * (m3 - m2) / total + m2 * pairs / (total * total)
    if slope <= 1e-9 * pairs:
        return 0.0, 0.0, 0.0  # one conversation and nothing else: nothing to tell
    # E raw = V (A + rho B); E v = V (1 - (T + rho pairs) / T^2).
    shrink = 1 - 1 / total
    return raw * shrink - v * fixed, v * slope + raw * pairs / (total * total), pairs


def rho_from(terms: Iterable[tuple[float, float, float]]) -> tuple[float, float]:
    """rho and its upper bound from each bucket's `(num, den, pairs)`; `RHO_PRIOR` for
    both until `MIN_PAIRS_FOR_RHO` pairs in `MIN_RHO_BUCKETS` buckets that tell something
    (`den > 0`; the others' pairs do not count)."""
    informative = [(e, b, p) for e, b, p in terms if b > 0]
    pairs = sum(p for _, _, p in informative)
    if pairs < MIN_PAIRS_FOR_RHO or len(informative) < MIN_RHO_BUCKETS:
        return RHO_PRIOR, RHO_PRIOR
    den = sum(b for _, b, _ in informative)
    rho = min(1.0, max(0.0, sum(e for e, _, _ in informative) / den))
    # The sandwich over buckets, with the small-sample factor G / (G - 1).
    squares = sum((e - rho * b) ** 2 for e, b, _ in informative)
    count = len(informative)
    se = math.sqrt(squares * count / (count - 1)) / den
    return rho, min(1.0, rho + RHO_BOUND_Z * se)


def conversation_rho(buckets: Iterable[Bucket]) -> tuple[float, float]:
    """rho and its upper bound over independent buckets (`Bucket`)."""
    return rho_from(term for bucket in buckets if (term := _terms(bucket)) is not None)


def pooled_rho(bucket: Bucket) -> float:
    """rho from a single bucket (a window's conversations): the estimate alone, no bound
    (one cluster gives no error of its own); `RHO_PRIOR` until `MIN_PAIRS_FOR_RHO` pairs."""
    term = _terms(bucket)
    if term is None or term[2] < MIN_PAIRS_FOR_RHO or term[1] <= 0:
        return RHO_PRIOR
    return min(1.0, max(0.0, term[0] / term[1]))


def solo_dispersion(
    points: Mapping[int, tuple[float, float]],
    pooled_var: float,
    log_budget: float,
    *,
    raised: bool = True,
) -> float:
    """kappa of buckets `index -> (verdicts, rate)`, at least 1 (`log_budget`: ln(J T));
    raised for its own error unless not `raised` (the estimate alone)."""
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
    if not raised:
        return max(1.0, estimate)
    spread = sum((r - estimate) ** 2 for r in ratios) / (count - 1)
    relative_variance = _OVERLAP * spread / (count * estimate * estimate)
    return max(1.0, estimate * (1 + relative_variance * log_budget / 2))


# Blocks of this many consecutive buckets are each compared with the buckets around them
# (`block_dispersion`): an hour up to a third of a day for hourly buckets.
BLOCK_SCALES = (1, 2, 4, 8)
# The buckets a block is compared with: this many on each side of it, all held.
SURROUND_BUCKETS = 12
# A longer block's estimate counts less this many of its standard errors (the shortest
# block's estimate counts as it is): a longer scale is taken where it shows more.
BLOCK_SCALE_Z = 1.0

# index -> (rate, 1 / verdicts): rates are averaged bucket by bucket, not verdict by
# verdict, so that a drift cancels between the two sides of a block whatever the traffic.
_Rates = dict[int, tuple[float, float]]


def _mean(rates: _Rates, indices: Iterable[int]) -> tuple[float, float] | None:
    """The mean rate of the buckets `indices` and its variance in units of one verdict's
    (None: one of them is not held)."""
    total, inverse, count = 0.0, 0.0, 0
    for i in indices:
        held = rates.get(i)
        if held is None:
            return None
        total += held[0]
        inverse += held[1]
        count += 1
    return total / count, inverse / (count * count)


def _without_period(rates: _Rates, period: int) -> _Rates:
    """`rates` less each bucket's place in a cycle of `period` buckets: the mean, by place,
    of the rates' departures from the centred mean of a whole cycle around them (in which
    the cycle cancels, and a drift does but for a constant by place)."""
    half = period // 2
    num = [0.0] * period
    den = [0] * period
    for index, (x, _) in rates.items():
        around = _mean(rates, range(index - half, index - half + period))
        if around is not None:
            num[index % period] += x - around[0]
            den[index % period] += 1
    places = [num[k] / den[k] if den[k] else 0.0 for k in range(period)]
    seen = [places[k] for k in range(period) if den[k]]
    centre = sum(seen) / len(seen) if seen else 0.0
    return {i: (x - places[i % period] + centre, w) for i, (x, w) in rates.items()}


def block_dispersion(
    points: Mapping[int, tuple[float, float]],
    pooled_var: float,
    period: int = 0,
    within: float = 1.0,
) -> float:
    """How much more blocks of consecutive buckets `index -> (verdicts, rate)` vary about
    the buckets around them than independent verdicts would, with a cycle of `period`
    buckets taken out (0: none): at each scale `L` of `BLOCK_SCALES`, each aligned block
    of `L` buckets against the `SURROUND_BUCKETS` on each side of it (all held), the
    squared difference of their mean rates less its variance for verdicts clustered within
    each bucket by `within` (the design effect second differences measured), averaged over
    blocks (the variance a wander adds), over the variance of that difference for
    independent verdicts at the bucket size a verdict sees on average (sum n^2 / sum n),
    plus `within`. For verdicts whose clustering is shorter than a block every
    scale gives the same design effect; clustering over several buckets (a mix that wanders
    for hours) shows in full only at a scale as long; a linear drift cancels. The largest
    scale's estimate (a longer one less `BLOCK_SCALE_Z` of its errors), at least 1; 1 where
    no scale has `MIN_DIFFERENCES` blocks."""
    if not points or pooled_var <= 0:
        return 1.0
    # Every bucket but a nearly empty one: a block needs its whole surround, and a quiet
    # night's buckets count with their own variance.
    rates = {index: (x, 1 / n) for index, (n, x) in points.items() if n >= MIN_BUCKET_VERDICTS}
    if period > 1:
        rates = _without_period(rates, period)
    # The wander's variance does not depend on traffic, its design effect does: it is
    # given at the bucket size a verdict sees on average.
    seen = sum(1 / w for _, w in rates.values())
    size = sum(1 / (w * w) for _, w in rates.values()) / seen if seen else 0.0
    best = 1.0
    for scale in BLOCK_SCALES:
        extras = []
        for start in {index - index % scale for index in rates}:
            block = _mean(rates, range(start, start + scale))
            around = _mean(
                rates,
                (
                    *range(start - SURROUND_BUCKETS, start),
                    *range(start + scale, start + scale + SURROUND_BUCKETS),
                ),
            )
            if block is None or around is None:
                continue
            delta = block[0] - around[0]
            extras.append(delta * delta - within * pooled_var * (block[1] + around[1]))
        count = len(extras)
        if count < MIN_DIFFERENCES:
            continue
        extra = sum(extras) / count
        if scale > BLOCK_SCALES[0]:
            spread = sum((e - extra) ** 2 for e in extras) / (count - 1)
            extra -= BLOCK_SCALE_Z * math.sqrt(spread / count)
        independent = pooled_var * (1 / (size * scale) + 1 / (size * 2 * SURROUND_BUCKETS))
        best = max(best, within + extra / independent)
    return best
