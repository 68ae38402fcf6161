"""Cohort rules (`cohorts: {by: version|model|route}`): each cohort of a service against the
rest of that service in the same window.

The engine is driven by a fake clock; verdict streams are deterministic (a defect whenever
the running count of `rate * n` steps up), so every assertion is about the rule's logic.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.state import StateFile
from monitor.component import Alert, Evaluated
from monitor.config import AlertCohorts, AlertRule, CohortRule, ConfigError, load_config
from monitor.records import RagRecord
from monitor.telemetry import OVERFLOW, Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, gauge, question, verdict

INTERVAL = 5.0
RULE = CohortRule(
    name="hallucination_canary",
    evaluator="local_groundedness",
    cohorts=AlertCohorts(by="version"),
    window="5m",
    min_samples=100,
    severity="page",
)


class Traffic:
    """`per_s` verdicts a second of simulated time for each cohort, each at its own defect
    rate, judged every `INTERVAL` seconds; every alert the engine sends is kept."""

    def __init__(self, engine: AlertEngine, clock: Clock, per_s: int = 2) -> None:
        self.engine, self.clock, self.per_s = engine, clock, per_s
        self.n: dict[str | None, int] = {}
        self.sent: list[Alert] = []

    def run(self, seconds: float, rates: dict[str | None, float], **record: str) -> None:
        for _ in range(int(seconds / INTERVAL)):
            for version, rate in rates.items():
                for _ in range(int(self.per_s * INTERVAL)):
                    n = self.n[version] = self.n.get(version, 0) + 1
                    defect = math.floor(n * rate) > math.floor((n - 1) * rate)
                    self.engine.emit(
                        [
                            Evaluated(
                                RagRecord(
                                    request_id=f"{version}-{n}",
                                    service=record.get("service", "shop"),
                                    version=version,
                                    model=record.get("model"),
                                    route=record.get("route", ""),
                                    query=question(n),
                                    response="a",
                                ),
                                {
                                    "local_groundedness": verdict(
                                        "local_groundedness", passed=not defect
                                    )
                                },
                            )
                        ]
                    )
            self.clock.now += INTERVAL
            self.sent.extend(self.engine.evaluate())

    def pages(self) -> list[Alert]:
        """The first firing notification of each (service, cohort), not the re-sends."""
        first: dict[tuple[str, str], Alert] = {}
        for alert in self.sent:
            if alert.status == "firing":
                first.setdefault((alert.service, alert.labels["cohort"]), alert)
        return list(first.values())


def make(
    rule: AlertRule = RULE, state_path: Path | None = None, clock: Clock | None = None
) -> tuple[AlertEngine, Telemetry, Clock]:
    t = create_telemetry(max_versions=3)
    clock = clock or Clock()
    state_file = StateFile(str(state_path), t) if state_path is not None else None
    engine = AlertEngine(
        [rule], t, evaluation_interval_s=INTERVAL, clock=clock, state_file=state_file
    )
    return engine, t, clock


def firing(t: Telemetry, cohort: str) -> float | None:
    return gauge(t, "alert_firing", service="shop", rule=RULE.name, severity="page", cohort=cohort)


def test_equal_cohorts_are_quiet_and_a_worse_one_pages_naming_it() -> None:
    engine, t, clock = make()
    traffic = Traffic(engine, clock)
    traffic.run(600, {"v1": 0.3, "v2": 0.3})  # two windows of a high but equal rate
    assert traffic.pages() == []
    assert firing(t, "v1") == 0 and firing(t, "v2") == 0
    traffic.run(120, {"v1": 0.3, "v2": 0.75})
    (page,) = traffic.pages()
    assert (page.rule, page.service, page.labels["cohort"]) == (RULE.name, "shop", "v2")
    assert page.labels["severity"] == "page"
    notes = page.annotations
    assert notes["description"].startswith("defect rate 0.")
    assert " for version v2 against 0.30 for the rest of shop over 5m (" in notes["description"]
    assert float(notes["rest_defect_rate"]) == pytest.approx(0.30, abs=0.01)
    assert float(notes["increase"]) >= 0.03 and float(notes["p_value"]) <= 1e-5
    assert firing(t, "v2") == 1 and firing(t, "v1") == 0
    assert engine.firing() == [(RULE.name, "shop/v2")]
    # The better cohort is not paged for looking better, and the page resolves with v2.
    traffic.run(600, {"v1": 0.3, "v2": 0.3})
    assert [(a.labels["cohort"], a.status) for a in traffic.sent][-1] == ("v2", "resolved")
    assert {a.labels["cohort"] for a in traffic.sent} == {"v2"}


def test_too_little_data_in_a_cohort_means_no_page_and_says_why() -> None:
    engine, t, clock = make()
    traffic = Traffic(engine, clock)
    traffic.run(300, {"v1": 0.2})
    traffic.per_s = 1
    traffic.run(60, {"v1": 0.2, "canary": 1.0})  # 60 verdicts, all defects: short of 100
    assert traffic.pages() == []
    samples = gauge(t, "alert_cohort_samples", service="shop", rule=RULE.name, cohort="canary")
    assert samples == 60
    rate = gauge(t, "cohort_defect_rate", service="shop", rule=RULE.name, cohort="canary")
    assert rate == 1.0


def test_records_without_the_cohort_value_count_in_the_rest_but_never_page() -> None:
    engine, t, clock = make()
    traffic = Traffic(engine, clock)
    traffic.run(300, {None: 0.9, "v1": 0.2})
    assert traffic.pages() == []  # no version: not a cohort of its own
    traffic.run(300, {None: 0.2, "v1": 0.2, "v2": 0.6})
    (page,) = traffic.pages()
    assert page.labels["cohort"] == "v2"
    rest = int(page.annotations["rest_samples"])
    assert rest > int(page.annotations["samples"])  # v1 and the records without a version
    assert gauge(t, "alert_cohort_samples", service="shop", rule=RULE.name, cohort="") == 600


@pytest.mark.parametrize("by", ["model", "route"])
def test_cohorts_by_model_or_route(by: str) -> None:
    rule = RULE.model_copy(update={"cohorts": AlertCohorts(by=by)})  # type: ignore[arg-type]
    engine, _, clock = make(rule)
    traffic = Traffic(engine, clock)
    for _ in range(60):
        traffic.run(INTERVAL, {"v1": 0.2}, **{by: "a"})
        traffic.run(INTERVAL, {"v1": 0.7}, **{by: "b"})
    (page,) = traffic.pages()
    assert page.labels["cohort"] == "b"


def test_cohorts_past_the_cap_count_in_the_rest() -> None:
    engine, t, clock = make()  # three version slots
    traffic = Traffic(engine, clock)
    traffic.run(300, {"v1": 0.2, "v2": 0.2, "v3": 0.2, "v4": 0.9})
    assert traffic.pages() == []
    folded = gauge(t, "alert_cohort_samples", service="shop", rule=RULE.name, cohort=OVERFLOW)
    assert folded == 600


def test_services_have_their_own_cohorts() -> None:
    engine, _, clock = make()
    traffic = Traffic(engine, clock)
    for _ in range(60):
        traffic.run(INTERVAL, {"v1": 0.2, "v2": 0.2}, service="a")
        traffic.run(INTERVAL, {"v1": 0.2, "v2": 0.7}, service="b")
    assert [(a.service, a.labels["cohort"]) for a in traffic.pages()] == [("b", "v2")]


async def test_a_firing_cohort_survives_a_restart_and_resolves_later(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state"
    first, _, clock = make(state_path=path)
    await first.start()
    traffic = Traffic(first, clock)
    traffic.run(300, {"v1": 0.2, "v2": 0.2})
    traffic.run(120, {"v1": 0.2, "v2": 0.8})
    assert first.firing() == [(RULE.name, "shop/v2")]
    await first.shutdown(10)
    saved = json.loads(path.read_text())
    assert set(saved["rules"][RULE.name]["services"]["shop"]) == {"v1", "v2"}

    second, t, _ = make(state_path=path, clock=clock)
    await second.start()
    assert second.firing() == [(RULE.name, "shop/v2")]
    again = Traffic(second, clock)
    again.n = traffic.n
    again.run(INTERVAL, {"v1": 0.2, "v2": 0.8})
    assert firing(t, "v2") == 1
    again.run(600, {"v1": 0.2, "v2": 0.2})
    assert [a.status for a in again.sent][-1] == "resolved"
    await second.shutdown(10)


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        (
            "{name: r, evaluator: e, cohorts: {by: version}, baseline: {}}",
            "exactly one of max_defect_rate, baseline or cohorts",
        ),
        ("{name: r, evaluator: e, cohorts: {by: tenant}}", "alerts.rules.0.cohorts.by"),
        ("{name: r, evaluator: e, cohorts: {}}", "alerts.rules.0.cohorts.by"),
        (
            "{name: r, evaluator: e, cohorts: {by: version}, test: sequential}",
            "only a rule with a baseline takes a test",
        ),
        (
            "{name: r, category: violence, cohorts: {by: model}, measure: scores}",
            "scores are an evaluator's",
        ),
    ],
)
def test_check_config_rejects_bad_cohort_rules(tmp_path: Path, rule: str, problem: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"alerts: {{rules: [{rule}]}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert problem in "; ".join(caught.value.problems)


def test_cohort_rule_defaults_are_the_regression_rules() -> None:
    rule = CohortRule(name="r", evaluator="e", cohorts=AlertCohorts(by="version"))
    assert (rule.window, rule.min_samples, rule.min_increase, rule.false_page_every) == (
        "30m",
        100,
        0.03,
        None,
    )
    assert rule.test is None and rule.measure == "verdicts"


def test_a_record_carries_its_version_into_the_results_line() -> None:
    """Kafka JSON and replay records name it in the native schema; the results line writes
    it beside the service (traces: tests/alerts/test_alerts_cohorts_e2e.py)."""
    from monitor.exporters.results_file import results_line
    from monitor.records import parse_record

    native = parse_record({"service": "shop", "version": "1.4.2", "request": "q", "response": "a"})
    qa = parse_record({"question": "q", "answer": "a", "version": "2.0"})
    assert (native.version, qa.version) == ("1.4.2", "2.0")
    assert parse_record({"request": "q", "response": "a"}).version is None
    line = results_line(native, {"local_groundedness": verdict("local_groundedness", True)})
    assert list(line)[:5] == ["request_id", "trace_id", "time", "service", "version"]
    assert line["version"] == "1.4.2"


def test_a_version_that_takes_all_the_traffic_stays_paged_until_its_rate_comes_back() -> None:
    """Issue 69 item 2: a canary paged, then rolled out to everyone: no rest is left, and
    the page is judged against the rest as it was before, not resolved by its absence;
    issue 103 item 1: however long that lasts, until the version's rate comes back."""
    engine, _, clock = make()
    traffic = Traffic(engine, clock)
    traffic.run(600, {"v1": 0.3})
    traffic.run(120, {"v1": 0.3, "v2": 0.75})
    assert [a.labels["cohort"] for a in traffic.pages()] == ["v2"]
    traffic.run(1800, {"v2": 0.75})  # the full rollout: six windows without v1
    assert engine.firing() == [(RULE.name, "shop/v2")]
    assert {a.status for a in traffic.sent} == {"firing"}  # re-sent, never resolved
    last = traffic.sent[-1].annotations
    assert last["description"].startswith(
        "version v2 is all of the service's traffic: the page holds on the rest as last seen "
        "until its rate comes back to it; defect rate 0.75 for version v2 against 0.30 for "
        "the rest of shop before version v2 took all of its traffic (last seen "
    )
    assert float(last["rest_defect_rate"]) == pytest.approx(0.30, abs=0.01)
    # The state file keeps the rest as it was.
    again, _, _ = make(clock=clock)
    again.restore(json.loads(json.dumps(engine.snapshot())))
    assert again.firing() == [(RULE.name, "shop/v2")]
    after = Traffic(again, clock)
    after.n = dict(traffic.n)
    after.run(60, {"v2": 0.75})
    assert {a.status for a in after.sent} == {"firing"}
    # Days after v1 was last seen, the page still holds on it (it never resolves against
    # nothing) ...
    clock.now += 3 * 86_400.0
    after.run(600, {"v2": 0.75})
    assert {a.status for a in after.sent} == {"firing"}
    assert after.sent[-1].annotations["rest_defect_rate"] == last["rest_defect_rate"]
    # ... until v2's rate comes back to it.
    after.run(600, {"v2": 0.3})
    (resolved,) = [a for a in after.sent if a.status == "resolved"]
    assert resolved.annotations["description"].startswith(
        "version v2's rate came back to the rest as last seen; defect rate 0.3"
    )
    assert resolved.annotations["rest_defect_rate"] == last["rest_defect_rate"]


def test_a_rollout_that_outran_its_canary_still_pages() -> None:
    """v2 replaces v1 after its verdicts left the window: within an hour of v1's last
    verdicts v2 is compared with them; a version rolled out later is not."""
    engine, _, clock = make()
    traffic = Traffic(engine, clock)
    traffic.run(600, {"v1": 0.3})
    clock.now += 400.0  # nothing for longer than the window: v1's verdicts have left it
    traffic.run(300, {"v2": 0.75})
    (page,) = traffic.pages()
    assert page.labels["cohort"] == "v2"
    engine, _, clock = make()
    late = Traffic(engine, clock)
    late.run(600, {"v1": 0.3})
    clock.now += 3700.0
    late.run(300, {"v2": 0.75})
    assert late.pages() == []
