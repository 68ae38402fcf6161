"""What the evidence is counted in: sums of defect values (`Moments`), one conversation's
verdicts or one verdict (`Unit`), and verdicts judged at once against their conversation's
earlier ones (`Arrival`), and what waits for the sequential test (`Batch`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


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
        mean = self.mean
        return max(0.0, self.squares / self.samples - mean * mean) if self.samples else 0.0

    @classmethod
    def of_histogram(cls, histogram: Sequence[float]) -> Moments:
        """`histogram[k]` values at level `k / (len - 1)` (pass/fail: `[passes, fails]`)."""
        if len(histogram) == 2:
            fails = float(histogram[1])
            return cls(int(histogram[0] + fails), fails, fails)
        steps = max(1, len(histogram) - 1)
        return cls(
            int(sum(histogram)),
            sum(c * k / steps for k, c in enumerate(histogram) if c),
            sum(c * (k / steps) ** 2 for k, c in enumerate(histogram) if c),
        )

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


@dataclass(frozen=True, slots=True)
class Unit:
    """What a rule judges as one observation: the verdicts of one conversation (`samples`
    of them, whose defect values sum to `defects` and their squares to `squares`), or one
    verdict that came without a conversation (`conversation` False)."""

    samples: int
    defects: float
    squares: float
    conversation: bool
    # Set on a unit of no verdicts that says the ids were set aside and their verdicts
    # count as requests (`units.Units`): what was counted as conversations since this
    # time was none, and a history counts it as requests (`buckets.Buckets.as_requests`).
    none_since: float | None = None


@dataclass(frozen=True, slots=True)
class Arrival:
    """Verdicts of one conversation that arrived together (`samples` of them, their defect
    values summing to `defects`, their squares to `squares`), after `earlier` verdicts of
    the same conversation whose values summed to `earlier_defects`."""

    samples: int
    defects: float
    squares: float
    earlier: int
    earlier_defects: float
    # The correlation its verdicts are predicted with (None: the conversations' `rho`).
    rho: float | None = None
    # Whether its verdicts count in the windows: not for a request asked again past its
    # share of the traffic (`REPEAT_SHARE`).
    counted: bool = True


@dataclass(slots=True)
class Batch:
    """Verdicts waiting for the sequential test since its last batch: those without a
    conversation by defect level (`levels`, `steps + 1` of them), conversations' arrivals."""

    levels: list[float]
    arrivals: list[Arrival] = field(default_factory=list)

    def add(self, histogram: Sequence[float], arrival: Arrival | None) -> None:
        if arrival is None:
            for k, count in enumerate(histogram):
                self.levels[k] += count
        else:
            self.arrivals.append(arrival)

    def size(self) -> float:
        return sum(self.levels) + len(self.arrivals)

    def clear(self) -> None:
        self.levels[:] = [0.0] * len(self.levels)
        self.arrivals.clear()


def add_paired(paired: list[float], old: Moments, new: Moments) -> bool:
    """Adds two revisions' verdicts on the same record (as many of each) to `paired`, the
    sums of their differences (count, sum, squares); False when there were none."""
    n = min(old.samples, new.samples)
    if n <= 0:
        return False
    difference = new.mean - old.mean
    for i, x in enumerate((n, n * difference, n * difference * difference)):
        paired[i] += x
    return True
