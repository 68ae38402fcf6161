"""A time-based sliding window of (samples, defects) counts with bounded memory.

The window is cut into `buckets` equal slices; each slice keeps two integers, so memory
does not grow with traffic. A slice leaves the window once it is entirely older than
`window_s`, so the effective window is between `window_s` and `window_s` plus one slice.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

DEFAULT_BUCKETS = 60


@dataclass(slots=True)
class Slice:
    """Counts of one slice; it covers `[index * width, (index + 1) * width)` seconds."""

    index: int
    samples: int = 0
    defects: int = 0


class SlidingWindow:
    def __init__(self, window_s: float, buckets: int = DEFAULT_BUCKETS) -> None:
        if window_s <= 0 or buckets <= 0:
            raise ValueError("window_s and buckets must be positive")
        self.window_s = window_s
        self.width = window_s / buckets
        self._slices: deque[Slice] = deque()
        self._samples = 0
        self._defects = 0

    def add(self, now: float, defect: bool) -> None:
        self.add_counts(now, 1, 1 if defect else 0)

    def add_counts(self, now: float, samples: int, defects: int) -> None:
        """Adds `samples` verdicts, `defects` of them defects, at `now`."""
        index = math.floor(now / self.width)
        if not self._slices or self._slices[-1].index < index:
            self._slices.append(Slice(index))
        # A late sample (clock step back) lands in the newest slice rather than reordering.
        last = self._slices[-1]
        last.samples += samples
        last.defects += defects
        self._samples += samples
        self._defects += defects

    def expire(self, now: float) -> list[Slice]:
        """Removes and returns the slices that left the window ending at `now`."""
        oldest = math.floor((now - self.window_s) / self.width)
        gone = []
        while self._slices and self._slices[0].index < oldest:
            old = self._slices.popleft()
            self._samples -= old.samples
            self._defects -= old.defects
            gone.append(old)
        return gone

    def totals(self, now: float) -> tuple[int, int]:
        """(samples, defects) within the window ending at `now`."""
        self.expire(now)
        return self._samples, self._defects

    def slices(self) -> list[tuple[int, int, int]]:
        """(index, samples, defects) of every slice held, oldest first (for the state file)."""
        return [(s.index, s.samples, s.defects) for s in self._slices]

    def restore(self, slices: list[tuple[int, int, int]]) -> None:
        """Replaces the contents with `slices` as `slices()` gave them (indexes ascending)."""
        self._slices = deque(Slice(i, n, d) for i, n, d in slices)
        self._samples = sum(s.samples for s in self._slices)
        self._defects = sum(s.defects for s in self._slices)
