"""The true defect rate from a cheap detector's verdicts on every record and a reference's
verdicts on an audited random share of them: prediction-powered inference.

Notation (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, "Prediction-powered inference",
Science 2023; and the power-tuned PPI++ of Angelopoulos, Duchi, Zrnic, 2023): f is the
detector's verdict (1 = defect), Y the reference's. Of the evaluated records, `n` were
audited (both f and Y known) and `N` were not (f only). For a tuning weight λ,

    θ̂_λ = λ · mean_N(f) + mean_n(Y − λ f)
    Var(θ̂_λ) ≈ λ² · var_N(f) / N + var_n(Y − λ f) / n

λ = 1 is plain PPI (mean of the predictor plus the mean correction); λ = 0 is the audited
sample alone; PPI++ takes λ̂ = cov_n(Y, f) / ((1 + n/N) · var(f)), the λ of least variance,
clipped to [0, 1] (below, its per-trace form) (any fixed λ gives a valid interval; clipping keeps a noisy estimate of λ
from amplifying the detector). The interval is θ̂ ± t·√Var, cut to [0, 1].

Records are not independent where a trace holds several requests: audits are chosen by the
hash of the trace id, so a trace's records are audited (or not) together, a cluster
sample. The variances are therefore cluster-robust (per trace): with m_c records of trace c
in a sample, F_c the detector's defects and Y_c the reference's among them,

    var_n(Y − λ f) / n  →  K/(K − 1) · Σ_c ((Y_c − λ F_c) − m_c · mean_n(Y − λ f))² / n²

over the K audited traces, and the same for the unaudited term with F alone. With one
record per trace this is the i.i.d. variance. λ̂ is the weight of least variance of that
form, cov / (V_N(f) + V_n(f)) in the same per-trace terms (with one record per trace,
PPI++'s λ̂ with each sample's own var(f)): where a trace's reference verdicts balance out
(each conversation half right), the detector's per-trace noise would only add variance, and
λ̂ falls towards 0.
The critical value t is Student's with K − 1 degrees of freedom for 95 %, not z: with few
audited traces the variance is itself uncertain.

Every quantity is binary, so a window is counts (`Tally`): four of audited pairs, two of
the rest, and per sample the sums over traces of the products of each trace's sums
(`Traces`, kept as their excess over one record per trace, so a tally of one-record traces
is its six counts alone); all add across buckets and replicas. What the interval assumes:
the audited traces are a random sample of the evaluated ones (a hash of the trace id is
random with respect to content, independent between traces), the reference is the truth, a
trace's records are all counted as that one trace, and there are enough audited traces for
the t approximation (`MIN_AUDITED`; docs/audit.md says what coverage was measured at how
many).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

Z95 = 1.959963984540054
MIN_AUDITED = 30
"""Fewer effective audited traces (`Tally.effective_audited_traces`; the audited records
where each is a trace of its own) than this and no interval is given: the approximation of
a mean of a few binary values (or of a few traces' sums) does not hold, its variance is
often estimated as 0."""
FEW = 5
"""Fewer effective audited traces than this of the reference's rarer verdict (none: the
audited verdicts are unanimous) and the interval is at least the exact binomial one on the
audited traces alone (`exact_interval`): the variance of a few binary values, or of values
that all agree (0), says the rate is known where the sample cannot tell."""


@dataclass(frozen=True, slots=True)
class Trace:
    """One trace's records so far in one tally and sample (audited or not): how many, the
    detector's defects among them and (audited) the reference's."""

    records: int = 0
    flagged: int = 0
    defects: int = 0


@dataclass(slots=True)
class Traces:
    """Sums over one sample's traces of the products of each trace's sums (m records, F the
    detector's defects, Y the reference's), as their excess over what the same records would
    give one trace each: `joined` counts records that joined a trace already counted (so
    traces = records − joined), `mf` is Σ m·F − Σ f, and so on. Zero for one-record traces."""

    joined: int = 0
    mm: int = 0
    mf: int = 0
    my: int = 0
    ff: int = 0
    fy: int = 0
    yy: int = 0

    def add(self, trace: Trace, flagged: bool, defect: bool) -> Trace:
        """Count one more record of `trace` (its sums before it); its sums after."""
        m, big_f, big_y = trace.records, trace.flagged, trace.defects
        f, y = int(flagged), int(defect)
        self.joined += m > 0
        self.mm += 2 * m
        self.mf += big_f + m * f
        self.my += big_y + m * y
        self.ff += 2 * big_f * f
        self.fy += big_f * y + f * big_y
        self.yy += 2 * big_y * y
        return Trace(m + 1, big_f + f, big_y + y)

    def merge(self, other: Traces) -> None:
        _add_counts(self, other)


@dataclass(slots=True)
class Tally:
    """What a window holds: the detector's verdicts on the records that were not audited,
    the audited pairs by (detector, reference) verdict, and each sample's `Traces`."""

    unaudited: int = 0
    unaudited_defects: int = 0
    agree_pass: int = 0  # detector pass, reference pass
    false_alarms: int = 0  # detector fail, reference pass
    misses: int = 0  # detector pass, reference fail
    agree_defect: int = 0  # detector fail, reference fail
    unaudited_traces: Traces = field(default_factory=Traces)
    audited_traces: Traces = field(default_factory=Traces)

    def add_unaudited(self, defect: bool, trace: Trace = Trace()) -> Trace:
        """Count a record not audited, of `trace` (its sums in this tally so far; by
        default a trace of its own); the trace's sums after it."""
        self.unaudited += 1
        self.unaudited_defects += defect
        return self.unaudited_traces.add(trace, defect, False)

    def add_audited(
        self, detector_defect: bool, reference_defect: bool, trace: Trace = Trace()
    ) -> Trace:
        """Count an audited pair, as `add_unaudited`."""
        if detector_defect:
            if reference_defect:
                self.agree_defect += 1
            else:
                self.false_alarms += 1
        elif reference_defect:
            self.misses += 1
        else:
            self.agree_pass += 1
        return self.audited_traces.add(trace, detector_defect, reference_defect)

    def merge(self, other: Tally) -> None:
        _add_counts(self, other)

    @property
    def audited(self) -> int:
        return self.agree_pass + self.false_alarms + self.misses + self.agree_defect

    @property
    def evaluated(self) -> int:
        return self.unaudited + self.audited

    @property
    def audited_trace_count(self) -> int:
        return self.audited - self.audited_traces.joined

    @property
    def effective_audited_traces(self) -> float:
        """(Σ m)² / Σ m² over the audited traces (Kish's effective number of clusters):
        the audited records where each is its own trace, fewer than the traces where they
        hold unequal numbers of records."""
        n = self.audited
        return n * n / (n + self.audited_traces.mm) if n else 0.0


