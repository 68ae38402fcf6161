"""What one (rule, service, cohort) keeps: counts per dimension value in time buckets, the
retrieval strata, unit groups for the design effect and the last failing traces; and the
sums over a side's buckets that the comparisons read."""

from __future__ import annotations

import math
import statistics
import zlib
from array import array
from collections import deque

from monitor.evidence import Senders
from monitor.records.where import DIMENSIONS

FINE = 20
COARSE = 24
GROUPS = 64
# Windows whose design effect is remembered (its median is used).
MEASURED = 16
TRACES = 32
# A unit group whose spread is more than `OUTLYING` times the mean of the others' is left
# out of the design effect, `TRIMMED` groups at most (`spread_of`).
OUTLYING = 30.0
TRIMMED = 4
# A value is tested with at least this many current verdicts (and as many in the rest).
MIN_SLICE = 10
# A value is compared with its own reference rate from this many reference verdicts on.
MIN_REFERENCE = 30


def spread_of(terms: list[float]) -> float:
    """The groups' spread `sum(terms)`, less the groups whose term stands apart: while the
    largest is more than `OUTLYING` times the mean of the others (up to `TRIMMED` times),
    it is left out and the others stand for all the groups, so one sender's unit (a forged
    conversation id), which lands in one group, cannot carry it."""
    terms = sorted(terms)
    count = len(terms)
    kept, total = count, sum(terms)
    while kept > max(1, count - TRIMMED):
        largest = terms[kept - 1]
        if largest * (kept - 1) <= OUTLYING * (total - largest):
            break
        kept -= 1
        total -= largest
    return total * count / kept if kept else 0.0


