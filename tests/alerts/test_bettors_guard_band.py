"""What the sequential test's bettors temper a verdict without a conversation by
(`monitor.evidence.sequential.bets`): kappa, less the part of its allowance for its own
error that a bettor's guard band (`min_increase / 2` between the expected mean and its null
point) covers, never below kappa's estimate alone. A young history's kappa is mostly that
allowance: the bettors of small rises no longer pay all of it."""

from __future__ import annotations

import math

import pytest

from monitor.evidence.history import Expectation
from monitor.evidence.sequential import Bets, bets
from monitor.evidence.terms import Terms

BUDGET_S = 90 * 86400.0
MIN_INCREASE = 0.03
TERMS = Terms(60.0, BUDGET_S, min_increase=MIN_INCREASE)


def young(kappa: float, estimate: float | None) -> Expectation:
    """0.10 learned from many verdicts whose kappa reads `kappa` with its allowance and
    `estimate` without (None: a level that carries none, judged at kappa)."""
    return Expectation(0.10, 0.09, 1e-7, 200_000, kappa=kappa, rho=0.0, kappa_estimate=estimate)


def tempering(b: Bets) -> list[float]:
    """Each bettor's divisor: the untempered log-factor of a failed verdict over its own."""
    out = []
    for null, a, v, gains in zip(b.nulls, b.alternatives, b.variances, b.solo_gains, strict=True):
        stake = min((a - null) / v, 0.95 / null)
        out.append(math.log1p(stake * (1 - null)) / gains[-1])
    return out


def test_bettors_near_their_null_point_pay_less_of_kappa_s_allowance() -> None:
    kappa, estimate = 1.5, 1.05
    b = bets(young(kappa, estimate), TERMS)
    assert b is not None and len(b.slots) >= 4
    tempers = tempering(b)
    for temper, null, a in zip(tempers, b.nulls, b.alternatives, strict=True):
        covered = kappa / (1 + MIN_INCREASE / (a - null))
        assert temper == pytest.approx(max(estimate, covered))
        assert estimate <= temper < kappa
    # The farther an alternative from its null point, the less its guard band covers.
    assert tempers == sorted(tempers)
    assert tempers[0] < 1.1 and tempers[-1] > 1.4


def test_a_measured_dispersion_is_tempered_by_in_full() -> None:
    """The guard band covers only the allowance for kappa's error: where the estimate
    alone is most of kappa (a long history's, a clustered stream's) every bettor divides by
    at least it; without an estimate (a first level: its design effect holds its own
    error) every bettor divides by kappa."""
    clustered = bets(young(3.2, 3.0), TERMS)
    assert clustered is not None
    assert all(3.0 <= t <= 3.2 for t in tempering(clustered))
    first = bets(young(2.0, None), TERMS)
    assert first is not None
    assert tempering(first) == pytest.approx([2.0] * len(first.slots))


def test_independent_verdicts_are_never_amplified() -> None:
    """kappa at 1 (independent verdicts, measured so): no bettor divides by less than 1,
    however wide its guard band."""
    b = bets(young(1.0, 1.0), TERMS)
    assert b is not None
    assert tempering(b) == pytest.approx([1.0] * len(b.slots))