def _add_counts(into: Traces | Tally, other: Traces | Tally) -> None:
    """Adds each count of `other` to `into`'s, and each of its `Traces` to `into`'s: every
    field is one or the other."""
    for count in fields(into):
        mine, theirs = getattr(into, count.name), getattr(other, count.name)
        if isinstance(mine, Traces):
            _add_counts(mine, theirs)
        else:
            setattr(into, count.name, mine + theirs)


@dataclass(frozen=True, slots=True)
class Interval:
    estimate: float
    lower: float
    upper: float

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def as_json(self) -> dict[str, float]:
        return {"estimate": self.estimate, "lower": self.lower, "upper": self.upper}


@dataclass(frozen=True, slots=True)
class Estimate:
    """A window's figures. `raw`: the detector's defect rate on every evaluated record
    (what the dashboard shows without audits). `corrected`: PPI(++) estimate and interval
    of the reference's defect rate; `audited_only`: the same from the audited records alone
    (the classical interval, for the gain). `miss_rate`: share of the reference's defects
    the detector passed; `false_alarm_rate`: share of the reference's passes it failed
    (None where the reference saw none)."""

    evaluated: int
    audited: int
    raw: float
    corrected: Interval | None
    audited_only: Interval | None
    weight: float  # λ
    miss_rate: float | None
    false_alarm_rate: float | None

    def as_json(self) -> dict[str, Any]:
        """The figures as `GET /audit` shows them."""
        corrected, alone = self.corrected, self.audited_only
        return {
            "evaluated": self.evaluated,
            "audited": self.audited,
            "raw_defect_rate": self.raw,
            "estimate": None if corrected is None else corrected.as_json(),
            "audited_only": None if alone is None else alone.as_json(),
            "weight": self.weight if corrected is not None else None,
            "miss_rate": self.miss_rate,
            "false_alarm_rate": self.false_alarm_rate,
        }


