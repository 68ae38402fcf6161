"""A fresh regression rule's first verdicts, the level it judges against until its history
expects anything (docs/alerts.md, "Before the history expects anything").

The verdicts are kept in clustering units of `UNIT_S` seconds of arrival (a conversation's
turns, a burst of one request, a topic's minutes fall mostly within one, with an id or
without), until the level holds `min_samples` verdicts in `MIN_UNITS` units at least, or
until the units since some split read above the `MIN_UNITS` or more before it by
`CHANGE_Z` standard errors: a rise while the level fills (a slow service's first minutes)
is no part of it, the level is what came before it (`frozen`). While the best split
reads above `SUSPECT_Z` the level keeps filling past `min_samples` (`held`, up to
`HOLD_FACTOR` times it), so that a rise not yet told apart when it would have filled is
cut once it is; a split still suspected once the verdicts since it hold `HOLD_RATIO` times
those before it (more could tell it apart little better: those before bound its error),
or when the hold reaches its bound, is cut there (never a level filled with the rise),
unless blocks of as many units as the part before it vary enough to explain the split (clustering that spans units: a conversation's turns
minutes apart), and a suspicion that fades leaves the first `min_samples` verdicts, the
level it would have been. What comes later in the rule's first `SPAN_S` is judged
against the level, never learned into it. Its error counts them with the design effect
their units show (the spread of each unit's defects about the level's rate against what
independent verdicts give), raised by that estimate's own error and never below
`DESIGN_PRIOR`: on clustered verdicts a binomial error is several times too small, and a
flat level read low pages a healthy stream. A level cut at a change counts the design
effect measured on every unit of its first hour, those since the cut included as they
come, each part about its own mean, with its error (at least 1: dozens of units bound it,
where four alone bound it so loosely that a level of them judges no rise), or the estimate
that blocks of the level's size show, the larger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from monitor.evidence.counts import Moments
from monitor.evidence.dispersion import KAPPA_PRIOR
from monitor.evidence.level import Level
from monitor.evidence.window import saved_number

UNIT_S = 30.0
MIN_UNITS = 4
# How long after the first verdict the level stands in: a rise in the rule's first hour is
# what it is for; later, a level read low by chance would page a healthy stream in the
# hours its history still needs (a night's few verdicts).
SPAN_S = 3600.0
# The design effect assumed before the units measured one, and its floor after (for a
# level cut at a change, the floor of the split's test).
DESIGN_PRIOR = KAPPA_PRIOR
# Standard errors of the measured design effect added to it (its relative error over `k`
# units is about sqrt(2 / (k - 1))).
DESIGN_Z = 1.0
# Standard errors (at the design effect of the units before, at least the prior) by which
# the units since a split read above those before it: a change. Scanned over every split
# each time a unit closes, so high that a healthy start is seldom cut: a level cut by
# chance was cut where it read low, and a level read low pages (docs/quality.md).
CHANGE_Z = 3.5
# The least share of `min_samples` the units before a change hold to be the level: fewer
# verdicts are no level the test could judge a rise against.
MIN_SHARE = 0.2
# Standard errors of the best split above which a change is suspected: the level keeps
# filling instead of filling at `min_samples`, since the split's z grows with the verdicts
# after it (those before it are fixed) and a rise told apart later is still cut out.
SUSPECT_Z = 2.0
# How many times `min_samples` a suspected level holds at most before it fills anyway.
HOLD_FACTOR = 3.0
# How many times the verdicts before a suspected split those since it hold when it is
# decided: the part before bounds the split's error, so however long the level held, its z
# could grow by at most sqrt(1 + 1 / HOLD_RATIO) more (15 % at 3); holding on costs the
# test those minutes of a rise and tells the split apart no better.
HOLD_RATIO = 3.0


@dataclass(slots=True)
class FirstLevel:
    """The first verdicts of a rule, by clustering unit: unit index (`UNIT_S` seconds since
    `start`) -> [verdicts, defects, squares]."""

    min_samples: float
    start: float | None = None
    units: dict[int, list[float]] = field(default_factory=dict)
    # Cut short at a change: the units before it are the level (not saved: a cut level
    # is the one with `cut_design`).
    frozen: bool = False
    # Once ready its units no longer change (`restore` starts over): asked for every verdict.
    full: bool = False
    # The last scan suspected a change: it keeps filling past `min_samples`.
    held: bool = False
    # The design effect measured at the cut (every unit, each part about its own mean).
    cut_design: float | None = None
    # A cut level's units since the cut, within its `SPAN_S`: what the design effect its
    # error counts is measured on as they come (`design`), the rise's units about their
    # own mean.
    after: dict[int, list[float]] = field(default_factory=dict)
    # The best split while a change is suspected (its first unit, the design effect there).
    _suspected: tuple[int, float] | None = None
    # Whether the verdicts since that split hold `HOLD_RATIO` times those before it.
    _settled: bool = False

    @property
    def count(self) -> float:
        return sum(sums[0] for sums in self.units.values())

    def ready(self) -> bool:
        """It holds `min_samples` verdicts in `MIN_UNITS` units and no change is suspected,
        or what came before a change: it is a level, and full."""
        if not self.full:
            enough = self.count >= self.min_samples and len(self.units) >= MIN_UNITS
            enough = enough and not self.held
            self.full = self.frozen or enough
        return self.full

    def add(self, moments: Moments, now: float) -> None:
        """Verdicts that arrived at `now`, until the level is full; an arrival that crosses
        `min_samples` once the units are enough is cut there. The first arrival of a unit
        closes the units before it: a change among them cuts the level there."""
        if moments.samples <= 0:
            return
        if self.frozen:
            self._add_after(moments, now)
            return
        if self.ready():
            return
        if self.start is None:
            self.start = now
        index = max(0, int((now - self.start) // UNIT_S))
        if index not in self.units and self._close_units(now):
            self._add_after(moments, now)
            return
        share = 1.0
        if len(self.units) + (index not in self.units) >= MIN_UNITS and not self.held:
            share = min(1.0, max(0.0, self.min_samples - self.count) / moments.samples)
            share = share if share > 0 else 1.0
        sums = self.units.setdefault(index, [0.0, 0.0, 0.0])
        for i, x in enumerate((moments.samples, moments.defects, moments.squares)):
            sums[i] += x * share

    def _add_after(self, moments: Moments, now: float) -> None:
        """Verdicts after a cut, by unit, within the level's `SPAN_S`."""
        if self.start is None or now - self.start >= SPAN_S:
            return
        index = max(0, int((now - self.start) // UNIT_S))
        sums = self.after.setdefault(index, [0.0, 0.0, 0.0])
        for i, x in enumerate((moments.samples, moments.defects, moments.squares)):
            sums[i] += x

    def _close_units(self, now: float) -> bool:
        """Whether the units closed so far are the level: cut at a change, or held open past
        `min_samples` and no longer suspected (or at `HOLD_FACTOR`), when the level is its
        first `min_samples` verdicts as it would have been unheld."""
        was_held = self.held
        if self._cut_at_change(now):
            return True
        suspected = self._suspected
        if (self._settled or not self.held) and suspected and self._still_suspected(suspected[0]):
            # Still suspected once the verdicts since the split settle it (`HOLD_RATIO`)
            # or at `HOLD_FACTOR`: the level is what came before the rise, never one
            # filled with it.
            self._cut(*suspected)
            return True
        if not was_held or self.held or self.count < self.min_samples:
            return False
        kept: dict[int, list[float]] = {}
        room = self.min_samples
        for index in sorted(self.units):
            sums = self.units[index]
            whole = len(kept) < MIN_UNITS or sums[0] <= 0
            share = 1.0 if whole else min(1.0, max(room, 0.0) / sums[0])
            kept[index] = [x * share for x in sums]
            room -= sums[0] * share
            if room <= 0 and len(kept) >= MIN_UNITS:
                break
        self.units = kept
        return True

    def _cut_at_change(self, now: float) -> bool:
        """Whether the units since some split read above the `MIN_UNITS` or more before it
        (`MIN_SHARE` of `min_samples` at least) by `CHANGE_Z` standard errors (the variance of
        all the units, the design effect of all of them, each part about its own mean); if
        so, the level is the units before the first split that crosses, and its error counts
        that design effect. Only in the level's first `SPAN_S`: it stands
        in no longer. A split above `SUSPECT_Z` holds the level open (`held`) until it holds
        `HOLD_FACTOR` x `min_samples` verdicts; `_settled` says whether the best split's
        verdicts since it hold `HOLD_RATIO` times those before it."""
        self.held = False
        self._suspected = None
        if len(self.units) <= MIN_UNITS or self.start is None or now - self.start >= SPAN_S:
            return False
        best = -math.inf
        suspected: tuple[int, float] | None = None
        self._settled = False
        order = sorted(self.units)
        # Running sums of the units before each split: verdicts, defects, squares, and for
        # their spread, defects squared, defects x verdicts, verdicts squared.
        prefix = [[0.0] * 6]
        for index in order:
            m, d, q = self.units[index]
            terms = (m, d, q, d * d, d * m, m * m)
            prefix.append([a + b for a, b in zip(prefix[-1], terms, strict=True)])
        total = prefix[-1]
        for split in range(MIN_UNITS, len(order)):
            n_b, d_b, q_b, dd, dm, mm = prefix[split]
            n_a, d_a, q_a, dd_a, dm_a, mm_a = (total[i] - prefix[split][i] for i in range(6))
            if n_b < self.min_samples * MIN_SHARE or n_a <= 0:
                continue
            mean_b, mean_a = d_b / n_b, d_a / n_a
            # Under "no change" both parts vary as all the units do about their mean: a few
            # verdicts that all passed are no level read exactly.
            pooled = (d_b + d_a) / (n_b + n_a)
            variance = max((q_b + q_a) / (n_b + n_a) - pooled * pooled, 0.0)
            # The design effect is the stream's, a rise or not: every unit counts, each
            # about its own part's mean and over its own part's variance.
            spread = _relative(dd - 2 * mean_b * dm + mean_b * mean_b * mm, q_b / n_b - mean_b**2)
            spread += _relative(
                dd_a - 2 * mean_a * dm_a + mean_a * mean_a * mm_a, q_a / n_a - mean_a**2
            )
            measured = _design(len(order), n_b + n_a, spread, 1.0, fitted=2, floor=1.0)
            design = max(DESIGN_PRIOR, measured)
            se2 = design * variance * (1 / n_b + 1 / n_a)
            if se2 <= 0:
                continue
            z = (mean_a - mean_b) / math.sqrt(se2)
            if z >= CHANGE_Z:
                self._cut(order[split], measured)
                return True
            if z > best:
                best, suspected = z, (order[split], measured)
                self._settled = n_a >= HOLD_RATIO * n_b
        self.held = best >= SUSPECT_Z and total[0] < HOLD_FACTOR * self.min_samples
        self._suspected = suspected if best >= SUSPECT_Z else None
        return False

    def _cut(self, split: int, design: float) -> None:
        """The level is the units before unit `split`; its error counts `design` (what the
        units showed) or what blocks of as many units as the level show (the estimate
        alone: few blocks bound it loosely), the larger."""
        blocks = self._blocks(split)
        self.after = {i: sums for i, sums in self.units.items() if i >= split}
        self.units = {i: sums for i, sums in self.units.items() if i < split}
        self.frozen, self.held = True, False
        self.cut_design = max(design, blocks[0])

    def _still_suspected(self, split: int) -> bool:
        """Whether the units since unit `split` still read `SUSPECT_Z` standard errors above
        those before it at the design effect blocks of as many units as the part before
        show (with its error), where that exceeds the prior the scan used."""
        (n_b, d_b), (n_a, d_a), variance, design = self._blocks(split)[1:]
        se2 = max(DESIGN_PRIOR, design) * variance * (1 / n_b + 1 / n_a)
        return se2 > 0 and (d_a / n_a - d_b / n_b) / math.sqrt(se2) >= SUSPECT_Z

    def _blocks(
        self, split: int
    ) -> tuple[float, tuple[float, float], tuple[float, float], float, float]:
        """The design effect of blocks of as many units as there are before unit `split`
        (each part about its own mean): its estimate alone, the parts' verdicts and defects,
        all the units' variance, and the estimate with its error. Clustering that spans
        units (a conversation's turns minutes apart) shows in blocks the size of the level,
        not in its units."""
        order = sorted(self.units)
        size = sum(1 for i in order if i < split)
        before = [self.units[i] for i in order[:size]]
        return _blocks(before, [self.units[i] for i in order[size:]])

    def design(self, mean: float, variance: float) -> float:
        """The design effect of the level's verdicts: the units' spread about `mean` over
        what independent verdicts of `variance` give, with its error, at least the prior (a
        cut level: what every unit of its first hour shows, each part about its own mean,
        or blocks of the level's size, the larger; a cut level saved without the units
        after it, what the cut measured)."""
        if self.frozen and self.after and self.units:
            before, after = list(self.units.values()), [self.after[i] for i in sorted(self.after)]
            spread, k, n = 0.0, 0, 0.0
            for part in (before, after):
                m, d, q = (sum(u[i] for u in part) for i in range(3))
                if m <= 0:
                    continue
                part_mean = d / m
                spread += _relative(
                    sum((u[1] - u[0] * part_mean) ** 2 for u in part), q / m - part_mean**2
                )
                k, n = k + len(part), n + m
            return max(_design(k, n, spread, 1.0, fitted=2, floor=1.0), _blocks(before, after)[0])
        if self.frozen and self.cut_design is not None:
            return self.cut_design
        spread = sum((d - m * mean) ** 2 for m, d, _ in self.units.values())
        return _design(len(self.units), self.count, spread, variance)

    def level(self, now: float) -> Level | None:
        """The first verdicts as a flat level (None: not full yet, or `SPAN_S` past)."""
        if not self.ready() or self.start is None or now - self.start >= SPAN_S:
            return None
        n = self.count
        total = sum(sums[1] for sums in self.units.values())
        squares = sum(sums[2] for sums in self.units.values())
        mean = min(1.0, max(0.0, total / n))
        variance = max(squares / n - mean * mean, 0.0)
        return Level(mean, variance, int(n), n * self.design(mean, variance))

    def saved(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "units": [[index, *sums] for index, sums in sorted(self.units.items())],
            "held": self.held,
            "cut_design": self.cut_design,
            "after": [[index, *sums] for index, sums in sorted(self.after.items())],
        }

    def restore(self, raw: Any) -> None:
        """A saved level; None (a state file from before it was kept) starts none. A level
        cut at a change is one with the cut's design effect (files that kept `frozen` apart
        say so, as files from before the cut's design effect was kept do alone)."""
        self.start, self.units, self.frozen, self.full, self.held = None, {}, False, False, False
        self.cut_design, self._suspected, self.after = None, None, {}
        if raw is None:
            return
        if not isinstance(raw, dict) or not isinstance(raw.get("units"), list):
            raise TypeError("first verdicts: a mapping with units expected")
        start = raw.get("start")
        self.start = None if start is None else saved_number(start)
        held = raw.get("held", False)
        if not isinstance(held, bool):
            raise TypeError("first verdicts: held is true or false")
        self.held = held
        cut_design = raw.get("cut_design")
        # A level cut before its design effect was kept counts its own units'.
        self.cut_design = None if cut_design is None else max(saved_number(cut_design), 1.0)
        frozen = raw.get("frozen", self.cut_design is not None)
        if not isinstance(frozen, bool):
            raise TypeError("first verdicts: frozen is true or false")
        self.frozen = frozen
        self.units = _units(raw["units"])
        # A file from before the units after a cut were kept: its design is the cut's.
        after = raw.get("after", [])
        if not isinstance(after, list):
            raise TypeError("first verdicts: after is a list of units")
        self.after = _units(after)


def _units(raw: list[Any]) -> dict[int, list[float]]:
    """Saved units, `[unit, verdicts, sum, squares]` each, checked."""
    units: dict[int, list[float]] = {}
    for entry in raw:
        if not isinstance(entry, list) or len(entry) != 4:
            raise TypeError("first verdicts: [unit, verdicts, sum, squares] expected")
        index, *sums = (saved_number(x) for x in entry)
        if min(sums) < 0:
            raise ValueError("first verdicts: negative sums")
        units[int(index)] = sums
    return units


def _blocks(
    before: list[list[float]], after: list[list[float]]
) -> tuple[float, tuple[float, float], tuple[float, float], float, float]:
    """The design effect of blocks of as many units as `before` holds in `before` and
    `after` (units in order, each part about its own mean): its estimate alone, the parts'
    verdicts and defects, all the units' variance, and the estimate with its error."""
    size = len(before)
    sums, spread, blocks = [], 0.0, 0
    for part in (before, after):
        n, d, q = (sum(u[k] for u in part) for k in range(3))
        mean = d / n
        for first in range(0, len(part), size):
            block = part[first : first + size]
            m, b = sum(u[0] for u in block), sum(u[1] for u in block)
            spread += _relative((b - m * mean) ** 2, q / n - mean * mean)
            blocks += 1
        sums.append((n, d, q))
    (n_b, d_b, q_b), (n_a, d_a, q_a) = sums
    total = n_b + n_a
    pooled = (d_b + d_a) / total
    variance = max((q_b + q_a) / total - pooled * pooled, 0.0)
    free = blocks - 2
    estimate = spread / total * blocks / free if free >= 1 else DESIGN_PRIOR
    raised = _design(blocks, total, spread, 1.0, fitted=2, floor=1.0)
    return max(1.0, estimate), (n_b, d_b), (n_a, d_a), variance, raised


def _relative(spread: float, variance: float) -> float:
    """A part's spread over its own verdicts' variance (none where they all agree)."""
    return spread / variance if variance > 0 else 0.0


def _design(
    k: int, n: float, spread: float, variance: float, fitted: int = 1, floor: float = DESIGN_PRIOR
) -> float:
    """The design effect of `n` verdicts in `k` units whose defects spread `spread` (summed
    squares) about the `fitted` means of their parts: over what independent verdicts of
    `variance` give, with its error, at least the prior."""
    free = k - fitted
    if free < 1 or variance <= 0 or n <= 0:
        return DESIGN_PRIOR
    measured = spread / (n * variance) * k / free
    return max(floor, measured * (1.0 + DESIGN_Z * math.sqrt(2.0 / free)))
