"""A shadow's pairs by the hour of the day, and the slope a switch takes from them
(`monitor.evidence.shadow`): what it measures, when it takes none, how it fades, and its
form in the state file."""

from __future__ import annotations

import json
import random

import pytest

from monitor.evidence import Moments
from monitor.evidence.shadow import FADE_DAYS, HOURS, Shadow, Slope, shadow_slope


def offset(hour: int) -> float:
    """The old revision's seasonal offset at `hour`: -0.1 at night to +0.1 by day."""
    return 0.1 * (abs(hour - 14) <= 6) - 0.1 * (abs(hour - 14) > 6)


def shadowed(differ: float, seed: int = 1) -> Shadow:
    """A day of pairs, 100 an hour, the old revision reading 0.2 plus the hour's offset
    and the new `differ` times that more, read from one draw."""
    rng = random.Random(seed)
    shadow = Shadow("b")
    for hour in range(HOURS):
        old_rate = 0.2 + offset(hour)
        for _ in range(100):
            u = rng.random()
            old = float(u < old_rate)
            new = float(u < old_rate * (1 + differ))
            shadow.add(Moments(1, old, old), Moments(1, new, new), hour * 3600.0 + 1.0)
    return shadow


def test_a_revision_of_another_slope_is_measured_and_one_of_the_same_is_not() -> None:
    steeper = shadow_slope(shadowed(0.5), offset, 1.0, 1000.0)
    assert steeper is not None and steeper.slope == pytest.approx(0.5, abs=0.15)
    assert steeper.centre == pytest.approx(sum(map(offset, range(HOURS))) / HOURS)
    assert shadow_slope(shadowed(0.0), offset, 1.0, 1000.0) is None  # no difference at all
    assert shadow_slope(shadowed(0.5), lambda hour: None, 1.0, 1000.0) is None  # no season


def test_its_correction_fades_as_the_season_learns_the_new_revision() -> None:
    slope = Slope(0.5, 0.01, 0.0, 0.0)
    assert slope.correction(-0.1, 0.0) == pytest.approx((-0.05, 0.0001))
    half = FADE_DAYS * 86_400.0 / 2
    assert slope.correction(-0.1, half) == pytest.approx((-0.025, 0.000025))
    assert slope.faded(2 * half) and slope.correction(-0.1, 2 * half) == (0.0, 0.0)


def test_both_survive_the_state_file_and_an_older_shadow_has_no_hours() -> None:
    shadow = shadowed(0.5)
    again = Shadow.restored(json.loads(json.dumps(shadow.saved())))
    assert again == shadow
    older = Shadow.restored(shadow.saved()[:5])
    assert older is not None and older.paired == shadow.paired and not any(older.hours)
    slope = Slope(0.5, 0.01, -0.02, 123.0)
    assert Slope.restored(json.loads(json.dumps(slope.saved()))) == slope
    assert Slope.restored(None) is None
    with pytest.raises(ValueError):
        Slope.restored([0.5, -1.0, 0.0, 0.0])
