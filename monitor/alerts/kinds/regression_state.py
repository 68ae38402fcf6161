"""What a regression rule keeps per service (`monitor.alerts.kinds.regression`), and its
form in the state file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.kinds.overlap import Overlap
from monitor.alerts.kinds.shadow_pairs import Shadow
from monitor.evidence import (
    Arrival,
    Bets,
    Expectation,
    FirstLevel,
    History,
    Level,
    Moments,
    SequentialTest,
    SlidingWindow,
    restore_slices,
    saved_number,
)


@dataclass(frozen=True, slots=True)
class Changeover:
    """An evaluator revision replaced the one the history was learned with, at `since`:
    `before` is the old revision's deseasonalised level over the baseline window before it,
    `bucket` the history's bucket it fell in, `counts` that bucket's verdicts (clean,
    held) of the old revision, and `applied` the offset the older buckets were moved by
    so far; `overlap` what both revisions scored since (`Overlap`); `replaced` the old
    revision (None: not known, a state file from before it was kept); `interim` the new
    revision's verdicts since, as they came: history bucket -> (verdicts, sum, squares),
    what the rule judges against until the offset is measured (`Expecting`)."""

    since: float
    bucket: int
    before: Level
    counts: tuple[float, float]
    applied: float = 0.0
    overlap: Overlap = field(default_factory=Overlap)
    replaced: str | None = None
    interim: dict[int, list[float]] = field(default_factory=dict)


@dataclass(slots=True)
class RegressionState:
    current: SlidingWindow
    # The current window's verdicts that came without a conversation.
    solo: SlidingWindow
    history: History
    test: SequentialTest | None
    # Since the last batch: verdicts without a conversation by level, conversations'
    # arrivals.
    pending: list[float]
    pending_arrivals: list[Arrival] = field(default_factory=list)
    # The service (and cohort) as log lines name it; not saved: whoever makes the state sets it.
    series: str = ""
    # How many of a changeover's first verdicts its interim level takes (set as `series`).
    interim_samples: float = math.inf
    bets: Bets | None = None
    # What went into the history as a rise while evidence built: bucket -> (all, solo).
    held: dict[int, tuple[Moments, Moments]] = field(default_factory=dict)
    # A pinned reference once learned: (start, end, its level).
    pinned: tuple[float, float, Level] | None = None
    resolved_at: float = 0.0
    leaning_since: float | None = None
    last: float | None = None
    # While the new revision's offset from the old is measured (`Regression.new_state`).
    changeover: Changeover | None = None
    # After it: the offset's variance, added to the expectation's error until `until`.
    translated: tuple[float, float] | None = None
    # What the current window is compared with, as of the last advance (not saved: an
    # advance comes before every judgment).
    expected: Expectation | None = None
    # Whether `expected` is an interim level: 1 a changeover's, 2 a fresh rule's first
    # verdicts (not saved, as `expected`).
    interim: float = 0.0
    # A fresh rule's first verdicts (`FirstLevel`), as many as a changeover's interim takes.
    first: FirstLevel = field(default_factory=lambda: FirstLevel(math.inf))
    # While evidence of a rise builds (as of the last advance), what both revisions score
    # is kept apart from the changeover's overlap (`held_overlap`), as the rise's verdicts
    # are from the level: joined when the evidence fades, dropped when the rule fires
    # (not saved: a restart drops it).
    building: bool = False
    held_overlap: Overlap | None = None
    held_since: float = 0.0
    # A revision scoring records in shadow beside the entry's own (`count_shadow`).
    shadow: Shadow | None = None

    def __post_init__(self) -> None:
        self.first.min_samples = self.interim_samples

    def count_shadow(self, revision: str, own: Moments, shadow: Moments, now: float) -> None:
        """A shadowed revision's verdicts `shadow` and the entry's own `own` on the same
        record (a shadow of another revision starts anew). Left out while evidence of a
        rise builds, as the changeover's pairs are: a rise that moves the two revisions'
        rates by different amounts would move the offset."""
        if self.building or min(own.samples, shadow.samples) <= 0:
            return
        if self.shadow is None or self.shadow.revision != revision:
            self.shadow = Shadow(revision)
        self.shadow.add(own, shadow, now)

    def count_overlap(self, moments: Moments, now: float, *, old: bool, firing: bool) -> None:
        """Verdicts of either revision while a changeover lasts: to its overlap (the new
        revision's to its interim level too), held apart while evidence builds and left out
        while the rule fires (a rise of the service that moves the two revisions' rates by
        different amounts, as a doubling does, would move the offset)."""
        # A fresh rule's only: after a changeover the translated history and its interim
        # level are what the new revision is judged against.
        if not old and not firing and self.changeover is None and self.translated is None:
            self.first.add(moments, now)
        change = self.changeover
        if change is None or firing:
            return
        bucket = self.history.bucket(now)
        self._overlap(change).add(bucket, moments, now, old=old)
        if old:
            change.overlap.old_seen = now  # the old revision reports, held or not
        taken = sum(sums[0] for sums in change.interim.values())
        if not old and moments.samples > 0 and taken < self.interim_samples:
            # Its first verdicts only, never a whole open bucket: a rise after them is judged.
            sums = change.interim.setdefault(bucket, [0.0, 0.0, 0.0])
            for i, x in enumerate((moments.samples, moments.defects, moments.squares)):
                sums[i] += x

    def count_pair(
        self, revision: str | None, old: Moments, new: Sequence[float], now: float, firing: bool
    ) -> str | None:
        """A previous revision's verdicts `old` and the current one's `new` on the same
        record while a changeover from `revision` lasts: to its overlap (held apart or
        left out as by `count_overlap`). Returns the revision the history was learned
        with when it is not `revision` (the verdicts are left out)."""
        change = self.changeover
        if change is None:
            return None
        if change.replaced is None or change.replaced != revision:
            return change.replaced or "an unknown revision"
        paired = Moments.of_histogram(new)
        if not firing and min(old.samples, paired.samples) > 0:
            self._overlap(change).add_pair(old, paired, now)
            change.overlap.old_seen = now
        return None

    def _overlap(self, change: Changeover) -> Overlap:
        """Where verdicts of both revisions go now: the changeover's overlap, or while
        evidence builds, the overlap held apart."""
        if not self.building:
            return change.overlap
        if self.held_overlap is None:
            self.held_overlap = Overlap()
        return self.held_overlap

    def settle_held_overlap(self, now: float, building: bool, firing: bool, hold_s: float) -> None:
        """Whether evidence of a rise builds, as of an advance at `now`: what was held apart
        joins the overlap once it fades or after `hold_s` (as held verdicts join the level),
        and is dropped when the rule fires (part of the rise that paged)."""
        held, change = self.held_overlap, self.changeover
        self.building = building and not firing
        if not self.building:
            self.held_since = now
        if held is None or (self.building and now - self.held_since < hold_s):
            return
        if change is not None and not firing:
            change.overlap.merge(held)
        self.held_overlap = None

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "current": self.current.slices(),
            "solo": self.solo.slices(),
            "history": self.history.snapshot(),
            "held": [
                [bucket, *_moments(all_), *_moments(solo)]
                for bucket, (all_, solo) in self.held.items()
            ],
            "pinned": None
            if self.pinned is None
            else [self.pinned[0], self.pinned[1], *_level(self.pinned[2])],
            "resolved_at": self.resolved_at,
            "leaning_since": self.leaning_since,
            "last": self.last,
            "changeover": None
            if self.changeover is None
            else [
                self.changeover.since,
                self.changeover.bucket,
                *_level(self.changeover.before),
                *self.changeover.counts,
                self.changeover.applied,
                *self.changeover.overlap.saved(),
            ],
            "translated": None if self.translated is None else list(self.translated),
            "replaced": None if self.changeover is None else self.changeover.replaced,
            "interim": None
            if self.changeover is None
            else [[bucket, *sums] for bucket, sums in self.changeover.interim.items()],
            "first": self.first.saved(),
        }
        if self.shadow is not None:
            out["shadow"] = self.shadow.saved()
        if self.test is not None:
            out["sequential"] = self.test.snapshot()
        return out

    def restore(self, raw: Any) -> None:
        self.current.restore(restore_slices(raw["current"]))
        self.solo.restore(restore_slices(raw["solo"]))
        self.history.restore(raw["history"])
        held = {}
        for entry in raw["held"]:
            bucket, n, d, q, sn, sd, sq = entry
            held[int(bucket)] = (
                Moments(int(n), _nonnegative(d), _nonnegative(q)),
                Moments(int(sn), _nonnegative(sd), _nonnegative(sq)),
            )
        self.held = held
        pinned = raw["pinned"]
        if pinned is not None:
            start, end, mean, variance, samples, units = (_nonnegative(x) for x in pinned)
            self.pinned = (start, end, Level(mean, variance, int(samples), units))
        self.resolved_at = _nonnegative(raw["resolved_at"])
        leaning = raw["leaning_since"]
        self.leaning_since = None if leaning is None else _nonnegative(leaning)
        last = raw["last"]
        self.last = None if last is None else _nonnegative(last)
        change = raw["changeover"]
        if change is not None:
            since, bucket, mean, variance, samples, units, clean, held_, applied, *both = change
            if isinstance(bucket, bool) or not isinstance(bucket, int):
                raise TypeError("changeover: the bucket is not an integer")
            self.changeover = Changeover(
                _nonnegative(since),
                bucket,
                Level(
                    _nonnegative(mean),
                    _nonnegative(variance),
                    int(_nonnegative(samples)),
                    _nonnegative(units),
                ),
                (_nonnegative(clean), _nonnegative(held_)),
                saved_number(applied),
                _overlap(both),
                _text(raw["replaced"]),
                _interim(raw["interim"]),
            )
        self.first.restore(raw.get("first"))
        translated = raw["translated"]
        if translated is not None:
            variance, until = translated
            self.translated = (_nonnegative(variance), _nonnegative(until))
        self.shadow = Shadow.restored(raw.get("shadow"))
        if self.test is not None and raw.get("sequential") is not None:
            self.test.restore(raw["sequential"])


def _overlap(raw: list[Any]) -> Overlap:
    """An overlap's saved numbers (`Overlap.saved`)."""
    if len(raw) != 18:
        raise ValueError("changeover: the overlap holds the wrong count of numbers")
    bucket, *rest = raw
    if isinstance(bucket, bool) or not isinstance(bucket, int):
        raise TypeError("changeover: the overlap's bucket is not an integer")
    weighted, paired_sum = saved_number(rest.pop(7)), saved_number(rest.pop(14))
    n = [_nonnegative(x) for x in rest]
    paired = [n[13], paired_sum, n[14]]
    return Overlap(bucket, n[0:3], n[3:6], n[6], weighted, n[7:10], n[10:12], n[12], paired)


def _interim(raw: Any) -> dict[int, list[float]]:
    """A changeover's interim sums."""
    out: dict[int, list[float]] = {}
    for bucket, *sums in raw or []:
        if isinstance(bucket, bool) or not isinstance(bucket, int) or len(sums) != 3:
            raise TypeError("changeover: an interim bucket is malformed")
        out[bucket] = [_nonnegative(x) for x in sums]
    return out


def _text(raw: Any) -> str | None:
    if raw is not None and not isinstance(raw, str):
        raise TypeError("changeover: the replaced revision is not text")
    return raw


def _nonnegative(raw: Any) -> float:
    return saved_number(raw, nonnegative=True)


def _moments(m: Moments) -> list[float]:
    return [m.samples, m.defects, m.squares]


def _level(level: Level) -> list[float]:
    return [level.mean, level.variance, level.samples, level.error_units]
