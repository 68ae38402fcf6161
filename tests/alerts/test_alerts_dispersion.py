"""rho, the correlation of verdicts within a conversation, from a history's buckets: its
bound must hold the truth (understating it inflates false pages) however few
conversations each bucket holds."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.evidence.dispersion import Bucket, conversation_rho

# Statistical behaviour on simulated time: the scorecard tier (tests/conftest.py).
pytestmark = pytest.mark.scorecard


TRUE_RHO = 0.3


def _bucket(rng: np.random.Generator, conversations: int, solo: int = 0) -> Bucket:
    """A bucket of beta-binomial conversations of 5 to 20 verdicts (and `solo` verdicts
    without one) at rate 0.2, summed as the history keeps it."""
    mean, total = 0.2, 1 / TRUE_RHO - 1
    n = rng.integers(5, 21, conversations).astype(float)
    theta = rng.beta(mean * total, (1 - mean) * total, conversations)
    d = rng.binomial(n.astype(int), theta).astype(float)
    all_n = float(n.sum()) + solo
    x = (float(d.sum()) + rng.binomial(solo, mean)) / all_n
    return (
        float(n.sum()),
        float((n * n).sum()),
        float((n**3).sum()),
        float((d * d).sum()),
        float((n * d).sum()),
        all_n,
        x,
        x * (1 - x),
    )


def test_the_bound_holds_rho_when_each_bucket_holds_one_or_two_conversations() -> None:
    covered = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        buckets = [_bucket(rng, int(rng.integers(1, 3))) for _ in range(300)]
        _, bound = conversation_rho(buckets)
        covered += bound >= TRUE_RHO
    assert covered >= 0.93 * 200


def test_a_bucket_of_one_conversation_tells_nothing() -> None:
    rng = np.random.default_rng(7)
    buckets = [_bucket(rng, int(rng.integers(2, 5))) for _ in range(40)]
    lone = _bucket(rng, 1)
    assert lone[1] > lone[0]  # it has pairs of verdicts
    assert conversation_rho([*buckets[:20], lone, *buckets[20:]]) == conversation_rho(buckets)


def test_with_many_conversations_a_bucket_rho_is_unbiased_and_bounded() -> None:
    estimates, covered = [], 0
    for seed in range(200):
        rng = np.random.default_rng(1000 + seed)
        buckets = [_bucket(rng, 30, solo=50) for _ in range(60)]
        rho, bound = conversation_rho(buckets)
        estimates.append(rho)
        covered += bound >= TRUE_RHO
    assert abs(float(np.mean(estimates)) - TRUE_RHO) < 0.01
    assert covered >= 0.93 * 200


def test_too_few_buckets_that_tell_something_keep_the_prior() -> None:
    rng = np.random.default_rng(3)
    few = [_bucket(rng, 40) for _ in range(6)] + [_bucket(rng, 1) for _ in range(30)]
    assert conversation_rho(few) == (0.3, 0.3)
