"""How verdicts cluster, measured from a rule's own history: the correlation of verdicts
within one conversation (`conversation_rho`), the dispersion of verdicts that came
without one (`solo_dispersion`), and a wander about the season that lasts hours
(`lasting_wander`; while the season is young, `unseasoned_wander`; what it puts on an
hour's expectation, `wander_error`; docs/alerts.md, "Clustering nobody declared").

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
  to 1 when `k` is raised by `s^2 ln(J T) / 2` (the margin's argument, `sequential.py`),
  to first order: with few differences the exact average asks for more (docs/alerts.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence

from monitor.evidence.season import DAY_HOURS, SEASON_DAYS

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
# A wander that lasts hours (`lasting_wander`): the blocks of hours it is measured over,
# aligned within a day, and the errors taken off each scale's estimate (several are
# compared).
WANDER_SCALES = (1, 2, 3, 4, 6, 8)
WANDER_Z = 2.0
# Complete days before every scale holds MIN_DIFFERENCES blocks: until then a history is
# young, and its wander is at least what second differences of hours show over lags of up
# to YOUNG_LAG_HOURS (spanning twice that: the largest scale).
YOUNG_DAYS = math.ceil(MIN_DIFFERENCES * max(WANDER_SCALES) / DAY_HOURS)
YOUNG_LAG_HOURS = max(WANDER_SCALES) // 2
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
    ratios = [
        delta * delta / (pooled_var * spread)
        for delta, spread in _second_differences(_usual(points), 1)
    ]
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


def kappa_measured(points: Mapping[int, tuple[float, float]]) -> bool:
    """Whether buckets `index -> (verdicts, rate)` hold the second differences kappa is
    measured from (`solo_dispersion`; fewer: `KAPPA_PRIOR` stands in, none: 1)."""
    return sum(1 for _ in _second_differences(_usual(points), 1)) >= MIN_DIFFERENCES


def lasting_wander(
    residuals: Mapping[int, Sequence[tuple[int, float, float]]], learned: int, hourly_var: float
) -> float:
    """The variance of a wander that lasts hours, beyond what `hourly_var` (one verdict's
    variance times the hourly design effect: conversations, dispersion, the excess) says,
    from each of the `learned` complete days a season was learned from, its hours'
    `(hour of the day, verdicts, rate less the season's offset)` (`residuals`, by day):
    each aligned block of `L` hours (`WANDER_SCALES`) has a residual, its mean less its
    day's. Its square, unshrunk by what fitting the day's mean and the offsets take
    (`1 - N_b / N_day`, `1 - 1 / learned`), less its variance at `hourly_var`, averaged
    over blocks, is the wander's variance at that scale; each less `WANDER_Z` of its
    errors, the largest, at least 0 (0 before two complete days, or where no scale has
    `MIN_DIFFERENCES` blocks). A wander independent
    from hour to hour gives about 0 at every scale (the excess holds it); one that lasts
    hours shows from that scale up, less the part its day's mean takes."""
    if hourly_var <= 0 or learned < 2:
        return 0.0
    fitted = 1 - 1 / learned
    best = 0.0
    for scale in WANDER_SCALES:
        terms = []
        for seen in residuals.values():
            total = sum(n for _, n, _ in seen)
            mean = sum(n * r for _, n, r in seen) / total
            blocks: dict[int, list[float]] = {}
            for position, n, r in seen:
                block = blocks.setdefault(position // scale, [0.0, 0.0])
                block[0] += n
                block[1] += n * (r - mean)
            for block_n, residual in blocks.values():
                shrink = fitted * (1 - block_n / total)
                if shrink > 0:
                    terms.append((residual / block_n) ** 2 / shrink - hourly_var / block_n)
        count = len(terms)
        if count < MIN_DIFFERENCES:
            continue
        extra = sum(terms) / count
        spread = sum((e - extra) ** 2 for e in terms) / (count - 1)
        best = max(best, extra - WANDER_Z * math.sqrt(spread / count))
    return best


def unseasoned_wander(hours: Mapping[int, tuple[float, float]], hourly_var: float) -> float:
    """The variance of a wander that lasts hours as a young history can see it without a
    season to compare with: second differences of hourly rates `index -> (verdicts, rate)`
    at lags of 1 to `YOUNG_LAG_HOURS` hours (`x(h - L) - 2 x(h) + x(h + L)`, whose variance
    is `6 s^2` for a wander of variance `s^2` that lasts less than `L` hours), less what
    `hourly_var` (one verdict's variance times the hourly design effect, the excess
    included) says, averaged and over 6: the largest over the lags, at least 0 (0 where no
    lag has `MIN_DIFFERENCES` of them). A season's curvature over the lags counts as
    wander: while a season is learned from too few days to tell the two apart, that errs
    towards fewer pages."""
    if hourly_var <= 0:
        return 0.0
    usual = _usual(hours)
    best = 0.0
    for lag in range(1, YOUNG_LAG_HOURS + 1):
        terms = [
            delta * delta - hourly_var * spread for delta, spread in _second_differences(usual, lag)
        ]
        if len(terms) >= MIN_DIFFERENCES:
            best = max(best, sum(terms) / len(terms) / 6)
    return best


def wander_error(
    hours: Mapping[int, tuple[float, float]],
    day_offsets: Sequence[float],
    days: Sequence[int],
    origin: int,
    hourly_var: float,
) -> float:
    """What a wander that lasts hours puts on an hour's expectation (variance): the day
    judged has its own wander, and the season's offsets learned from `d` complete days
    (the newest `SEASON_DAYS` of `days`) carry their mean of the learned days' wander, so
    `(1 + 1 / d) s^2`. `s^2` is measured about the season (`lasting_wander`); while fewer
    than `YOUNG_DAYS` complete days back it (the largest scale not yet measured, the
    season and the wander confounded), it is at least what hours show without a season
    (`unseasoned_wander`). 0 before the first complete day (no season yet: the
    expectation is the highest hour seen, `history.History`)."""
    learned = set(days[-SEASON_DAYS:])
    if not learned:
        return 0.0
    residuals: dict[int, list[tuple[int, float, float]]] = {}
    for index, (n, x) in hours.items():
        day, position = divmod(index - origin, DAY_HOURS)
        if day in learned and n >= MIN_BUCKET_VERDICTS:
            offset = day_offsets[index % DAY_HOURS]
            residuals.setdefault(day, []).append((position, n, x - offset))
    variance = lasting_wander(residuals, len(learned), hourly_var)
    if len(learned) < YOUNG_DAYS:
        variance = max(variance, unseasoned_wander(hours, hourly_var))
    return variance * (1 + 1 / len(learned))


def _usual(points: Mapping[int, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    """The buckets `index -> (verdicts, rate)` of about the usual size: those far smaller
    hold a few conversations at most."""
    if not points:
        return {}
    floor = max(MIN_BUCKET_VERDICTS, 0.2 * statistics.median(n for n, _ in points.values()))
    return {index: (n, x) for index, (n, x) in points.items() if n >= floor}


def _second_differences(
    usual: Mapping[int, tuple[float, float]], lag: int
) -> Iterator[tuple[float, float]]:
    """Each second difference of rates at `lag` buckets and its spread: its variance in
    units of one verdict's for independent verdicts (`1 / n0 + 4 / n1 + 1 / n2`)."""
    for index, (n1, x1) in usual.items():
        before, after = usual.get(index - lag), usual.get(index + lag)
        if before is None or after is None:
            continue
        n0, x0 = before
        n2, x2 = after
        yield x0 - 2 * x1 + x2, 1 / n0 + 4 / n1 + 1 / n2
