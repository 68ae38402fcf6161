"""What flagged senders (`senders.py`) are expected to send: the part of a regression rule's
expectation that is not learned from the screened buckets (`history.History`).

The level and the season are learned from screened buckets, a flagged sender's verdicts
left out as they are out of kappa's; the rate judged holds every verdict, a flagged
sender's too. So the expectation is a mix at the flagged senders' share of the verdicts
sent over the current window (`Sent`): the screened level and season for the rest, and for
the flagged share, their own clean rate at this hour of the day as the history holds it
(`FlaggedRates`; an hour they were never seen clean in, the highest of their hourly rates,
as a young history's hours are). A forger that fails at 03:00 every day is expected to at
03:00 while it sends, and teaches nothing once it stops; a flagged sender that passes for
days leaves the level the honest senders' when it goes quiet; a canary, flagged as its
rate rises, is expected at its rate from before the rise (a rise is held out of the clean
verdicts), so its rise pages.
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

    def rate(self, index: int) -> tuple[float, float] | None:
        """(rate, its variance) expected of flagged senders in bucket `index` (None: no
        clean verdict of theirs held)."""
        seen = [(n, d) for n, d in self.hours if n > 0]
        if not seen:
            return None
        if self.by_hour:
            n, d = self.hours[index % DAY_HOURS]
            if n <= 0:
                n, d = max(seen, key=lambda s: s[1] / s[0])
        else:
            n, d = sum(s[0] for s in seen), sum(s[1] for s in seen)
        rate = d / n
        # As uncertain as a rate of all their clean verdicts: an hour's own few would
        # widen the expectation's error past any rise while a flagged sender is new.
        return rate, rate * (1.0 - rate) / sum(s[0] for s in seen)


def flagged_rates(parts: Iterable[tuple[int, float, float]], by_hour: bool) -> FlaggedRates:
    """The rates of `parts`: (bucket index, flagged clean verdicts, their defects)."""
    hours = [[0.0, 0.0] for _ in range(DAY_HOURS if by_hour else 1)]
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
