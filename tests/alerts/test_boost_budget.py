"""A boost never takes what the base sample needs (`BudgetGate`): an evaluation that only a
boost sampled is admitted only while every limit keeps room for as much again as the base
sample used in its window, so base-rate evaluations, of the boosted service and of every
other, go on as without the boost. Driven by an injected clock and a seeded stream."""

from __future__ import annotations

import random

from monitor.config import Budget
from monitor.processors.budget import BudgetGate
from tests.alerts.test_alerts import Clock


def test_a_boost_takes_only_the_room_the_base_sample_leaves_on_every_service() -> None:
    clock = Clock()
    gate = BudgetGate(Budget(max_evaluations_per_minute=30), clock)
    rng = random.Random(5)
    admitted: list[tuple[float, str]] = []
    refused = {"shop": 0, "search": 0, "boost": 0}
    for _ in range(3600):  # an hour, second by second
        clock.now += 1
        # The base samples of two services, about 6 and 4 a minute, and a boost of shop's
        # evaluator asking for one a second: far more than the budget.
        arrivals = ["shop"] * (rng.random() < 0.1) + ["search"] * (rng.random() < 0.07)
        arrivals.append("boost")
        rng.shuffle(arrivals)
        for who in arrivals:
            if gate.admit(boost=who == "boost"):
                admitted.append((clock.now, who))
            else:
                refused[who] += 1
    assert refused["shop"] == refused["search"] == 0  # the base samples, whole
    boosted = sum(who == "boost" for _, who in admitted)
    assert 3 * 60 < boosted < 30 * 60  # the boost gets what is left, and is held back
    for start in range(int(admitted[0][0]), int(clock.now) - 60, 7):
        within = sum(start < t <= start + 60 for t, _ in admitted)
        assert within <= 30  # never past the budget


def test_tokens_and_cost_keep_room_for_what_the_base_sample_spends() -> None:
    clock = Clock()
    gate = BudgetGate(Budget(max_judge_cost_usd_per_day=30, max_judge_tokens_per_hour=10**6), clock)
    for _ in range(2):  # two hours of base sample at a dollar an hour
        clock.now += 3600
        gate.spend(1_000, 1.0)
    # Two hours into its first day the gate expects 24 dollars of base sample in a day:
    # room for 4 more (30 - 2 spent - 24), taken by a boost, then no more boost.
    assert gate.admit(boost=True)
    gate.spend(1_000, 3.9, boost=True)
    assert gate.admit(boost=True)
    gate.spend(1_000, 0.2, boost=True)
    assert not gate.admit(boost=True)
    assert gate.reached(boost=True) == "max_judge_cost_usd_per_day: 30"
    assert gate.reached() is None and gate.admit()  # the base sample goes on
    # Tokens likewise: a boost stops where the hour keeps room for the base sample's use.
    gate = BudgetGate(Budget(max_judge_tokens_per_hour=10_000), clock)
    clock.now += 3600
    gate.spend(3_000, 0.0)
    gate.spend(3_500, 0.0, boost=True)
    assert gate.reached(boost=True) is None
    gate.spend(600, 0.0, boost=True)
    assert gate.reached(boost=True) == "max_judge_tokens_per_hour: 10000"
    assert gate.reached() is None


def test_a_young_gate_counts_the_base_sample_over_a_whole_window() -> None:
    """Ten seconds into its first minute, two base evaluations read as twelve a minute."""
    clock = Clock()
    gate = BudgetGate(Budget(max_evaluations_per_minute=15), clock)
    clock.now += 10
    assert gate.admit() and gate.admit()
    assert gate.admit(boost=True)  # 3 used + 12 expected: the budget
    assert not gate.admit(boost=True)
    assert gate.reached(boost=True) == "max_evaluations_per_minute: 15"
    assert gate.admit()