class Buckets:
    """What one (rule, service, cohort) keeps (docs/alerts.md, "Memory")."""

    __slots__ = (
        "coarse_at",
        "coarse_head",
        "coarse_w",
        "fine_at",
        "fine_head",
        "fine_w",
        "flagged",
        "flagged_totals",
        "group_start",
        "groups",
        "measured",
        "nc",
        "nf",
        "retrieval",
        "round_robin",
        "screen",
        "screened_tick",
        "strata",
        "totals",
        "traces",
        "values",
    )

    def __init__(self, window_s: float, reference_s: float) -> None:
        self.nf = FINE
        self.nc = COARSE if reference_s > 0 else 0
        self.fine_w = window_s / FINE
        self.coarse_w = reference_s / COARSE if reference_s > 0 else 1.0
        self.fine_at = [-1] * self.nf
        self.coarse_at = [-1] * self.nc
        self.fine_head = -1
        self.coarse_head = -1
        slots = self.nf + self.nc
        self.totals = array("d", bytes(8 * 3 * slots))  # n, sum, sum of squares
        self.strata = array("d", bytes(8 * 4 * slots))  # n, sum: retrieval passed, failed
        self.values: list[dict[str, array[float]]] = [{} for _ in DIMENSIONS]
        # What senders the screen flagged sent, in the same rows (`values`' layout): a
        # value's rise without them is its rise without a forger.
        self.flagged: list[dict[str, array[float]]] = [{} for _ in DIMENSIONS]
        self.flagged_totals = array("d", bytes(8 * 3 * slots))  # theirs of `totals`
        self.screen = Senders()
        self.screened_tick = -1  # when the screen last ran, in SCREEN_EVERY_S
        self.groups = array("d", bytes(8 * 6 * GROUPS))  # current then previous: n, sum, sq
        self.group_start: float | None = None
        self.measured: deque[float] = deque(maxlen=MEASURED)
        self.traces: deque[tuple[float, str, tuple[str, ...]]] = deque(maxlen=TRACES)
        self.retrieval: str | None = None
        self.round_robin = 0

    # -- time ---------------------------------------------------------------------------

    def slot(self, t: float) -> int | None:
        """The bucket slot of time `t` (None: older than the reference)."""
        b = math.floor(t / self.fine_w)
        if b > self.fine_head:
            for index in range(max(self.fine_head + 1, b - self.nf + 1), b + 1):
                s = index % self.nf
                old = self.fine_at[s]
                if old >= 0:
                    self._move(s, self._coarse_slot((old + 0.5) * self.fine_w))
                self.fine_at[s] = index
            self.fine_head = b
        if b > self.fine_head - self.nf and self.fine_at[b % self.nf] == b:
            return b % self.nf
        return self._coarse_slot(t)

    def _coarse_slot(self, t: float) -> int | None:
        if not self.nc:
            return None
        b = math.floor(t / self.coarse_w)
        if b > self.coarse_head:
            for index in range(max(self.coarse_head + 1, b - self.nc + 1), b + 1):
                s = index % self.nc
                self._clear(self.nf + s)
                self.coarse_at[s] = index
            self.coarse_head = b
        if b <= self.coarse_head - self.nc or self.coarse_at[b % self.nc] != b:
            return None
        return self.nf + b % self.nc

    def _move(self, source: int, target: int | None) -> None:
        """Adds slot `source` into `target` (None: dropped), and clears it."""
        if target is not None:
            for data, width in ((self.totals, 3), (self.flagged_totals, 3), (self.strata, 4)):
                for k in range(width):
                    data[target * width + k] += data[source * width + k]
            for values in (*self.values, *self.flagged):
                for row in values.values():
                    row[2 * target] += row[2 * source]
                    row[2 * target + 1] += row[2 * source + 1]
        self._clear(source)

    def _clear(self, s: int) -> None:
        for data, width in ((self.totals, 3), (self.flagged_totals, 3), (self.strata, 4)):
            for k in range(width):
                data[s * width + k] = 0.0
        for values in (*self.values, *self.flagged):
            for row in values.values():
                row[2 * s] = row[2 * s + 1] = 0.0

    def screened_totals(self) -> array[float]:
        """`totals` less what flagged senders sent (`flagged_totals`)."""
        return array(
            "d", (max(0.0, t - f) for t, f in zip(self.totals, self.flagged_totals, strict=True))
        )

    def current_fine(self) -> list[int]:
        """The fine slots that hold the last window, newest first."""
        out = []
        for index in range(self.fine_head, self.fine_head - self.nf, -1):
            if index >= 0 and self.fine_at[index % self.nf] == index:
                out.append(index % self.nf)
        return out

    def coarse(self, since: float) -> list[int]:
        """The coarse slots from `since` on, newest first."""
        first = math.floor(since / self.coarse_w)
        held = [
            (index, self.nf + s)
            for s, index in enumerate(self.coarse_at)
            if index >= first and index > self.coarse_head - self.nc
        ]
        return [s for _, s in sorted(held, reverse=True)]

    def start(self, s: int) -> float:
        """When slot `s`'s bucket begins."""
        if s < self.nf:
            return self.fine_at[s] * self.fine_w
        return self.coarse_at[s - self.nf] * self.coarse_w

    # -- units ---------------------------------------------------------------------------

    def add_unit(
        self, unit: str | None, n: float, x: float, q: float, now: float, span: float
    ) -> None:
        if self.group_start is None or now - self.group_start >= span:
            previous = self.group_start is not None and now - self.group_start < 2 * span
            measured = self._dispersion(0)
            if previous and measured is not None:
                self.measured.append(measured)
            for k in range(3 * GROUPS):
                self.groups[3 * GROUPS + k] = self.groups[k] if previous else 0.0
                self.groups[k] = 0.0
            self.group_start = now
        if unit is None:  # verdicts of no known unit: independent, spread evenly
            self.round_robin += 1
            g = 3 * (self.round_robin % GROUPS)
        else:
            # A hash that is the same in every process (Python's `hash` of a string is
            # salted per process): the groups, and so the design effect a page is judged
            # with, are the same in a restarted sidecar and in `backtest`.
            g = 3 * (zlib.crc32(unit.encode("utf-8", "surrogatepass")) % GROUPS)
        self.groups[g] += n
        self.groups[g + 1] += x
        self.groups[g + 2] += q

    def design_effect(self) -> float:
        """How much more a mean varies than over independent verdicts: the spread of the
        unit groups' sums beyond what independent verdicts give, the median over the last
        `MEASURED` windows (a rise of a few windows, which spreads the groups too, does not
        move it), or over the last two windows while fewer were measured."""
        if len(self.measured) >= 3:
            return max(1.0, statistics.median(self.measured))
        both = self._dispersion(0, 3 * GROUPS)
        return 1.0 if both is None else max(1.0, both)

    def _dispersion(self, *offsets: int) -> float | None:
        """The spread of the unit groups at `offsets` (0: this window's, `3 * GROUPS`: the
        last one's, summed) over chance; None with too few verdicts."""
        groups = self.groups
        sizes = [sum(groups[o + 3 * g] for o in offsets) for g in range(GROUPS)]
        sums = [sum(groups[o + 3 * g + 1] for o in offsets) for g in range(GROUPS)]
        squares = sum(groups[o + 3 * g + 2] for o in offsets for g in range(GROUPS))
        n = sum(sizes)
        if n < 2 * GROUPS:
            return None
        mean = sum(sums) / n
        variance = squares / n - mean * mean
        if variance <= 1e-9:
            return None
        spread = spread_of([(x - k * mean) ** 2 for k, x in zip(sizes, sums, strict=True)])
        chance = n * variance * (1 - sum(k * k for k in sizes) / (n * n))
        return spread / chance if chance > 0 else None


