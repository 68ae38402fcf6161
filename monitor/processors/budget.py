"""Spend limits for LLM judges: evaluations per minute, tokens per hour, USD per day.

Over budget, judge evaluations are skipped (the pipeline counts them as
`sampling_decisions_total{decision="over_budget"}`, and those a boost asked for beyond the
base rate also in `sampling_boost_refused_total`); local evaluators are never limited.
Windows slide: usage older than the window stops counting.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from monitor.config import Budget


class _Window:
    """Sum of amounts added during the last `span` seconds."""

    def __init__(self, span: float, clock: Callable[[], float]) -> None:
        self._span = span
        self._clock = clock
        self._items: deque[tuple[float, float]] = deque()
        self._total = 0.0

    def total(self) -> float:
        horizon = self._clock() - self._span
        while self._items and self._items[0][0] <= horizon:
            self._total -= self._items.popleft()[1]
        return self._total

    def add(self, amount: float) -> None:
        if amount:
            self._items.append((self._clock(), amount))
            self._total += amount


class BudgetGate:
    def __init__(self, config: Budget, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._evaluations = _Window(60, clock)
        self._tokens = _Window(3600, clock)
        self._cost = _Window(86400, clock)

    def admit(self) -> bool:
        """Take one judge evaluation from the budget, or say there is none left."""
        if self.reached() is not None:
            return False
        self._evaluations.add(1)
        return True

    def reached(self) -> str | None:
        """The limit that admits no more judge evaluations now (`key: value`), if any."""
        c = self._config
        if c.max_evaluations_per_minute is not None:
            if self._evaluations.total() >= c.max_evaluations_per_minute:
                return f"max_evaluations_per_minute: {c.max_evaluations_per_minute}"
        if c.max_judge_tokens_per_hour is not None:
            if self._tokens.total() >= c.max_judge_tokens_per_hour:
                return f"max_judge_tokens_per_hour: {c.max_judge_tokens_per_hour}"
        if c.max_judge_cost_usd_per_day is not None:
            if self._cost.total() >= c.max_judge_cost_usd_per_day:
                return f"max_judge_cost_usd_per_day: {c.max_judge_cost_usd_per_day:g}"
        return None

    def spend(self, tokens: int, cost_usd: float) -> None:
        self._tokens.add(tokens)
        self._cost.add(cost_usd)
