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
class _Slice:
    index: int
    samples: int = 0
    defects: int = 0


class SlidingWindow:
    def __init__(self, window_s: float, buckets: int = DEFAULT_BUCKETS) -> None:
        if window_s <= 0 or buckets <= 0:
            raise ValueError("window_s and buckets must be positive")
        self.window_s = window_s
        self._width = window_s / buckets
        self._slices: deque[_Slice] = deque()
        self._samples = 0
        self._defects = 0

    def add(self, now: float, defect: bool) -> None:
        index = math.floor(now / self._width)
        if not self._slices or self._slices[-1].index < index:
            self._slices.append(_Slice(index))
        # A late sample (clock step back) lands in the newest slice rather than reordering.
        last = self._slices[-1]
        last.samples += 1
        self._samples += 1
        if defect:
            last.defects += 1
            self._defects += 1

    def totals(self, now: float) -> tuple[int, int]:
        """(samples, defects) within the window ending at `now`."""
        oldest = math.floor((now - self.window_s) / self._width)
        while self._slices and self._slices[0].index < oldest:
            gone = self._slices.popleft()
            self._samples -= gone.samples
            self._defects -= gone.defects
        return self._samples, self._defects
