"""What a regression rule keeps of a revision scoring in shadow beside its own
(`evaluators[].next`): the differences of their verdicts on the same records, saved in the
state file and carried into the changeover at the switch (`Baseline.take_shadow`); and by
the hour of the day they came in, from which the switch takes how the difference follows
the day (`Slope`: a revision that reads the rate with another slope differs by more at the
day's peak than at night)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from monitor.evidence.changeover import PROBE
from monitor.evidence.counts import Moments, add_paired
from monitor.evidence.history import Expectation, History
from monitor.evidence.window import saved_number

HOURS = 24
# A slope is taken when the shadow measured it this many standard errors from none: a
# service whose rate does not follow the day shows none, and its switch is as before.
SLOPE_Z = 3.0
# Days over which the season learns the new revision's own hours (`season.SEASON_DAYS`):
# the slope's part of the expectation fades as they replace the old revision's.
FADE_DAYS = 14


@dataclass(slots=True)
class Shadow:
    """What a shadowed revision measured against the entry's own on the same records
    before it replaced it: its `revision`, `paired` (verdicts, sum, squares) of the
    differences shadow - own, when its last pair came (`last`), `hours`: the same sums by the
    hour of the day (UTC) the pairs came in, 3 per hour, and when its first pair came
    (`first`: a monitor release that shadows itself switches a day after it)."""

    revision: str
    paired: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    last: float = 0.0
    hours: list[float] = field(default_factory=lambda: [0.0] * (3 * HOURS))
    first: float = 0.0

    def add(self, own: Moments, shadow: Moments, now: float) -> None:
        if add_paired(self.paired, own, shadow):
            if self.first <= 0.0:
                self.first = now
            self.last = now
            hour = int(now // 3600) % HOURS
            sums = self.hours[3 * hour : 3 * hour + 3]
            add_paired(sums, own, shadow)
            self.hours[3 * hour : 3 * hour + 3] = sums

    def saved(self) -> list[Any]:
        return [self.revision, *self.paired, self.last, self.hours, self.first]

    @staticmethod
    def restored(raw: Any) -> Shadow | None:
        """A shadow's saved revision and numbers (None: none was under way, or a state
        file from before shadows were kept; no hours: one from before they were; no first
        pair's time: its last pair's)."""
        if raw is None:
            return None
        revision, n, total, squares, last, *rest = raw
        if not isinstance(revision, str):
            raise TypeError("shadow: the revision is not text")
        paired = [saved_number(n, nonnegative=True), saved_number(total)]
        paired.append(saved_number(squares, nonnegative=True))
        shadow = Shadow(revision, paired, saved_number(last, nonnegative=True))
        if rest:
            hours, *first = rest
            if not isinstance(hours, list) or len(hours) != 3 * HOURS:
                raise TypeError(f"shadow: the hours are not {3 * HOURS} numbers")
            shadow.hours = [saved_number(x) for x in hours]
            if len(first) > 1:
                raise TypeError("shadow: more numbers than a shadow keeps")
            shadow.first = saved_number(first[0], nonnegative=True) if first else 0.0
        if shadow.first <= 0.0 or shadow.first > shadow.last:
            shadow.first = shadow.last
        return shadow


@dataclass(frozen=True, slots=True)
class Slope:
    """How the new revision's difference from the old follows the day: `slope` times the
    old revision's seasonal offset at an hour less `centre` (the offset where the shadow's
    pairs came in, on average), with its `variance`, from `since` (the switch)."""

    slope: float
    variance: float
    centre: float
    since: float

    def correction(self, offset: float, now: float) -> tuple[float, float]:
        """What the expectation at `now`, whose seasonal offset is `offset`, moves by and
        what its squared error gains; fading as the season learns the new revision's days."""
        weight = max(0.0, 1.0 - (now - self.since) / (FADE_DAYS * 86_400.0))
        x = weight * (offset - self.centre)
        return self.slope * x, self.variance * x * x

    def faded(self, now: float) -> bool:
        return now - self.since >= FADE_DAYS * 86_400.0

    def saved(self) -> list[float]:
        return [self.slope, self.variance, self.centre, self.since]

    @staticmethod
    def restored(raw: Any) -> Slope | None:
        if raw is None:
            return None
        slope, variance, centre, since = (saved_number(x) for x in raw)
        if variance < 0 or since < 0:
            raise ValueError("slope: a negative variance or time")
        return Slope(slope, variance, centre, since)


def shadow_slope(
    shadow: Shadow, offset_at: Callable[[int], float | None], design: float, since: float
) -> Slope | None:
    """The weighted regression of the shadow's mean difference at each hour of the day on
    the old revision's seasonal offset there (`offset_at(hour)`; None: no season), its
    variance the differences' variance per pair times `design` over the pairs' spread of
    offsets; None unless it stands `SLOPE_Z` standard errors from none."""
    rows = []
    for hour in range(HOURS):
        n, total, _ = shadow.hours[3 * hour : 3 * hour + 3]
        x = offset_at(hour) if n > 0 else None
        if x is not None:
            rows.append((n, total / n, x))
    pairs = sum(n for n, _, _ in rows)
    if len(rows) < 3 or pairs <= 0:
        return None
    centre = sum(n * x for n, _, x in rows) / pairs
    mean = sum(n * d for n, d, _ in rows) / pairs
    spread = sum(n * (x - centre) ** 2 for n, _, x in rows)
    if spread <= 0:
        return None
    slope = sum(n * (x - centre) * (d - mean) for n, d, x in rows) / spread
    n, total, squares = shadow.paired
    per_pair = max(squares / n - (total / n) ** 2, 1.0 / n) if n > 0 else 1.0
    variance = per_pair * design / spread
    if slope * slope < SLOPE_Z**2 * variance or not math.isfinite(slope):
        return None
    return Slope(slope, variance, centre, since)


def switch_slope(shadow: Shadow, history: History, design: float, since: float) -> Slope | None:
    """The slope a switch at `since` takes from `shadow`, against the seasonal offsets the
    old revision's `history` holds at each hour of the day before it."""
    day = math.floor(since / 86_400.0) * 86_400.0

    def offset_at(hour: int) -> float | None:
        t = day + hour * 3600.0 + 1800.0
        expected = history.pinned(t - 86_400.0 if t >= since else t, PROBE)
        return None if expected is None else expected.mean - PROBE.mean

    return shadow_slope(shadow, offset_at, design, since)


def sloped(
    expected: Expectation | None, slope: Slope | None, history: History, now: float
) -> Expectation | None:
    """`expected` at `now` moved by what `slope` says the new revision reads there beyond
    the mean difference, with its error."""
    if expected is None or slope is None:
        return expected
    probe = history.pinned(now, PROBE)
    if probe is None:
        return expected
    move, variance = slope.correction(probe.mean - PROBE.mean, now)
    mean = min(1.0, max(0.0, expected.mean + move))
    return replace(expected, mean=mean, se2=expected.se2 + variance)
