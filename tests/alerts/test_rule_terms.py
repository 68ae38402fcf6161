"""A rule's thresholds (`monitor.evidence.Terms`) change its decision where they should, for
every rule kind: one stream of verdicts, judged by the same rule with one threshold moved
either side of what the stream shows.

A rise of 0.20 over a level of 0.10: a `min_increase` whose half (the null point every rise
test starts from, docs/alerts.md) is well below it pages, one whose half is above it does
not, with either test of a regression rule and for a cohort rule; a window at 0.30 pages an
absolute rule whose `max_defect_rate` is below it and not one above; and a `min_samples` past
what the window holds keeps every kind quiet that pages at a lower one. `min_increase` is an
absolute rise (docs/alerts.md): a change of its meaning in `Terms` alone fails here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.kinds.pick import KINDS
from monitor.alerts.rule import Origin, Rule
from monitor.config import (
    AbsoluteRule,
    AlertBaseline,
    AlertBurnRate,
    AlertCohorts,
    AlertRule,
    AlertSlo,
    CohortRule,
    RegressionRule,
    SloRule,
)
from monitor.evidence import Terms
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

INTERVAL = 5.0
PER_S = 10
LEVEL, RISEN = 0.10, 0.30  # a rise of 0.20
BATCH = 8


def _fails(n: int, count: int, rate: float) -> int:
    """Defects among `count` verdicts after `n`: where the running count of `rate` steps up."""
    return math.floor((n + count) * rate) - math.floor(n * rate)


class Run:
    """One engine of one rule on simulated time; `feed(engine, now)` counts what arrives in
    each interval."""

    def __init__(self, rule: AlertRule) -> None:
        self.clock = Clock()
        self.engine = AlertEngine(
            [rule], create_telemetry(), evaluation_interval_s=INTERVAL, clock=self.clock
        )
        self.n: dict[str, int] = {}
        self.paged = False

    def count(self, origin: Origin, rate: float, seconds: float = INTERVAL) -> None:
        """`PER_S` verdicts a second of `origin` at `rate`, `BATCH` at a time."""
        key = f"{origin.service}/{origin.version}"
        left = int(PER_S * seconds)
        while left:
            k = min(BATCH, left)
            n = self.n.get(key, 0)
            fails = _fails(n, k, rate)
            self.n[key] = n + k
            left -= k
            self.engine.count(0, origin, [float(k - fails), float(fails)], None, self.clock.now)

    def run(self, seconds: float, feed: Callable[[Run], None]) -> None:
        for _ in range(int(seconds / INTERVAL)):
            feed(self)
            self.clock.now += INTERVAL
            alerts = self.engine.evaluate()
            self.paged = self.paged or any(a.status == "firing" for a in alerts)


def _service(rate: float) -> Callable[[Run], None]:
    return lambda run: run.count(Origin("shop"), rate)


def _regression(test: Literal["window", "sequential"], **terms: float) -> bool:
    """Whether a regression rule (`test`) pages a rise from LEVEL to RISEN after ten minutes."""
    rule = RegressionRule(
        name="regression",
        evaluator="groundedness",
        window="60s",
        min_samples=int(terms.get("min_samples", 50)),
        baseline=AlertBaseline(window="10m", min_samples=200, season="none"),
        min_increase=terms.get("min_increase", 0.05),
        false_page_every="2h",
        test=test,
    )
    run = Run(rule)
    run.run(900, _service(LEVEL))
    assert not run.paged  # a steady level is no rise at any threshold
    run.run(300, _service(RISEN))
    return run.paged


def _cohorts(**terms: float) -> bool:
    """Whether a cohort rule pages version `b` at RISEN beside version `a` at LEVEL."""
    rule = CohortRule(
        name="cohorts",
        evaluator="groundedness",
        window="5m",
        min_samples=int(terms.get("min_samples", 100)),
        cohorts=AlertCohorts(by="version"),
        min_increase=terms.get("min_increase", 0.05),
        false_page_every="2h",
    )

    def feed(run: Run) -> None:
        run.count(Origin("shop", version="a"), LEVEL)
        run.count(Origin("shop", version="b"), RISEN)

    run = Run(rule)
    run.run(600, feed)
    return run.paged


def _absolute(**terms: float) -> bool:
    """Whether an absolute rule pages a window at RISEN."""
    rule = AbsoluteRule(
        name="absolute",
        evaluator="groundedness",
        window="5m",
        min_samples=int(terms.get("min_samples", 100)),
        max_defect_rate=terms.get("max_defect_rate", 0.2),
        false_page_every="2h",
    )
    run = Run(rule)
    run.run(600, _service(RISEN))
    return run.paged


def _slo(**terms: float) -> bool:
    """Whether an SLO rule of objective 0.95 pages a defect rate of RISEN (a burn of 6)."""
    rule = SloRule(
        name="slo",
        evaluator="groundedness",
        min_samples=int(terms.get("min_samples", 30)),
        slo=AlertSlo(
            objective=0.95,
            window="1d",
            burn_rates=[AlertBurnRate(burn_rate=2.0, long="10m", short="2m")],
        ),
    )
    run = Run(rule)
    run.run(900, _service(RISEN))
    return run.paged


@pytest.mark.parametrize("test", ["window", "sequential"])
def test_a_regression_rule_pages_a_rise_above_half_its_min_increase_and_not_below(
    test: Literal["window", "sequential"],
) -> None:
    assert _regression(test, min_increase=0.1)  # null point +0.05: the rise of 0.20 pages
    assert not _regression(test, min_increase=0.6)  # null point +0.30: above the rise


def test_a_cohort_rule_pages_a_cohort_above_half_its_min_increase_and_not_below() -> None:
    assert _cohorts(min_increase=0.1)
    assert not _cohorts(min_increase=0.6)


def test_an_absolute_rule_pages_above_its_max_defect_rate_and_not_below() -> None:
    assert _absolute(max_defect_rate=0.2)
    assert not _absolute(max_defect_rate=0.4)


# Each kind's page, and the same rule with `min_samples` past what its window can hold.
PAGES: dict[str, Callable[..., bool]] = {
    "baseline": lambda **t: _regression("window", **t),
    "cohorts": _cohorts,
    "max_defect_rate": _absolute,
    "slo": _slo,
}


def test_every_kind_is_held_here() -> None:
    assert set(PAGES) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(PAGES))
def test_no_kind_pages_on_fewer_verdicts_than_its_min_samples(kind: str) -> None:
    pages = PAGES[kind]
    assert pages(min_samples=30)
    assert not pages(min_samples=100_000)


def test_the_terms_of_a_rule_are_what_its_config_says() -> None:
    rule = Rule.of(
        RegressionRule(
            name="r",
            evaluator="groundedness",
            window="60s",
            min_samples=50,
            min_increase=0.04,
            baseline=AlertBaseline(window="10m", min_samples=200, accept_after="1d"),
        ),
        "90d",
        {},
    )
    terms = rule.terms
    assert (terms.window_s, terms.budget_s, terms.min_samples) == (60.0, 90 * 86_400.0, 50)
    assert (terms.baseline_s, terms.baseline_samples, terms.accept_after_s) == (600, 200, 86_400)
    # An absolute rise: the same at every level.
    assert [terms.rise(level) for level in (0.01, 0.5)] == [0.04, 0.04]
    assert [terms.margin(level) for level in (0.01, 0.5)] == [0.02, 0.02]
    assert terms.level(15.0) == pytest.approx(15.0 / (90 * 86_400.0))
    assert Terms(60.0, 3600.0).level(15.0, looks=3) == pytest.approx(15.0 / 3600 / 3)
