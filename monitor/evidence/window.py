"""Time-based sliding windows of sums with bounded memory: a window is cut into `buckets`
equal slices of sums (a `SlidingWindow`'s: the verdicts, their defect values, 0 or 1 or a
score in [0, 1], and their squares, a score's variance), so memory does not grow with
traffic. A slice leaves once it is entirely older than `window_s`: a window spans `window_s`
to one slice more. Also the units' sums (`UnitSums`), the design effect they give, and
what is read back from the state file.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.evidence.counts import Moments
from monitor.evidence.dispersion import pooled_rho

DEFAULT_BUCKETS = 60
SliceCounts = tuple[int, int, float, float]  # (index, samples, defects, squares)


@dataclass(slots=True)
class TimeSlice:
    """Counts of one slice; it covers `[index * width, (index + 1) * width)` seconds."""

    index: int
    samples: int
    defects: float
    squares: float


class _Slices:
    """`size` sums per slice, `[index, *sums]`, and their totals over the window."""

    def __init__(self, window_s: float, buckets: int, size: int) -> None:
        self.window_s = window_s
        self.width = window_s / buckets
        self._size = size
        self._slices: deque[list[float]] = deque()
        self._sums = [0.0] * size

    def _add(self, now: float, values: Sequence[float]) -> None:
        index = math.floor(now / self.width)
        if not self._slices or self._slices[-1][0] < index:
            self._slices.append([index, *[0.0] * self._size])
        # A late sample (clock step back) lands in the newest slice rather than reordering.
        last = self._slices[-1]
        for k, value in enumerate(values):
            last[k + 1] += value
            self._sums[k] += value

    def _expire(self, now: float) -> list[list[float]]:
        oldest = math.floor((now - self.window_s) / self.width)
        gone = []
        while self._slices and self._slices[0][0] < oldest:
            old = self._slices.popleft()
            for k in range(self._size):
                self._sums[k] -= old[k + 1]
            gone.append(old)
        if not self._slices:  # no rounding left behind by float sums
            self._sums = [0.0] * self._size
        return gone

    def _set(self, slices: deque[list[float]]) -> None:
        self._slices = slices
        self._sums = [sum(s[k + 1] for s in slices) for k in range(self._size)]


class SlidingWindow(_Slices):
    def __init__(self, window_s: float, buckets: int = DEFAULT_BUCKETS) -> None:
        if window_s <= 0 or buckets <= 0:
            raise ValueError("window_s and buckets must be positive")
        super().__init__(window_s, buckets, 3)

    def add(self, now: float, defect: float) -> None:
        """Adds one verdict whose defect value is `defect` (a bool or a number in [0, 1])."""
        self._add(now, (1, defect, defect * defect))

    def add_counts(self, now: float, counts: Moments) -> None:
        self._add(now, (counts.samples, counts.defects, counts.squares))

    def expire(self, now: float) -> list[TimeSlice]:
        """Removes and returns the slices that left the window ending at `now`."""
        return [TimeSlice(int(i), round(n), d, q) for i, n, d, q in self._expire(now)]

    def totals(self, now: float) -> tuple[int, float]:
        """(samples, defects) within the window ending at `now`."""
        moments = self.moments(now)
        return moments.samples, moments.defects

    def moments(self, now: float) -> Moments:
        """What the window ending at `now` holds."""
        self._expire(now)
        n, d, q = self._sums
        return Moments(round(n), max(0.0, d), max(0.0, q))

    def slices(self) -> list[SliceCounts]:
        """(index, samples, defects, squares) of every slice held, oldest first (for the
        state file)."""
        return [(int(i), round(n), d, q) for i, n, d, q in self._slices]

    def restore(self, slices: list[SliceCounts]) -> None:
        """Replaces the contents with `slices` as `slices()` gave them (indexes ascending)."""
        self._set(deque([i, float(n), d, q] for i, n, d, q in slices))

    def load(self, raw: Any) -> None:
        """Replaces the contents with slices read back from the state file
        (`restore_slices`); raises TypeError or ValueError."""
        self.restore(restore_slices(raw))


def saved_number(raw: Any, *, nonnegative: bool = False) -> float:
    """A number read back from the state file: finite (not a flag, not text, not NaN or an
    infinity, nor an integer past float's range), and not negative if so asked. Raises
    TypeError or ValueError (OverflowError, an ArithmeticError, for a huge integer)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise TypeError(f"{raw!r} is not a number")
    value = float(raw)
    if not math.isfinite(value) or (nonnegative and value < 0):
        raise ValueError(f"{raw!r} is not a finite{' non-negative' if nonnegative else ''} number")
    return value


def restore_slices(raw: Any) -> list[SliceCounts]:
    """Saved slices, `[index, samples, defects, squares]` each, checked: indexes ascending,
    `0 <= squares <= defects <= samples`, every number finite. Raises TypeError or
    ValueError."""
    out = []
    for entry in raw:
        i, n, d, q = entry
        values = (float(d), float(q))
        if isinstance(i, bool) or not isinstance(i, int) or not all(map(math.isfinite, values)):
            raise TypeError("a slice is [index, samples, defects, squares]")
        out.append((int(i), int(n), values[0], values[1]))
    if any(not 0 <= q <= d <= n for _, n, d, q in out) or out != sorted(out):
        raise ValueError("slices out of order or with more defects than samples")
    return out


class UnitSums(_Slices):
    """Sliding sums over the conversations that closed in a window: their verdicts, the
    sum of their sizes squared, of their defect sums squared, of size times defects and of
    their sizes cubed — what the correlation of verdicts within a conversation is measured from
    (`design_effect`). Sliced as `SlidingWindow` is."""

    def __init__(self, window_s: float, buckets: int = DEFAULT_BUCKETS) -> None:
        super().__init__(window_s, buckets, 5)

    @property
    def totals(self) -> list[float]:
        return self._sums

    def add(self, now: float, samples: int, defects: float) -> None:
        self._add(now, (samples, samples**2, defects * defects, samples * defects, samples**3))

    def expire(self, now: float) -> None:
        self._expire(now)

    def slices(self) -> list[list[float]]:
        return [list(s) for s in self._slices]

    def restore(self, raw: Any) -> None:
        slices: deque[list[float]] = deque()
        for entry in raw:
            if not isinstance(entry, list) or len(entry) not in (5, 6):
                raise TypeError("a conversation slice is [index, n, n2, d2, nd, n3]")
            values = [float(v) for v in entry]
            if not all(map(math.isfinite, values)) or min(values[1:]) < 0:
                raise ValueError("a conversation slice holds a negative or infinite sum")
            if len(values) == 5:
                # Saved before the sizes cubed were kept: taken as if the slice's
                # conversations were all of one size (the least the sum can be).
                values.append(values[2] ** 2 / values[1] if values[1] > 0 else 0.0)
            slices.append([int(entry[0]), *values[1:]])
        self._set(slices)


def design_effect(moments: Moments, units: Sequence[float]) -> float:
    """How much more the mean of `moments` varies than that of as many independent
    verdicts, for the conversations whose `UnitSums.totals` are `units` (their correlation
    measured from their sums; verdicts without a conversation taken as independent)."""
    conv_n, m2, dd, nd, m3 = units
    if conv_n <= 0 or moments.samples <= 0:
        return 1.0
    p = moments.mean
    v = moments.variance if moments.variance > 0 else p * (1 - p)
    rho = pooled_rho((conv_n, m2, m3, dd, nd, moments.samples, p, v))
    share = min(1.0, conv_n / moments.samples)
    return 1.0 + rho * (m2 / conv_n - 1) * share
