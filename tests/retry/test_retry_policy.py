"""The retry policy (`monitor/shared/retry.py`): full-jitter bounds, attempts, the deadline, and
`Retry-After` as delta-seconds or HTTP-date."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from monitor.shared.retry import InvalidRetryAfter, Retry, RetryPolicy, parse_retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_full_jitter_draws_below_the_doubling_ceiling_up_to_the_cap() -> None:
    policy = RetryPolicy(base_s=0.5, max_s=4.0)
    rng = random.Random(7)
    for retry, ceiling in enumerate([0.5, 1.0, 2.0, 4.0, 4.0, 4.0]):
        assert policy.ceiling(retry) == ceiling
        draws = [policy.backoff(retry, rng) for _ in range(2000)]
        assert all(0.0 <= d <= ceiling for d in draws)
        # Full jitter: the whole range is used, not a band around the ceiling.
        assert min(draws) < 0.05 * ceiling and max(draws) > 0.95 * ceiling


def test_the_same_seed_gives_the_same_delays() -> None:
    policy = RetryPolicy(base_s=1.0, max_s=30.0, max_attempts=6)

    def delays(seed: int) -> list[float | None]:
        retry = Retry(policy, random.Random(seed), Clock())
        return [retry.next_delay() for _ in range(6)]

    assert delays(3) == delays(3) != delays(4)


def test_attempts_are_bounded_and_counted_from_the_first() -> None:
    retry = Retry(RetryPolicy(base_s=0.1, max_s=1.0, max_attempts=3), random.Random(1), Clock())
    assert retry.next_delay() is not None  # after attempt 1
    assert retry.next_delay() is not None  # after attempt 2
    assert retry.next_delay() is None  # attempt 3 was the last
    assert retry.failures == 3


def test_no_wait_ends_past_the_deadline() -> None:
    clock = Clock()
    policy = RetryPolicy(base_s=1.0, max_s=1.0, deadline_s=10.0)
    retry = Retry(policy, random.Random(5), clock)
    waited = 0.0
    while (delay := retry.next_delay()) is not None:
        waited += delay
        clock.now += delay + 0.5  # the wait, then an attempt that takes 0.5 s
        assert clock.now - 100.0 <= 10.0 + 0.5
    assert 0 < waited <= 10.0
    # A server asking for longer than what is left gives up at once.
    late = Retry(
        RetryPolicy(base_s=1, max_s=1, deadline_s=5, retry_after_max_s=60), random.Random(), clock
    )
    assert late.next_delay(retry_after=30) is None


def test_reset_starts_over_and_ceiling_reports_the_last_failure() -> None:
    clock = Clock()
    retry = Retry(RetryPolicy(base_s=0.5, max_s=30.0, deadline_s=5.0), random.Random(2), clock)
    assert retry.ceiling == 0
    for _ in range(3):
        retry.next_delay()
    assert retry.ceiling == 2.0
    clock.now += 100  # past the deadline ...
    assert retry.next_delay() is None
    retry.reset()  # ... until a success starts over
    assert retry.ceiling == 0
    assert retry.next_delay() is not None and retry.ceiling == 0.5


def test_retry_after_wins_over_backoff_and_is_capped() -> None:
    policy = RetryPolicy(base_s=0.1, max_s=2.0, retry_after_max_s=60.0)
    retry = Retry(policy, random.Random(0), Clock())
    assert retry.next_delay(retry_after=7.0) == 7.0
    assert retry.next_delay(retry_after=3600.0) == 60.0
    assert RetryPolicy(base_s=0.1, max_s=2.0).wait(0, random.Random(), 30.0) == 2.0


def test_retry_after_delta_seconds() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after("1.5") == 1.5


def test_retry_after_http_date() -> None:
    now = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("Mon, 23 Nov 2026 12:01:30 GMT", now=now) == 90.0
    later = format_datetime(datetime(2026, 11, 23, 12, 0, 5, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(later, now=now) == 5.0
    # The obsolete RFC 850 and asctime forms are HTTP-dates too.
    assert parse_retry_after("Monday, 23-Nov-26 12:00:10 GMT", now=now) == 10.0


def test_retry_after_in_the_past_means_now() -> None:
    now = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("Sun, 22 Nov 2026 12:00:00 GMT", now=now) == 0.0


@pytest.mark.parametrize(
    "garbage", ["", "soon", "-5", "1e999", "nan", "12 seconds", "Mon, 99 Foo 2026 25:61:00 GMT"]
)
def test_retry_after_garbage_is_refused(garbage: str) -> None:
    with pytest.raises(InvalidRetryAfter):
        parse_retry_after(garbage, now=0.0)


def test_a_policy_that_cannot_work_is_refused() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(base_s=2.0, max_s=1.0)
    with pytest.raises(ValueError):
        RetryPolicy(base_s=1.0, max_s=1.0, max_attempts=0)
