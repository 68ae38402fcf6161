"""A page never resolves against nothing (issue 103 item 1): a canary version that pages
and then takes all of the service's traffic leaves its regression rule's baseline with no
verdicts to judge against (a fresh start: the rule's first verdicts stand in for its first
hour only) and its cohort rule with no rest. Both pages hold on the level they last judged
against, say so, and resolve once the rate comes back to it.

The engine is the shipped kit's (`deploy/monitor.yaml`), driven through its entry points
(`count`, `evaluate`) on a simulated clock; verdicts are counted in 10 s rows, their
defects deterministic (the running count of `rate * n` stepping up)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from monitor.alerts.engine import AlertEngine
from monitor.alerts.rule import Origin
from monitor.component import Alert
from monitor.config import load_config
from monitor.evidence.history import Expectation
from monitor.evidence.judging import Judging
from monitor.telemetry import telemetry_for

KIT = Path(__file__).resolve().parents[2] / "deploy" / "monitor.yaml"
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
ROW_S = 10.0
PER_S = 10
REGRESSION, CANARY = "hallucination_regression", "hallucination_canary"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class Service:
    """The kit's engine and one service, `shop`, whose versions send `PER_S` verdicts a
    second between them; every alert the engine sends is kept."""

    def __init__(self) -> None:
        config = load_config(KIT, environ={})
        self.clock = Clock()
        self.engine = AlertEngine.from_config(
            config, telemetry_for(config, self.clock), clock=self.clock
        )
        self.interval = config.alerts.evaluation_interval_s
        names = [rule.config.name for rule in self.engine.rules]
        self.rules = [names.index(REGRESSION), names.index(CANARY)]
        self.n: dict[str, float] = {}
        self.next_evaluation = START + self.interval
        self.sent: list[Alert] = []

    def run(self, seconds: float, versions: dict[str, tuple[float, float]]) -> None:
        """`seconds` of traffic: version -> (its share of the verdicts, its defect rate)."""
        end = self.clock.now + seconds
        while self.clock.now < end:
            now = self.clock.now
            for version, (share, rate) in versions.items():
                n = PER_S * ROW_S * share
                before = self.n.get(version, 0.0)
                self.n[version] = before + n
                fails = math.floor((before + n) * rate) - math.floor(before * rate)
                origin = Origin("shop", version=version)
                for i in self.rules:
                    self.engine.count(i, origin, [n - fails, fails], "r1", now)
            self.clock.now = now + ROW_S
            while self.next_evaluation <= self.clock.now:
                self.clock.now, later = self.next_evaluation, self.clock.now
                self.sent.extend(self.engine.evaluate())
                self.clock.now = later
                self.next_evaluation += self.interval

    def firing(self) -> set[str]:
        return {rule for rule, _ in self.engine.firing()}

    def last(self, rule: str, status: str) -> Alert:
        return [a for a in self.sent if a.rule == rule and a.status == status][-1]


def test_a_canary_that_takes_all_the_traffic_keeps_its_pages_until_the_rate_comes_back() -> None:
    shop = Service()
    shop.run(180, {"v1": (1.0, 0.2)})
    shop.run(17 * 60, {"v1": (0.7, 0.2), "v2": (0.3, 0.72)})  # the canary: every answer invented
    assert shop.firing() == {REGRESSION, CANARY}
    # The rollout: v2 takes all of the traffic, its rate still risen, past the hour in which
    # the rule's first verdicts stand in for its baseline (after which it holds none).
    shop.run(2 * 3600, {"v2": (1.0, 0.72)})
    assert shop.firing() == {REGRESSION, CANARY}
    assert {a.status for a in shop.sent if a.rule in (REGRESSION, CANARY)} == {"firing"}
    held = shop.last(REGRESSION, "firing").annotations
    assert held["description"].startswith(
        "the baseline holds too few verdicts to judge against: the page holds on 0.20, the "
        "level it last judged against (2026-01-01T00:59:"
    )
    assert float(held["held_defect_rate"]) == float(held["baseline_defect_rate"])
    assert held["held_since"].startswith("2026-01-01T00:59:")
    assert (
        " for the rest of shop before version v2 took all of its traffic"
        in (shop.last(CANARY, "firing").annotations["description"])
    )
    # A restart keeps the level the page holds on (the state file).
    again = Service()
    again.clock.now, again.next_evaluation, again.n = shop.clock.now, shop.next_evaluation, shop.n
    again.engine.restore(json.loads(json.dumps(shop.engine.snapshot())))
    again.run(10 * 60, {"v2": (1.0, 0.72)})
    assert again.firing() == {REGRESSION, CANARY}
    assert (
        again.last(REGRESSION, "firing").annotations["held_defect_rate"]
        == (held["held_defect_rate"])
    )
    # The rate comes back (the prompt fixed): judged against the held level, both resolve.
    again.run(3600, {"v2": (1.0, 0.2)})
    assert again.firing() == set()
    resolved = again.last(REGRESSION, "resolved").annotations
    assert resolved["description"].startswith(
        "the rate came back to 0.20, the level the page held on while its baseline held too "
        "few verdicts to judge against; defect rate 0.2"
    )
    assert float(resolved["defect_rate"]) < float(held["held_defect_rate"]) + 0.015
    assert float(resolved["baseline_defect_rate"]) == float(held["held_defect_rate"])
    again.last(CANARY, "resolved")


def test_the_level_a_page_holds_on_is_saved_as_the_page_reads_it() -> None:
    """Its time, mean and verdicts; a file that kept the whole expectation restores the
    same three, and one that holds something else is refused."""
    judging = Judging.empty(True, 1)
    judging.expected = Expectation(0.2, 0.16, 1e-4, 500, 2.0, 0.3, 1.5, 0.3, 1.0)
    judging.follow(True, 100.0)
    saved = judging.saved()
    assert saved["judged"] == [100.0, 0.2, 500]
    whole = {**saved, "judged": [100.0, 0.2, 0.16, 1e-4, 500, 2.0, 0.3, 1.5, 0.3, 1.0]}
    for raw in (saved, whole):
        again = Judging.empty(True, 1)
        again.restore(json.loads(json.dumps(raw)))
        assert again.judged == judging.judged
        assert (
            again.judged is not None
            and again.judged.reference() == Expectation(0.2, 0.16, 1e-4, 500, 2.0, 0.3).reference()
        )
    for malformed in ([100.0, 0.2], [100.0, 0.2, 500.5], [-1.0, 0.2, 500]):
        with pytest.raises((TypeError, ValueError)):
            Judging.empty(True, 1).restore({**saved, "judged": malformed})
