"""The circuit breaker of one judge model."""

from __future__ import annotations

from collections.abc import Callable


class CircuitBreaker:
    """Closed → open after `threshold` consecutive failures → half-open after `cooldown`
    (one probe call) → closed on success, open again on failure."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float]) -> None:
        self._threshold = threshold
        self._cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    def allow(self) -> bool:
        if self._opened_at is None:
            return True
        if self._probing or self._clock() - self._opened_at < self._cooldown:
            return False
        self._probing = True
        return True

    def remaining(self) -> float:
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._cooldown - (self._clock() - self._opened_at))

    @property
    def is_open(self) -> bool:
        return self._opened_at is not None

    def success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def abandon(self) -> None:
        """The call let through was cancelled before it could tell anything."""
        self._probing = False

    def failure(self) -> bool:
        """Record a failed attempt; True when this failure opened the breaker."""
        self._failures += 1
        was_open = self._opened_at is not None
        if self._probing or self._failures >= self._threshold:
            self._opened_at = self._clock()
            self._probing = False
            return not was_open
        return False
