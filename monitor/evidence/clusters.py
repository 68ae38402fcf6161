"""The design effect of a mean over values that came in clusters (conversations), measured
from the clusters themselves: the sandwich (cluster-robust) variance of the mean against
what as many independent values would give.

For clusters `c` of `n_c` values summing to `S_c` (`N` values, mean `m`, per-value variance
`v`), `sum (S_c - n_c m)^2 C / (C - 1)` estimates `N^2` times the mean's variance, whatever
the correlation within a cluster, so long as clusters are independent; divided by `N v` it
is the design effect. Its own error comes from the spread of the clusters' terms
`e_c = (S_c - n_c m)^2` (a few large clusters make it large), and the estimate is raised
for it as kappa is (`dispersion.py`): by `s^2 ln(J T) / 2` for a relative variance `s^2`.
Fewer than `MIN_CLUSTERS` clusters tell nothing (None: the caller keeps its own).

Every sum is kept as the values come, a cluster's terms replaced as it grows, so only the
open clusters' `(n_c, S_c)` are held: the `MAX_OPEN` seen most recently; one that returns
after it was let go counts as a new cluster (its correlation with its earlier part is then
missed).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from monitor.evidence.window import saved_number

MIN_CLUSTERS = 30
# Open clusters held per sums (a few hundred bytes each): conversations last minutes, so
# this covers a quarter hour of pairs at 1 conversation a second.
MAX_OPEN = 1_024
# The sums of `S^a n^b` kept, as (a, b): what `sum e_c` and `sum e_c^2` expand into.
_POWERS = ((2, 0), (1, 1), (0, 2), (4, 0), (3, 1), (2, 2), (1, 3), (0, 4))
# How many numbers `ClusteredSums.saved` gives.
SAVED_SIZE = 4 + len(_POWERS)


@dataclass(slots=True)
class ClusteredSums:
    """Values by the cluster they came in: their count, sum and sum of squares
    (`moments`), the count of clusters, and the sums of `S_c^a n_c^b` (`powers`) the
    design effect is measured from. Equal when their sums are (the open clusters are
    working memory)."""

    clusters: float = 0.0
    moments: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    powers: list[float] = field(default_factory=lambda: [0.0] * len(_POWERS))
    _open: OrderedDict[int, tuple[float, float]] = field(
        default_factory=OrderedDict, compare=False, repr=False
    )

    def add(self, cluster: int, count: float, total: float, squares: float) -> None:
        """`count` values of cluster `cluster` summing to `total`, their squares to
        `squares`."""
        if count <= 0:
            return
        before = self._open.pop(cluster, None)
        if before is None:
            self.clusters += 1
            before = (0.0, 0.0)
            if len(self._open) >= MAX_OPEN:
                self._open.popitem(last=False)
        after = (before[0] + count, before[1] + total)
        self._open[cluster] = after
        for i, (a, b) in enumerate(_POWERS):
            self.powers[i] += after[1] ** a * after[0] ** b - before[1] ** a * before[0] ** b
        for i, x in enumerate((count, total, squares)):
            self.moments[i] += x

    def design_effect(self, log_budget: float) -> float | None:
        """The mean's design effect, at least 1, raised for its own error (`log_budget`:
        ln(J T) of the test it feeds); None before `MIN_CLUSTERS` clusters or while the
        values do not vary."""
        n, total, squares = self.moments
        c = self.clusters
        if c < MIN_CLUSTERS or n <= 0:
            return None
        m = total / n
        v = squares / n - m * m
        s2, sn, n2, s4, s3n, s2n2, sn3, n4 = self.powers
        spread = s2 - 2 * m * sn + m * m * n2
        if v <= 1e-12 or spread <= 0:
            return None
        fourth = s4 - 4 * m * s3n + 6 * m * m * s2n2 - 4 * m**3 * sn3 + m**4 * n4
        small = c / (c - 1)
        estimate = spread * small / (n * v)
        relative_variance = max(0.0, fourth - spread * spread / c) * small / (spread * spread)
        return max(1.0, estimate * (1 + relative_variance * log_budget / 2))

    def saved(self) -> list[float]:
        """The sums (not the open clusters: after a restart each goes on as a new one)."""
        return [self.clusters, *self.moments, *self.powers]

    @classmethod
    def restored(cls, raw: Sequence[object]) -> ClusteredSums:
        """From `saved()`'s numbers; raises TypeError or ValueError."""
        if len(raw) != SAVED_SIZE:
            raise ValueError("clustered sums: the wrong count of numbers")
        values = [saved_number(x) for x in raw]
        if values[0] < 0 or values[1] < 0 or values[3] < 0:
            raise ValueError("clustered sums: a negative count or sum of squares")
        return cls(values[0], values[1:4], values[4:])
