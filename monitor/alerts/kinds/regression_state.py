"""What a regression rule keeps per service (`monitor.alerts.kinds.regression`), and its
form in the state file."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.alerts.evidence import (
    Arrival,
    Bets,
    Expectation,
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
    so far."""

    since: float
    bucket: int
    before: Level
    counts: tuple[float, float]
    applied: float = 0.0


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
            ],
            "translated": None if self.translated is None else list(self.translated),
        }
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
            since, bucket, mean, variance, samples, units, clean, held_, applied = change
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
            )
        translated = raw["translated"]
        if translated is not None:
            variance, until = translated
            self.translated = (_nonnegative(variance), _nonnegative(until))
        if self.test is not None and raw.get("sequential") is not None:
            self.test.restore(raw["sequential"])


def _nonnegative(raw: Any) -> float:
    return saved_number(raw, nonnegative=True)


def _moments(m: Moments) -> list[float]:
    return [m.samples, m.defects, m.squares]


def _level(level: Level) -> list[float]:
    return [level.mean, level.variance, level.samples, level.error_units]