def _interval(center: float, variance: float, critical: float) -> Interval:
    half = critical * math.sqrt(max(variance, 0.0))
    inside = min(1.0, max(0.0, center))
    return Interval(inside, max(0.0, center - half), min(1.0, center + half))


def exact_interval(successes: float, trials: float, alpha: float = 0.05) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial rate at level 1 − `alpha`, of
    effective counts that need not be whole: `trials` rounded down and `successes` rounded
    down for the lower bound and up for the upper, so the interval is never narrower than
    the one of the counts themselves."""
    n = max(1, math.floor(trials))
    low, high = min(n, math.floor(successes)), min(n, math.ceil(successes))
    return _exact_lower(low, n, alpha / 2), 1.0 - _exact_lower(n - high, n, alpha / 2)


def _exact_lower(k: int, n: int, tail: float) -> float:
    """The p at which P(X ≥ k) = `tail` for X ~ Binomial(n, p) (0 for k = 0), by bisection."""
    if k == 0:
        return 0.0
    if k > n // 2:  # the sum below runs over the fewer terms
        return 1.0 - _exact_upper(n - k, n, tail)
    low, high = 0.0, 1.0
    for _ in range(60):
        p = (low + high) / 2
        if 1.0 - _at_most(k - 1, n, p) < tail:
            low = p
        else:
            high = p
    return low


def _exact_upper(k: int, n: int, tail: float) -> float:
    """The p at which P(X ≤ k) = `tail` (1 for k = n), by bisection; k ≤ n / 2."""
    low, high = 0.0, 1.0
    for _ in range(60):
        p = (low + high) / 2
        if _at_most(k, n, p) > tail:
            low = p
        else:
            high = p
    return high


def _at_most(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), 0 < p < 1, summed in logs."""
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(n + 1)
    return sum(
        math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        for i in range(k + 1)
    )


def _at_least(interval: Interval, exact: tuple[float, float] | None) -> Interval:
    """`interval` widened to contain `exact` (None: as it is)."""
    if exact is None:
        return interval
    lower, upper = min(interval.lower, exact[0]), max(interval.upper, exact[1])
    return Interval(interval.estimate, lower, upper)


def t_critical(z: float, freedom: int) -> float:
    """Student's t quantile of the normal quantile `z` at `freedom` degrees of freedom, by
    the Cornish-Fisher expansion (Abramowitz and Stegun 26.7.5): within 0.001 of the exact
    value from 5 degrees of freedom on at z = 1.96."""
    nu = float(freedom)
    z2 = z * z
    return z * (
        1
        + (z2 + 1) / (4 * nu)
        + ((5 * z2 + 16) * z2 + 3) / (96 * nu**2)
        + (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * nu**3)
        + ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / (92160 * nu**4)
    )


@dataclass(frozen=True, slots=True)
class _Sample:
    """One sample's centred per-trace sums of squares: Σ (Y_c − a·m_c)², Σ (F_c − b·m_c)²
    and their cross product, a and b the sample's record means, and the factor
    K/(K − 1)/n² that makes them the variance of the mean (0 below 2 traces)."""

    uu: float
    vv: float
    uv: float
    scale: float


