"""The season a regression rule's history learns from its hourly rates (docs/alerts.md,
"Regression rules"; `learn`): each UTC hour's offset from its own day's rate, weighted by
verdicts, over the last `SEASON_DAYS` complete days, centred; with `season: week` each day's
mean against the seven days around it, per day of the week. Each offset comes with its
variance, which the expectation's error includes. Days count from the history's first hour.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Season = Literal["none", "day", "week"]

DAY_HOURS = 24
SEASON_DAYS = 14
# A day is complete once it is over and held verdicts in this many of its hours.
COMPLETE_DAY_HOURS = 20
_NO_WEEK = (0.0,) * 7
# The variance of an hour never seen: any rate in [0, 1].
_UNKNOWN_VARIANCE = 0.25


@dataclass(frozen=True, slots=True)
class SeasonProfile:
    season: Season
    days: tuple[int, ...] = ()  # the complete days it was learned from
    day: tuple[float, ...] = (0.0,) * DAY_HOURS
    day_var: tuple[float, ...] = (0.0,) * DAY_HOURS
    week: tuple[float, ...] = _NO_WEEK
    week_var: tuple[float, ...] = _NO_WEEK

    def offset(self, index: int, origin: int) -> tuple[float, float]:
        """(offset, its variance) of hourly bucket `index` (0 without a season)."""
        if self.season == "none" or not self.days:
            return 0.0, 0.0
        hour = index % DAY_HOURS
        value, var = self.day[hour], self.day_var[hour]
        if self.season == "week":
            dow = ((index - origin) // DAY_HOURS) % 7
            value += self.week[dow]
            var += self.week_var[dow]
        return value, var


def learn(
    season: Season,
    hours: Iterable[tuple[int, float, float]],
    origin: int,
    newest: int,
    variance: float,
) -> SeasonProfile:
    """The profile of `hours`: `(bucket index, verdicts, rate)` of each hourly bucket that
    held verdicts, counted from bucket `origin`, the newest being `newest`; `variance`: of
    one verdict, times how much more the verdicts vary than independent ones (their
    conversations' design effect, their dispersion)."""
    if season == "none" or origin < 0:
        return SeasonProfile(season)
    by_day: dict[int, dict[int, tuple[float, float]]] = {}
    for index, n, rate in hours:
        by_day.setdefault((index - origin) // DAY_HOURS, {})[index % DAY_HOURS] = (n, rate)
    newest_day = (newest - origin) // DAY_HOURS
    complete = sorted(
        day for day, seen in by_day.items() if day < newest_day and len(seen) >= COMPLETE_DAY_HOURS
    )
    if not complete:
        return SeasonProfile(season)
    # A day's mean is its rate (hours weighted by their verdicts: a quiet hour is noisy).
    means = {
        day: sum(n * x for n, x in by_day[day].values()) / sum(n for n, _ in by_day[day].values())
        for day in complete
    }
    num = [0.0] * DAY_HOURS
    den = [0.0] * DAY_HOURS
    for day in complete[-SEASON_DAYS:]:
        for hour, (n, x) in by_day[day].items():
            num[hour] += n * (x - means[day])
            den[hour] += n
    raw = [num[h] / den[h] if den[h] > 0 else 0.0 for h in range(DAY_HOURS)]
    centre = sum(raw) / sum(d > 0 for d in den)
    offsets = tuple(raw[h] - centre if den[h] > 0 else 0.0 for h in range(DAY_HOURS))
    variances = tuple(
        variance / den[h] if den[h] > 0 else _UNKNOWN_VARIANCE for h in range(DAY_HOURS)
    )
    week, week_var = _week(complete, means) if season == "week" else (_NO_WEEK, _NO_WEEK)
    return SeasonProfile(season, tuple(complete), offsets, variances, week, week_var)


def _week(
    days: Sequence[int], means: dict[int, float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Day-of-week offsets and their variances (zero until every weekday was seen twice)."""
    have = set(days)
    deviations: dict[int, list[float]] = {}
    for day in days:
        around = [means[k] for k in range(day - 3, day + 4) if k in have]
        if len(around) == 7:
            deviations.setdefault(day % 7, []).append(means[day] - sum(around) / 7)
    if len(deviations) < 7 or any(len(v) < 2 for v in deviations.values()):
        return _NO_WEEK, _NO_WEEK
    raw = [sum(deviations[w]) / len(deviations[w]) for w in range(7)]
    centre = sum(raw) / 7
    spread = tuple(
        sum((x - raw[w]) ** 2 for x in deviations[w])
        / (len(deviations[w]) - 1)
        / len(deviations[w])
        for w in range(7)
    )
    return tuple(x - centre for x in raw), spread
