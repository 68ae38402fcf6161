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
clipped to [0, 1] (any fixed λ gives a valid interval; clipping keeps a noisy estimate of λ
from amplifying the detector). The interval is θ̂ ± z·√Var, z for 95 %, cut to [0, 1].

Every quantity is binary, so a window is four counts of audited pairs and two of the rest
(`Tally`), which add across buckets and replicas. What the interval assumes: the audited
records are a random sample of the evaluated ones (a hash of the trace id is random with
respect to content), the reference is the truth, and n is large enough for the normal
approximation (`MIN_AUDITED`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054
MIN_AUDITED = 30
"""Fewer audited records than this and no interval is given: the normal approximation of
a mean of a few binary values does not hold (its variance is often estimated as 0)."""


@dataclass(slots=True)
class Tally:
    """What a window holds: the detector's verdicts on the records that were not audited,
    and the audited pairs by (detector, reference) verdict."""

    unaudited: int = 0
    unaudited_defects: int = 0
    agree_pass: int = 0  # detector pass, reference pass
    false_alarms: int = 0  # detector fail, reference pass
    misses: int = 0  # detector pass, reference fail
    agree_defect: int = 0  # detector fail, reference fail

    def add_unaudited(self, defect: bool) -> None:
        self.unaudited += 1
        self.unaudited_defects += defect

    def add_audited(self, detector_defect: bool, reference_defect: bool) -> None:
        if detector_defect:
            if reference_defect:
                self.agree_defect += 1
            else:
                self.false_alarms += 1
        elif reference_defect:
            self.misses += 1
        else:
            self.agree_pass += 1

    def merge(self, other: Tally) -> None:
        self.unaudited += other.unaudited
        self.unaudited_defects += other.unaudited_defects
        self.agree_pass += other.agree_pass
        self.false_alarms += other.false_alarms
        self.misses += other.misses
        self.agree_defect += other.agree_defect

    @property
    def audited(self) -> int:
        return self.agree_pass + self.false_alarms + self.misses + self.agree_defect

    @property
    def evaluated(self) -> int:
        return self.unaudited + self.audited


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


def _interval(center: float, variance: float, z: float) -> Interval:
    half = z * math.sqrt(max(variance, 0.0))
    inside = min(1.0, max(0.0, center))
    return Interval(inside, max(0.0, center - half), min(1.0, center + half))


def _variance(count: int, ones: int) -> float:
    """Sample variance (n − 1) of `count` binary values of which `ones` are 1."""
    if count < 2:
        return 0.0
    mean = ones / count
    return (ones - count * mean * mean) / (count - 1)


def estimate(
    tally: Tally, *, tuned: bool = True, z: float = Z95, min_audited: int = MIN_AUDITED
) -> Estimate:
    """The window's estimate; `tuned` False: plain PPI (λ = 1). No interval below
    `min_audited` audited records or 2 unaudited ones."""
    n, big_n = tally.audited, tally.unaudited
    detector_defects = tally.unaudited_defects + tally.false_alarms + tally.agree_defect
    evaluated = n + big_n
    raw = detector_defects / evaluated if evaluated else 0.0
    reference_defects = tally.misses + tally.agree_defect
    reference_passes = tally.agree_pass + tally.false_alarms
    miss_rate = tally.misses / reference_defects if reference_defects else None
    false_alarm_rate = tally.false_alarms / reference_passes if reference_passes else None
    if n < max(min_audited, 2) or big_n < 2:
        return Estimate(evaluated, n, raw, None, None, 1.0, miss_rate, false_alarm_rate)
    # Audited moments: f and Y binary, so sums of products are counts.
    f_ones = tally.false_alarms + tally.agree_defect
    mean_f, mean_y = f_ones / n, reference_defects / n
    var_f_audited = _variance(n, f_ones)
    var_y = _variance(n, reference_defects)
    cov_yf = (tally.agree_defect - n * mean_f * mean_y) / (n - 1)
    mean_f_unaudited = tally.unaudited_defects / big_n
    var_f_unaudited = _variance(big_n, tally.unaudited_defects)
    weight = 1.0
    if tuned:
        var_f_all = _variance(evaluated, detector_defects)
        weight = cov_yf / ((1 + n / big_n) * var_f_all) if var_f_all > 0 else 0.0
        weight = min(1.0, max(0.0, weight))
    center = weight * mean_f_unaudited + mean_y - weight * mean_f
    var_residual = var_y - 2 * weight * cov_yf + weight * weight * var_f_audited
    variance = weight * weight * var_f_unaudited / big_n + var_residual / n
    return Estimate(
        evaluated,
        n,
        raw,
        _interval(center, variance, z),
        _interval(mean_y, var_y / n, z),
        weight,
        miss_rate,
        false_alarm_rate,
    )