def _sample(records: int, flagged: int, defects: int, fy: int, extra: Traces) -> _Sample:
    traces = records - extra.joined
    if records == 0 or traces < 2:
        return _Sample(0.0, 0.0, 0.0, 0.0)
    # Σ over traces of m², m·F, ... : the records' own (binary: f² = f) plus the excess.
    mm, mf, my = records + extra.mm, flagged + extra.mf, defects + extra.my
    ff, yy, fyy = flagged + extra.ff, defects + extra.yy, fy + extra.fy
    a, b = defects / records, flagged / records
    uu = yy - 2 * a * my + a * a * mm
    vv = ff - 2 * b * mf + b * b * mm
    uv = fyy - a * mf - b * my + a * b * mm
    return _Sample(uu, vv, uv, traces / (traces - 1) / records**2)


def estimate(
    tally: Tally,
    *,
    tuned: bool = True,
    z: float = Z95,
    min_audited: int = MIN_AUDITED,
    exact_below: int = FEW,
) -> Estimate:
    """The window's estimate; `tuned` False: plain PPI (λ = 1). No interval below
    `min_audited` effective audited traces or 2 unaudited traces. The critical value is Student's t
    of `z` with (audited traces − 1) degrees of freedom. Below `exact_below` effective audited
    traces of the reference's rarer verdict, each interval is widened to hold the exact one
    on the audited traces alone (0: never)."""
    n, big_n = tally.audited, tally.unaudited
    detector_defects = tally.unaudited_defects + tally.false_alarms + tally.agree_defect
    evaluated = n + big_n
    raw = detector_defects / evaluated if evaluated else 0.0
    reference_defects = tally.misses + tally.agree_defect
    reference_passes = tally.agree_pass + tally.false_alarms
    miss_rate = tally.misses / reference_defects if reference_defects else None
    false_alarm_rate = tally.false_alarms / reference_passes if reference_passes else None
    traces = tally.audited_trace_count
    unaudited_traces = big_n - tally.unaudited_traces.joined
    if tally.effective_audited_traces < max(min_audited, 2) or unaudited_traces < 2:
        return Estimate(evaluated, n, raw, None, None, 1.0, miss_rate, false_alarm_rate)
    f_ones = tally.false_alarms + tally.agree_defect
    audited = _sample(n, f_ones, reference_defects, tally.agree_defect, tally.audited_traces)
    rest = _sample(big_n, tally.unaudited_defects, 0, 0, tally.unaudited_traces)
    var_rest = rest.scale * rest.vv  # of mean_N(f)
    var_y = audited.scale * audited.uu  # of mean_n(Y)
    cov_yf = audited.scale * audited.uv
    var_f = audited.scale * audited.vv
    weight = 1.0
    if tuned:  # the λ of least (per-trace) variance
        weight = cov_yf / (var_rest + var_f) if var_rest + var_f > 0 else 0.0
        weight = min(1.0, max(0.0, weight))
    mean_f, mean_y = f_ones / n, reference_defects / n
    center = weight * tally.unaudited_defects / big_n + mean_y - weight * mean_f
    variance = weight * weight * var_rest + var_y - 2 * weight * cov_yf + weight**2 * var_f
    critical = t_critical(z, traces - 1)
    # Few of the reference's rarer verdict (or none): no narrower than the exact interval
    # on the audited traces alone, in effective counts.
    effective = tally.effective_audited_traces
    rarer = min(mean_y, 1.0 - mean_y) * effective
    alpha = math.erfc(z / math.sqrt(2))
    exact = exact_interval(mean_y * effective, effective, alpha) if rarer < exact_below else None
    return Estimate(
        evaluated,
        n,
        raw,
        _at_least(_interval(center, variance, critical), exact),
        _at_least(_interval(mean_y, var_y, critical), exact),
        weight,
        miss_rate,
        false_alarm_rate,
    )
