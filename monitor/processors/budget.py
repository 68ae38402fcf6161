"""Spend limits: for LLM judges evaluations per minute, tokens per hour, USD per day; for
local evaluations per minute, on what boosts add.

Over budget, judge evaluations are skipped (the pipeline counts them as
`sampling_decisions_total{decision="over_budget"}`). The base sample's local evaluations
always run (and count); the local limit (`max_local_evaluations_per_minute`, on by default)
holds back only what a boost adds beyond it, so a sender that drives a boost (forged
traces that look like a rise) cannot multiply the monitor's CPU. Windows slide: usage older
than the window stops counting.

A boost (an alert rule raising its evaluator's sampling while its evidence builds) never
takes what the base sample needs: an evaluation that only a boost sampled is admitted only
while every limit keeps room, beyond what its window holds, for as much again as the base
sample used in that window (extrapolated to a whole window while the gate is younger than
one). So the base sample may double within a window before a boost could crowd it out, on
any service: the room is the whole base sample's, every service's. A boost's evaluations
the budget refuses are counted apart (`sampling_boost_refused_total`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from monitor.config import Budget

# A window holds its amounts in this many slots at most: amounts added within one slot's
# time share an entry, so a window's memory is bounded whatever the rate (an amount
# leaves the window up to a slot's time early).
SLOTS = 120


class _Window:
    """Sum of amounts added during the last `span` seconds."""

    def __init__(self, span: float, clock: Callable[[], float]) -> None:
        self._span = span
        self._slot = span / SLOTS
        self._clock = clock
        self._items: deque[tuple[float, float]] = deque()
        self._total = 0.0

    def __len__(self) -> int:
        return len(self._items)

    def total(self) -> float:
        self._expire(self._clock())
        return self._total

    def _expire(self, now: float) -> None:
        horizon = now - self._span
        while self._items and self._items[0][0] <= horizon:
            self._total -= self._items.popleft()[1]

    def add(self, amount: float) -> None:
        if not amount:
            return
        now = self._clock()
        items = self._items
        if items and now - items[-1][0] < self._slot:
            at, held = items[-1]
            items[-1] = (at, held + amount)
        else:
            items.append((now, amount))
            self._expire(now)  # a window nobody reads (no boost asks) stays bounded
        self._total += amount


@dataclass
class _Limit:
    """One limit: its usage over its window, and the base sample's share of it apart."""

    shown: str  # `key: value`, as configured
    cap: float
    span: float
    clock: Callable[[], float]
    used: _Window = field(init=False)
    base: _Window = field(init=False)

    def __post_init__(self) -> None:
        self.used = _Window(self.span, self.clock)
        self.base = _Window(self.span, self.clock)

    def add(self, amount: float, boost: bool) -> None:
        self.used.add(amount)
        if not boost:
            self.base.add(amount)

    def full(self, boost: bool, age_s: float) -> bool:
        used = self.used.total()
        if boost:
            # Room for the base sample's use over a whole window, on top of what is used.
            used += self.base.total() * self.span / min(max(age_s, 1.0), self.span)
        return used >= self.cap


class BudgetGate:
    def __init__(self, config: Budget, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        c, usd = config, config.max_judge_cost_usd_per_day

        def limit(key: str, cap: float | None, span: float, shown: str = "") -> _Limit | None:
            return None if cap is None else _Limit(f"{key}: {shown or cap}", cap, span, clock)

        self._evaluations = limit("max_evaluations_per_minute", c.max_evaluations_per_minute, 60)
        self._tokens = limit("max_judge_tokens_per_hour", c.max_judge_tokens_per_hour, 3600)
        self._cost = limit("max_judge_cost_usd_per_day", usd, 86400, f"{usd or 0:g}")
        self._local = limit(
            "max_local_evaluations_per_minute", c.max_local_evaluations_per_minute, 60
        )

    def windows(self) -> list[_Window]:
        """Every limit's windows (what they hold is bounded by `SLOTS`)."""
        limits = (self._evaluations, self._tokens, self._cost, self._local)
        return [w for limit in limits if limit is not None for w in (limit.used, limit.base)]

    def admit_local(self, boost: bool, count: int = 1) -> bool:
        """Take `count` local evaluations: always for the base sample (counted), for ones
        that only a boost sampled only while the local limit keeps room for the base
        sample."""
        if self._local is None:
            return True
        if boost and self._local.full(True, self._clock() - self._started):
            return False
        self._local.add(count, boost)
        return True

    def admit(self, boost: bool = False) -> bool:
        """Take one judge evaluation from the budget, or say there is none left; `boost`:
        one that only a boost sampled (admitted only while the base sample keeps room)."""
        if self.reached(boost) is not None:
            return False
        if self._evaluations is not None:
            self._evaluations.add(1, boost)
        return True

    def reached(self, boost: bool = False, local: bool = False) -> str | None:
        """The limit that admits no more judge evaluations (`local`: local ones) now
        (`key: value`), if any; with `boost`, also one whose room the base sample needs."""
        age = self._clock() - self._started
        limits = (self._local,) if local else (self._evaluations, self._tokens, self._cost)
        for limit in limits:
            if limit is not None and limit.full(boost, age):
                return limit.shown
        return None

    def spend(self, tokens: int, cost_usd: float, boost: bool = False) -> None:
        """What a judge evaluation cost; `boost`: one that only a boost sampled."""
        if self._tokens is not None:
            self._tokens.add(tokens, boost)
        if self._cost is not None:
            self._cost.add(cost_usd, boost)
