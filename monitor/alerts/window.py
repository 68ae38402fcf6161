"""A time-based sliding window of verdict counts with bounded memory.

The window is cut into `buckets` equal slices; each slice keeps three numbers — the
verdicts, the sum of their defect values and the sum of their squares — so memory does not
grow with traffic. A defect value is 1 or 0 for a pass/fail verdict, or a number in [0, 1]
for a rule that measures scores (`measure: scores`); the squares give a score's variance
(for verdicts they equal the sum). A slice leaves the window once it is entirely older than
`window_s`, so the effective window is between `window_s` and `window_s` plus one slice.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

DEFAULT_BUCKETS = 60


@dataclass(frozen=True, slots=True)
class Moments:
    """`samples` verdicts whose defect values sum to `defects`, their squares to `squares`."""

    samples: int = 0
    defects: float = 0.0
    squares: float = 0.0

    @property
    def mean(self) -> float:
        return self.defects / self.samples if self.samples else 0.0

    @property
    def variance(self) -> float:
        if not self.samples:
            return 0.0
        mean = self.defects / self.samples
        return max(0.0, self.squares / self.samples - mean * mean)

    def plus(self, other: Moments) -> Moments:
        return Moments(
            self.samples + other.samples,
            self.defects + other.defects,
            self.squares + other.squares,
        )

    def minus(self, other: Moments) -> Moments:
        return Moments(
            self.samples - other.samples,
            max(0.0, self.defects - other.defects),
            max(0.0, self.squares - other.squares),
        )


NOTHING = Moments()


@dataclass(slots=True)
class Slice:
    """Counts of one slice; it covers `[index * width, (index + 1) * width)` seconds."""

    index: int
    samples: int = 0
    defects: float = 0.0
    squares: float = 0.0


class SlidingWindow:
    def __init__(self, window_s: float, buckets: int = DEFAULT_BUCKETS) -> None:
        if window_s <= 0 or buckets <= 0:
            raise ValueError("window_s and buckets must be positive")
        self.window_s = window_s
        self.width = window_s / buckets
        self._slices: deque[Slice] = deque()
        self._samples = 0
        self._defects = 0.0
        self._squares = 0.0

    def add(self, now: float, defect: float) -> None:
        """Adds one verdict whose defect value is `defect` (a bool or a number in [0, 1])."""
        self._add(now, 1, defect, defect * defect)

    def add_counts(self, now: float, counts: Moments) -> None:
        """Adds `counts` at `now`."""
        self._add(now, counts.samples, counts.defects, counts.squares)

    def _add(self, now: float, samples: int, defects: float, squares: float) -> None:
        index = math.floor(now / self.width)
        if not self._slices or self._slices[-1].index < index:
            self._slices.append(Slice(index))
        # A late sample (clock step back) lands in the newest slice rather than reordering.
        last = self._slices[-1]
        last.samples += samples
        last.defects += defects
        last.squares += squares
        self._samples += samples
        self._defects += defects
        self._squares += squares

    def expire(self, now: float) -> list[Slice]:
        """Removes and returns the slices that left the window ending at `now`."""
        oldest = math.floor((now - self.window_s) / self.width)
        gone = []
        while self._slices and self._slices[0].index < oldest:
            old = self._slices.popleft()
            self._samples -= old.samples
            self._defects -= old.defects
            self._squares -= old.squares
            gone.append(old)
        if not self._slices:  # no rounding left behind by float sums
            self._defects = self._squares = 0.0
        return gone

    def totals(self, now: float) -> tuple[int, float]:
        """(samples, defects) within the window ending at `now`."""
        moments = self.moments(now)
        return moments.samples, moments.defects

    def moments(self, now: float) -> Moments:
        """What the window ending at `now` holds."""
        self.expire(now)
        return Moments(self._samples, max(0.0, self._defects), max(0.0, self._squares))

    def slices(self) -> list[tuple[int, int, float, float]]:
        """(index, samples, defects, squares) of every slice held, oldest first (for the
        state file)."""
        return [(s.index, s.samples, s.defects, s.squares) for s in self._slices]

    def restore(self, slices: list[tuple[int, int, float, float]]) -> None:
        """Replaces the contents with `slices` as `slices()` gave them (indexes ascending)."""
        self._slices = deque(Slice(i, n, d, q) for i, n, d, q in slices)
        self._samples = sum(s.samples for s in self._slices)
        self._defects = sum(s.defects for s in self._slices)
        self._squares = sum(s.squares for s in self._slices)
