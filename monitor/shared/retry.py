"""The one retry policy: exponential backoff with full jitter, a cap, an overall deadline,
and the server's `Retry-After` (delta-seconds or HTTP-date, RFC 9110 §10.2.3) honoured,
capped.

`RetryPolicy` says how (pure numbers, from config); `Retry` is the state of one operation
(or of a loop that retries for ever and starts over after a success): how many attempts
failed, since when, and the delay before the next attempt, or None once the attempts or
the deadline are spent. Randomness comes from an injected `random.Random` and time from an
injected clock, so tests decide both. Full jitter (a delay drawn uniformly from
[0, min(cap, base · 2^n)]) spreads clients that failed together, so they do not come back
together.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime


class InvalidRetryAfter(ValueError):
    """A `Retry-After` value that is neither delta-seconds nor an HTTP-date."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How to retry.

    - `base_s`, `max_s`: the n-th retry (n from 0) waits a uniform draw from
      [0, min(max_s, base_s · 2^n)];
    - `max_attempts`: attempts in all, the first included (None: no limit);
    - `deadline_s`: time from the first attempt after which no retry starts (None: no
      limit); a retry whose wait would end past it is not waited for;
    - `retry_after_max_s`: the longest wait a server's `Retry-After` can ask for (None:
      `max_s`).
    """

    base_s: float
    max_s: float
    max_attempts: int | None = None
    deadline_s: float | None = None
    retry_after_max_s: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.max_s:
            raise ValueError(f"retry policy: need 0 < base_s <= max_s, got {self}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"retry policy: max_attempts must be at least 1, got {self}")

    def ceiling(self, retry: int) -> float:
        """The largest backoff of the `retry`-th retry (from 0), before jitter."""
        # 2**retry overflows a float past ~1024 retries; the cap is reached long before.
        return min(self.max_s, self.base_s * 2.0 ** min(retry, 64))

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The `retry`-th retry's wait: full jitter below `ceiling(retry)`."""
        return rng.uniform(0.0, self.ceiling(retry))

    def wait(self, retry: int, rng: random.Random, retry_after: float | None) -> float:
        """The server's `retry_after` (capped) when it gave one, else `backoff`."""
        if retry_after is not None:
            cap = self.max_s if self.retry_after_max_s is None else self.retry_after_max_s
            return min(max(retry_after, 0.0), cap)
        return self.backoff(retry, rng)


class Retry:
    """The retry state of one operation under `policy`.

    Call `next_delay` after each failed attempt: the seconds to wait before the next one, or
    None when no attempt is left (attempts spent, or the wait would end past the deadline).
    `reset` after a success starts over, for a loop that retries for ever."""

    def __init__(
        self,
        policy: RetryPolicy,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self._rng = rng
        self._clock = clock
        self._started = clock()
        self.failures = 0

    def next_delay(self, retry_after: float | None = None) -> float | None:
        self.failures += 1
        policy = self.policy
        if policy.max_attempts is not None and self.failures >= policy.max_attempts:
            return None
        delay = policy.wait(self.failures - 1, self._rng, retry_after)
        if policy.deadline_s is not None:
            if self._clock() - self._started + delay > policy.deadline_s:
                return None
        return delay

    def reset(self) -> None:
        self.failures = 0
        self._started = self._clock()

    @property
    def ceiling(self) -> float:
        """The largest wait the last failure could draw (before jitter); 0 after a success."""
        return self.policy.ceiling(self.failures - 1) if self.failures else 0.0


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header asks to wait: None when there is none, 0 for an
    HTTP-date in the past. `now` is the wall-clock time (Unix seconds) an HTTP-date is
    measured from (default: the current time). Raises `InvalidRetryAfter` for anything
    else; the caller counts and logs it and backs off on its own."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        raise InvalidRetryAfter("empty Retry-After")
    if text[0].isdigit():
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds):
            return seconds
        raise InvalidRetryAfter(f"Retry-After is not delta-seconds: {text[:64]!r}")
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        raise InvalidRetryAfter(f"Retry-After is not an HTTP-date: {text[:64]!r}") from None
    if when.tzinfo is None:  # "-0000": UTC as far as HTTP is concerned
        when = when.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
