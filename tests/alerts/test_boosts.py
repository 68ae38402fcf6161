"""Boosts raised and lowered by the alert engine (`boost` on regression and cohort rules):
on while a rule's evidence builds or it fires, off when the evidence fades, and off too
whenever the entries that raised it are gone (dropped when they cannot be judged, or their
service's or cohorts' slots given to others). Driven by a fake clock with deterministic
verdict streams; the sampler's side is in tests/trace/test_sampler_boosts.py, the whole
pipeline's in test_boost_pipeline.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from monitor.alerts import AlertEngine
from monitor.alerts.kinds import Judgment
from monitor.alerts.kinds.regression import Regression
from monitor.alerts.state import StateFile
from monitor.boosts import SamplingBoosts
from monitor.component import Evaluated
from monitor.config import (
    AlertBaseline,
    AlertBoost,
    AlertCohorts,
    AlertRule,
    CohortRule,
    RegressionRule,
    alert_rule,
    validation_problems,
)
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, gauge, question, verdict
from tests.alerts.test_alerts_cohorts import Traffic
from tests.alerts.test_alerts_regression import Stream

EVALUATOR = "local_groundedness"
BOOST = AlertBoost(sample_rate=0.5, while_p_below=0.05)
REGRESSION = RegressionRule(
    name="grounded_regression",
    evaluator=EVALUATOR,
    window="60s",
    min_samples=50,
    baseline=AlertBaseline(window="10m", min_samples=200),
    min_increase=0.05,
    false_page_every="2h",
    boost=BOOST,
)
CANARY = CohortRule(
    name="grounded_canary",
    evaluator=EVALUATOR,
    cohorts=AlertCohorts(by="version"),
    window="5m",
    min_samples=100,
    false_page_every="2h",
    boost=BOOST,
)


class _Setup:
    def __init__(
        self,
        rule: AlertRule,
        state: Path | None = None,
        clock: Clock | None = None,
        *,
        max_services: int = 50,
        max_versions: int = 20,
    ) -> None:
        self.clock = clock or Clock()
        self.t: Telemetry = create_telemetry(max_services=max_services, max_versions=max_versions)
        self.boosts = SamplingBoosts()
        self.rule = rule
        self.engine = AlertEngine(
            [rule],
            self.t,
            evaluation_interval_s=5.0,
            clock=self.clock,
            boosts=self.boosts,
            state_file=None if state is None else StateFile(str(state), self.t),
        )

    def boosted(self, service: str = "shop") -> bool:
        on = (EVALUATOR, service) in self.boosts.active()
        shown = gauge(self.t, "alert_boost_active", service=service, rule=self.rule.name)
        assert on == (shown == 1), (on, shown)  # the gauge follows the boost
        return on


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.message for r in caplog.records if r.levelno == logging.INFO and text in r.message]


def test_a_regression_rule_boosts_before_it_pages_and_lets_go_when_the_evidence_fades(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="monitor.alerts")
    s = _Setup(REGRESSION)
    stream = Stream(s.engine, s.clock)
    stream.run(720, 0.20)  # the baseline fills; a steady rate raises nothing
    assert not s.boosted() and s.boosts.active() == {}
    for _ in range(60):  # the rate leans up: the boost comes first, no page yet
        stream.run(5, 0.30)
        if s.boosted():
            break
    assert s.boosted() and s.boosts.active() == {(EVALUATOR, "shop"): 0.5}
    assert stream.pages() == [] and s.engine.firing() == []
    (started,) = _logged(caplog, "evidence building (p = ")
    assert started.startswith("alert grounded_regression: evidence building (p = 0.0")
    assert started.endswith("for shop: local_groundedness sampled at 0.5")
    for _ in range(120):  # back to the healthy rate: the evidence fades, never a page
        stream.run(5, 0.20)
        if not s.boosted():
            break
    assert not s.boosted() and s.boosts.active() == {}
    assert stream.pages() == []
    assert _logged(caplog, "back to its rate") == [
        "alert grounded_regression: evidence faded for shop: local_groundedness back to its rate"
    ]


async def test_a_firing_rule_restored_after_a_restart_boosts_at_its_first_evaluation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="monitor.alerts")
    path = tmp_path / "alerts.state"
    first = _Setup(REGRESSION, path)
    await first.engine.start()
    stream = Stream(first.engine, first.clock)
    stream.run(720, 0.20)
    stream.run(120, 0.60)
    assert first.engine.firing() == [(REGRESSION.name, "shop")] and first.boosted()
    await first.engine.shutdown(10)

    caplog.clear()
    second = _Setup(REGRESSION, path, first.clock)
    await second.engine.start()
    assert not second.boosted()  # nothing raised before it judges
    second.engine.evaluate()
    assert second.engine.firing() == [(REGRESSION.name, "shop")] and second.boosted()
    assert _logged(caplog, "sampled at") == [
        "alert grounded_regression: firing for shop: local_groundedness sampled at 0.5"
    ]
    await second.engine.shutdown(10)


def test_an_entry_that_cannot_be_judged_takes_its_boost_with_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="monitor.alerts")
    s = _Setup(REGRESSION)
    stream = Stream(s.engine, s.clock)
    stream.run(720, 0.20)
    stream.run(120, 0.60)
    assert s.boosted()

    def broken(*args: object) -> dict[str, Judgment]:
        raise ValueError("a value no judgment can use")

    monkeypatch.setattr(Regression, "judge", broken)
    s.clock.now += 5
    s.engine.evaluate()
    assert s.engine.snapshot() == {}  # its state dropped
    assert not s.boosted() and s.boosts.active() == {}
    assert _logged(caplog, "back to its rate") == [
        "alert grounded_regression: its state was dropped for shop: local_groundedness back "
        "to its rate"
    ]


def test_a_cohort_rule_boosts_its_service_and_lets_go_when_its_cohorts_lose_their_slots() -> None:
    s = _Setup(CANARY, max_versions=3)
    traffic = Traffic(s.engine, s.clock)
    traffic.run(60, {"v1": 0.10, "v2": 0.40})  # the canary leans up within a minute
    assert s.boosted() and s.boosts.active() == {(EVALUATOR, "shop"): 0.5}
    # The service stops; before any further evaluation, other versions elsewhere take the
    # idle cohorts' slots: nothing of the boosted service is left to judge, or to lower it.
    s.clock.now += 3600
    for version in ("v3", "v4", "v5"):
        s.engine.emit([Evaluated(_record("web", version, 0), _result())])
    assert s.engine.snapshot()[CANARY.name]["services"].keys() == {"web"}
    assert not s.boosted() and s.boosts.active() == {}


def test_a_service_that_loses_its_slot_loses_its_boost() -> None:
    s = _Setup(REGRESSION, max_services=1)
    stream = Stream(s.engine, s.clock)
    stream.run(720, 0.20)
    stream.run(120, 0.60)
    assert s.boosted()
    s.clock.now += 3600  # idle past its windows: the next service takes its slot
    s.engine.emit([Evaluated(_record("web", "", 0), _result())])
    assert s.boosts.active() == {}
    assert gauge(s.t, "alert_boost_active", service="shop", rule=REGRESSION.name) is None


@pytest.mark.parametrize(
    "rule",
    [
        {"evaluator": EVALUATOR, "max_defect_rate": 0.1},
        {"category": "violence", "baseline": {}},
        {"category": "violence", "cohorts": {"by": "version"}},
    ],
)
def test_only_regression_and_cohort_rules_on_an_evaluator_take_a_boost(
    rule: dict[str, object],
) -> None:
    with pytest.raises(ValidationError) as refused:
        alert_rule({"name": "r", **rule, "boost": {"sample_rate": 0.5}})
    # In the file's words (a key another kind takes is refused with the reason).
    problems = validation_problems(refused.value)
    assert any("boost: only a regression or cohort rule" in p for p in problems), problems


def _record(service: str, version: str, n: int) -> RagRecord:
    return RagRecord(
        request_id=f"{service}-{version}-{n}",
        service=service,
        version=version or None,
        query=question(n),
        response="a",
    )


def _result() -> dict[str, EvalResult]:
    return {EVALUATOR: verdict(EVALUATOR, passed=True)}


def test_three_forged_traces_raise_no_cohort_boost() -> None:
    """A sender who forges a version (`service.version=evil`) and three unfaithful answers
    cannot switch on a cohort rule's boost for an honest service: the cohort's evidence
    counts only once it holds the rule's `min_samples`, as a page would."""
    s = _Setup(CANARY)
    for i in range(600):  # an honest service: one version, a fifth of answers failing
        s.engine.emit(
            [Evaluated(_record("shop", "v1", i), {EVALUATOR: verdict(EVALUATOR, i % 5 != 0)})]
        )
    s.engine.evaluate()
    for i in range(3):
        s.engine.emit(
            [Evaluated(_record("shop", "evil", 1000 + i), {EVALUATOR: verdict(EVALUATOR, False)})]
        )
    s.clock.now += 5
    s.engine.evaluate()
    assert not s.boosted() and s.boosts.active() == {}