# One side of a comparison: each entry's buckets that belong to it.
Side = list[tuple[Buckets, list[int]]]


def change_point(
    state: Buckets, newest_first: list[int], evidence: int, *, screened: bool = False
) -> int:
    """How many of the newest buckets hold the rise: the split of the buckets into newer
    and older whose difference of means is the most significant, with at least the page's
    `evidence` verdicts among the newer (they paged) and `MIN_REFERENCE` on each side; the
    whole window when no split has (`screened`: of the verdicts of senders not flagged)."""
    totals = state.screened_totals() if screened else state.totals
    all_n = sum(totals[3 * s] for s in newest_first)
    all_x = sum(totals[3 * s + 1] for s in newest_first)
    all_q = sum(totals[3 * s + 2] for s in newest_first)
    best, best_z = min(FINE, len(newest_first)), -math.inf
    if all_n <= 0:
        return max(1, best)
    variance = variance_of(all_n, all_x, all_q)
    n1 = x1 = 0.0
    for count, s in enumerate(newest_first[:-1], 1):
        n1 += totals[3 * s]
        x1 += totals[3 * s + 1]
        n0, x0 = all_n - n1, all_x - x1
        if n1 < max(MIN_REFERENCE, evidence) or n0 < MIN_REFERENCE:
            continue
        z = (x1 / n1 - x0 / n0) / math.sqrt(variance * (1 / n1 + 1 / n0))
        if z > best_z:
            best, best_z = count, z
    return max(1, best)


def totals_of(side: Side, *, screened: bool = False) -> tuple[float, float, float]:
    """A side's verdicts, defects and squares (`screened`: of senders not flagged)."""
    n = x = q = 0.0
    for state, slots in side:
        totals = state.screened_totals() if screened else state.totals
        for s in slots:
            n += totals[3 * s]
            x += totals[3 * s + 1]
            q += totals[3 * s + 2]
    return n, x, q


def strata(side: Side) -> tuple[float, float, float, float]:
    out = [0.0, 0.0, 0.0, 0.0]
    for state, slots in side:
        for s in slots:
            for k in range(4):
                out[k] += state.strata[4 * s + k]
    return out[0], out[1], out[2], out[3]


def sums(
    side: Side, d: int, value: str, *, flagged: bool = False, screened: bool = False
) -> tuple[float, float]:
    """A value's verdicts and defects over a side (`flagged`: those of flagged senders;
    `screened`: those of the others)."""
    n = x = 0.0
    for state, slots in side:
        row = (state.flagged if flagged else state.values)[d].get(value)
        if row is None:
            continue
        for s in slots:
            n += row[2 * s]
            x += row[2 * s + 1]
    if screened:
        fn, fx = sums(side, d, value, flagged=True)
        return max(0.0, n - fn), max(0.0, x - fx)
    return n, x


def variance_of(n: float, x: float, q: float) -> float:
    mean = x / n
    return max(q / n - mean * mean, 1e-4)


def bernoulli(p: float) -> float:
    return max(p * (1 - p), 1e-4)
