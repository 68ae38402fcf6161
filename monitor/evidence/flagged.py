"""What flagged senders (`senders.py`) are expected to send: the part of a regression rule's
expectation that is not learned from the screened buckets (`history.History`).

The level and the season are learned from screened buckets, a flagged sender's verdicts
left out as they are out of kappa's; the rate judged holds every verdict, a flagged
sender's too. So the expectation is a mix at the flagged senders' share of the verdicts
sent over the current window (`Sent`): the screened level and season for the rest, and for
the flagged share, their own clean rate at this hour of the day as the history holds it
(`FlaggedRates`). An hour of the day they were never seen clean in (others were) is
expected at what they send in that hour now (`History._flagged_rate`), never at a rate of
other hours; with no clean verdict of theirs at all, at the screened level: a
forger that fails in every other hour, its failing hours held out as rises, would
otherwise be expected at its passing hours' rate and page each failing hour. A forger that
fails at 03:00 every day is expected to at 03:00 while it sends, and teaches nothing once
it stops; a flagged sender that passes for days leaves the level the honest senders' when
it goes quiet; a canary, flagged as its rate rises, is expected at its rate of that hour
from before the rise (a rise is held out of the clean verdicts), so its rise pages.

A window of verdicts spans hours, and the rate judged lags the hour's: at 02:00 the window
still holds 01:00's verdicts. What a window holds is compared with the flagged senders'
rates of the hours it was sent in (`History.window_offset`), so a page does not resolve
when a forger passes into its failing hour while the rate is still risen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from monitor.evidence.counts import Moments
from monitor.evidence.window import SliceCounts, SlidingWindow, restore_slices

DAY_HOURS = 24
# Slices of the current window the flagged share is counted in.
SHARE_SLICES = 12


@dataclass(frozen=True, slots=True)
class FlaggedRates:
    """Flagged senders' clean verdicts and defects per hour of the day (`hourly`), or all
    together (`by_hour` False: buckets that are not hours)."""

    hours: tuple[tuple[float, float], ...] = ()
    by_hour: bool = True

    @property
    def seen(self) -> bool:
        """Whether any clean verdict of flagged senders is held."""
        return any(n > 0 for n, _ in self.hours)

    def rate(self, index: int) -> tuple[float, float] | None:
        """(rate, its variance) expected of flagged senders in bucket `index` (None: no
        clean verdict of theirs held in that hour of the day, or at all)."""
        seen = [(n, d) for n, d in self.hours if n > 0]
        if not seen:
            return None
        if self.by_hour:
            n, d = self.hours[index % DAY_HOURS]
            if n <= 0:
                return None
        else:
            n, d = sum(s[0] for s in seen), sum(s[1] for s in seen)
        rate = d / n
        # As uncertain as a rate of all their clean verdicts: an hour's own few would
        # widen the expectation's error past any rise while a flagged sender is new.
        return rate, rate * (1.0 - rate) / sum(s[0] for s in seen)

    def plus(self, index: int, n: float, d: float) -> FlaggedRates:
        """These rates with `n` more clean verdicts of bucket `index`, `d` of them defects."""
        if n <= 0:
            return self
        return flagged_rates([(index, n, d)], self.by_hour, self)


def flagged_rates(
    parts: Iterable[tuple[int, float, float]], by_hour: bool, base: FlaggedRates | None = None
) -> FlaggedRates:
    """The rates of `parts`: (bucket index, flagged clean verdicts, their defects), added
    to `base`'s."""
    hours = [[0.0, 0.0] for _ in range(DAY_HOURS if by_hour else 1)]
    if base is not None and base.hours:
        hours = [[n, d] for n, d in base.hours]
    for index, n, d in parts:
        row = hours[index % DAY_HOURS if by_hour else 0]
        row[0] += n
        row[1] += d
    return FlaggedRates(tuple((n, d) for n, d in hours), by_hour)


class Sent:
    """The verdicts sent over the current window, and how many of them flagged senders
    sent (as flagged when they arrived); saved with the history, so a restart expects the
    flagged share it had."""

    def __init__(self, window_s: float) -> None:
        # Its samples are all verdicts sent, its defects those of flagged senders.
        self._window = SlidingWindow(window_s, SHARE_SLICES)

    def add(self, t: float, samples: int, flagged: bool) -> None:
        self._window.add_counts(t, Moments(samples, float(samples) if flagged else 0.0, 0.0))

    def share(self, t: float) -> float:
        """Flagged senders' share of the verdicts sent over the window ending at `t`."""
        n, flagged = self._window.totals(t)
        return min(1.0, flagged / n) if n > 0 else 0.0

    def sent_at(self, t: float) -> list[tuple[float, float]]:
        """(when, verdicts of flagged senders) of each slice of the window ending at `t`
        that holds any (when: the slice's start)."""
        self._window.totals(t)
        width = self._window.width
        return [
            (index * width, flagged) for index, _, flagged, _ in self._window.slices() if flagged
        ]

    def saved(self) -> list[SliceCounts]:
        return self._window.slices()

    def restore(self, raw: Any) -> None:
        """Takes back `saved()`; raises TypeError or ValueError on anything else."""
        if not isinstance(raw, list):
            raise TypeError("sent: a list of slices expected")
        self._window.restore(restore_slices(raw))


def mixed(
    mean: float, se2: float, share: float, flagged: tuple[float, float] | None
) -> tuple[float, float]:
    """The expected mean and its squared error: the screened `mean` (error `se2`) for
    `1 - share` of the verdicts, flagged senders' `(rate, variance)` for `share`."""
    if flagged is None or share <= 0:
        return mean, se2
    rate, variance = flagged
    rest = 1.0 - share
    return rest * mean + share * rate, rest * rest * se2 + share * share * variance
