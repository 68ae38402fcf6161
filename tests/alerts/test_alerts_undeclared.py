"""Clustering nobody declared: a rate that wanders about its season for hours (a topic or
route mix drifting, no record field naming it) must temper a regression rule's evidence as
much as it moves the rate, whatever carries the verdicts; independent verdicts and a slow
drift must not be tempered. Time is the buckets' own (each hour's verdicts added at its
time), never the machine's."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from monitor.alerts.evidence.counts import Moments
from monitor.alerts.evidence.dispersion import (
    BLOCK_SCALES,
    SURROUND_BUCKETS,
    block_dispersion,
)
from monitor.alerts.evidence.history import Expectation, History
from monitor.alerts.evidence.sequential import bets

HOUR_S = 3600.0
DAYS = 14
PER_HOUR = 36_000  # 10 verdicts a second
BUDGET_S = 90 * 86_400.0
MEAN = 0.2
WANDER_SD = 0.01


def _rates(rng: np.random.Generator, keep: float, sd: float, hours: int) -> np.ndarray:
    """Hourly rates: `MEAN`, a daily cycle, and an AR(1) wander of sd `sd` that keeps
    `keep` of itself from one hour to the next."""
    wander = np.empty(hours)
    w = 0.0
    for hour in range(hours):
        w = keep * w + math.sqrt(1 - keep * keep) * rng.normal(0.0, sd)
        wander[hour] = w
    cycle = 0.03 * np.cos(2 * math.pi * (np.arange(hours) % 24 - 14) / 24)
    rates: np.ndarray = MEAN + cycle + wander
    return rates


def _expected(rates: np.ndarray, rng: np.random.Generator, night: float = 1.0) -> Expectation:
    """What a seasonal history of hourly buckets of `PER_HOUR` verdicts without a
    conversation at `rates` expects just after its last hour; at the night's trough
    `night` times as many verdicts as at the day's peak (`PER_HOUR`)."""
    history = History(86_400.0, "day", 1, BUDGET_S)
    for hour, rate in enumerate(rates.tolist()):
        share = night + (1 - night) * (1 + math.cos(2 * math.pi * (hour % 24 - 14) / 24)) / 2
        verdicts = round(PER_HOUR * share)
        defects = float(rng.binomial(verdicts, rate))
        counted = Moments(verdicts, defects, defects)
        history.add(hour * HOUR_S + HOUR_S / 2, counted, counted, rise=False)
    expected = history.expectation(len(rates) * HOUR_S + 60.0, 100)
    assert expected is not None
    return expected


def _block_design(keep: float, sd: float, per_bucket: float, scale: int) -> float:
    """The design effect of a block of `scale` hours against the `SURROUND_BUCKETS` on
    each side of it, for an AR(1) wander (`_rates`) over binomial verdicts."""
    span = 2 * SURROUND_BUCKETS + scale
    index = np.arange(span)
    cov = sd * sd * keep ** np.abs(index[:, None] - index[None, :])
    inside = (index >= SURROUND_BUCKETS) & (index < SURROUND_BUCKETS + scale)
    weights = np.where(inside, 1 / scale, -1 / (2 * SURROUND_BUCKETS))
    variance = MEAN * (1 - MEAN)
    binomial = variance * (1 / (per_bucket * scale) + 1 / (per_bucket * 2 * SURROUND_BUCKETS))
    return float(1 + weights @ cov @ weights / binomial)


@pytest.mark.parametrize("night", [1.0, 0.1], ids=["flat traffic", "a tenth at night"])
def test_a_wander_that_lasts_hours_tempers_verdicts_as_much_as_it_moves_the_rate(
    night: float,
) -> None:
    keep = 0.85  # a wander that lasts about six hours
    # At the bucket size a verdict sees on average (sum n^2 / sum n).
    share = night + (1 - night) * (1 + np.cos(2 * np.pi * (np.arange(24) - 14) / 24)) / 2
    seen = PER_HOUR * float((share**2).sum() / share.sum())
    truth = _block_design(keep, WANDER_SD, seen, max(BLOCK_SCALES))
    tempering = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        expected = _expected(_rates(rng, keep, WANDER_SD, DAYS * 24), rng, night)
        tempering.append(expected.kappa * expected.excess)
    # Second differences of hourly rates alone see about a twentieth of it; fourteen days
    # hold about 40 blocks of eight hours, each estimate is that noisy.
    assert float(np.median(tempering)) >= 0.4 * truth, (tempering, truth)
    assert min(tempering) >= 0.25 * truth, (tempering, truth)


def test_a_wander_independent_between_hours_is_measured_as_before() -> None:
    truth = _block_design(0.0, WANDER_SD, PER_HOUR, 1)
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        expected = _expected(_rates(rng, 0.0, WANDER_SD, DAYS * 24), rng)
        assert 0.7 * truth <= expected.kappa * expected.excess <= 1.6 * truth


@pytest.mark.parametrize("drift", [0.0, 0.1])
def test_independent_verdicts_and_a_slow_drift_are_not_tempered(drift: float) -> None:
    """Without a wander the blocks add nothing, with or without a drift of the level over
    the days (it cancels against the buckets on both sides)."""
    hours = DAYS * 24
    for seed in range(3):
        rng = np.random.default_rng(200 + seed)
        rates = _rates(rng, 0.0, 0.0, hours) + drift * np.arange(hours) / hours
        expected = _expected(rates, rng)
        assert expected.excess <= 1.3, (seed, expected.excess)


def test_block_dispersion_waits_for_enough_blocks_with_their_surroundings() -> None:
    rng = np.random.default_rng(5)
    rates = _rates(rng, 0.85, WANDER_SD, 10 * 24)
    points = {h: (float(PER_HOUR), float(r)) for h, r in enumerate(rates.tolist())}
    variance = MEAN * (1 - MEAN)
    assert block_dispersion(points, variance) > 10.0
    # A day and a half holds fewer blocks with 12 hours held on each side than an estimate
    # needs.
    young = {h: v for h, v in points.items() if h < 35}
    assert block_dispersion(young, variance) == 1.0
    assert block_dispersion({}, variance) == 1.0


def test_verdicts_of_their_own_are_tempered_by_the_clustering_nobody_declared() -> None:
    plain = Expectation(0.2, 0.16, 1e-6, 100_000, kappa=2.0, rho=0.1, rho_bound=0.2)
    clustered = replace(plain, excess=4.0)
    a = bets(plain, 0.03, 1, BUDGET_S)
    b = bets(clustered, 0.03, 1, BUDGET_S)
    assert a is not None and b is not None
    for row_a, row_b in zip(a.solo_gains, b.solo_gains, strict=True):
        for gain_a, gain_b in zip(row_a, row_b, strict=True):
            assert gain_b == pytest.approx(gain_a / 4.0)
