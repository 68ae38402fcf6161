"""A wander about the season that lasts hours (docs/alerts.md, "Clustering nobody
declared"): a topic mix whose drift holds for hours moves the service's rate by about the
same amount in consecutive hours, so hourly second differences see little of it while a
test that sums hours of verdicts sees all of it. The history measures it over blocks of
hours about its season and days, and the expectation's error holds its variance.

Histories are filled bucket by bucket with seeded verdicts (conversations of ten verdicts,
independent within each) and an injected time; the sequential test is driven directly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.evidence.counts import NOTHING, Arrival, Moments, Unit
from monitor.evidence.history import History
from monitor.evidence.sequential import SequentialTest, bets
from monitor.evidence.terms import Terms

# Statistical behaviour on simulated time: the scorecard tier (tests/conftest.py).
pytestmark = pytest.mark.scorecard


DAYS = 5
PER_HOUR = 1_800  # conversations of ten verdicts an hour
WANDER_SD = 0.015
BUDGET_S = 90 * 86_400.0


def _rate(hour: int, drift: float) -> float:
    """A daily cycle about 0.3, plus the wander."""
    return 0.3 + 0.03 * math.cos(2 * math.pi * (hour % 24 - 14) / 24) + drift


def _wander(lasting_h: float, seed: int) -> np.ndarray:
    """An hourly wander of sd `WANDER_SD`: an AR(1) of correlation time `lasting_h` hours
    (0: independent from hour to hour)."""
    rng = np.random.default_rng(seed)
    keep = math.exp(-1 / lasting_h) if lasting_h else 0.0
    drift = np.zeros(DAYS * 24)
    for hour in range(drift.size):
        before = drift[hour - 1] if hour else rng.normal(0.0, WANDER_SD)
        drift[hour] = keep * before + math.sqrt(1 - keep * keep) * rng.normal(0.0, WANDER_SD)
    return drift


def _history(lasting_h: float, seed: int = 3, hours: int = DAYS * 24) -> History:
    """The first `hours` of `DAYS` days with a daily season and the wander, in a history
    that learns the day's profile."""
    rng = np.random.default_rng(seed + 100)
    history = History(86_400.0, "day", 1, BUDGET_S)
    for hour, drift in enumerate(_wander(lasting_h, seed)[:hours].tolist()):
        fails = rng.binomial(10, _rate(hour, drift), PER_HOUR)
        t = hour * 3_600.0 + 1.0
        total = float(fails.sum())
        history.add(t, Moments(10 * PER_HOUR, total, total), NOTHING, rise=False)
        for d in fails.tolist():
            history.add_unit(t, Unit(10, float(d), float(d), conversation=True))
    return history


def test_a_wander_that_lasts_hours_widens_the_expectation_by_its_variance() -> None:
    """Four hours of correlation: the hourly excess sees a fraction of it, the blocks of
    hours see it whole. Independent from hour to hour, the excess holds it and the blocks
    add about nothing."""
    now = DAYS * 24 * 3_600.0
    lasting = _history(4.0)
    expected = lasting.expectation(now, 500)
    assert expected is not None
    assert 0.15 * WANDER_SD**2 < lasting._profile().wander < WANDER_SD**2
    assert expected.se2 > 0.25 * WANDER_SD**2
    hourly = _history(0.0)
    assert hourly._profile().wander < 0.05 * WANDER_SD**2
    assert hourly._profile().excess > 5


def _hours_to_page(
    history: History, rise: float, hours: float, seed: int = 11, now: float = DAYS * 86_400.0
) -> float | None:
    """Hours until the sequential test crosses on conversations whose rate is the
    expectation at `now` plus `rise`, judged every minute (None: not within `hours`)."""
    expected = history.expectation(now, 500)
    assert expected is not None
    judged = bets(expected, Terms(60.0, BUDGET_S, min_increase=0.03))
    assert judged is not None
    rng = np.random.default_rng(seed)
    test = SequentialTest()
    per_minute = PER_HOUR // 60
    for minute in range(int(hours * 60)):
        fails = rng.binomial(10, expected.mean + rise, per_minute).tolist()
        test.update(judged, [0.0, 0.0], [Arrival(10, d, d, 0, 0.0) for d in fails], 60.0 * minute)
        if test.crossed(BUDGET_S):
            return (minute + 1) / 60
    return None


def test_an_excursion_of_the_lasting_wander_is_no_page_and_a_step_is() -> None:
    """Three sd of the wander held for four hours, what a wander of that correlation does
    about once in ninety days: no page (with the hourly excess alone, a page after about
    two and a half hours). A x1.5 step (+0.15) pages within a quarter of an hour."""
    history = _history(4.0)
    assert _hours_to_page(history, 3 * WANDER_SD, 4.0) is None
    paged = _hours_to_page(history, 0.15, 0.25)
    assert paged is not None


YOUNG_HOURS = 32  # one complete day, and the morning of the second


def test_a_lasting_wander_with_one_day_of_history_is_no_page_and_a_step_is() -> None:
    """With one complete day the season is that day's hours, its wander included: an hour
    of the second day is off its expectation by the two days' wanders, `sqrt(2)` sd of
    it. Nothing yet tells the wander from the season, so the expectation's error holds
    what hours show without one (second differences over up to eight hours): an
    excursion of two and a half of those sd held for four hours is no page (with the
    hourly excess alone, a page within two hours). A x1.5 step (+0.15) still pages within
    half an hour."""
    now = YOUNG_HOURS * 3_600.0
    history = _history(4.0, hours=YOUNG_HOURS)
    assert history.complete_days() == 1
    expected = history.expectation(now, 500)
    assert expected is not None
    assert expected.se2 > WANDER_SD**2
    assert _hours_to_page(history, 2.5 * math.sqrt(2) * WANDER_SD, 4.0, now=now) is None
    paged = _hours_to_page(history, 0.15, 0.5, now=now)
    assert paged is not None


def test_a_young_history_s_season_is_as_uncertain_as_kappa_s_estimate_says() -> None:
    """Five days of hours of independent verdicts without a conversation (720 an hour,
    0.10 with a daily cycle): kappa carries the bettors' allowance for its own error, well
    above its estimate of about 1 after so few hours, and the season's hourly offsets, the
    mean of what four complete days showed at that hour, are as uncertain as the verdicts
    behind them at kappa's estimate, not at that allowance."""
    rng = np.random.default_rng(4)
    history = History(86_400.0, "day", 1, BUDGET_S)
    total = defects = 0.0
    for hour in range(DAYS * 24):
        fails = float(rng.binomial(720, 0.10 + 0.02 * math.sin(2 * math.pi * (hour % 24) / 24)))
        verdicts = Moments(720, fails, fails)
        history.add(hour * 3_600.0 + 1.0, verdicts, verdicts, rise=False)
        total, defects = total + 720, defects + fails
    profile = history._profile()
    assert profile.kappa > 1.2 > 1.1 > profile.kappa_estimate
    pooled = defects / total * (1 - defects / total)
    behind = 720 * len(profile.season.days)
    for variance in profile.season.day_var:
        assert variance == pytest.approx(pooled * profile.kappa_estimate / behind, rel=0.01)
