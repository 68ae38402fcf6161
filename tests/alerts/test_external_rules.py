"""Alert rules on an app's own judge (`external:<name>`, read from its traces): the same
engine, the same kinds and the same false-page budget as the monitor's own evaluators. A
doubling of the app's judge's fail rate pages; a new version of the app's judge (its
provenance version, the verdicts' revision) starts a new baseline and never pages by
itself. Verdicts are read by the extraction's reader from `gen_ai.evaluation.result`
events, as the pipeline reads them, and judged on simulated time."""

from __future__ import annotations

import pytest

from monitor.alerts import AlertEngine
from monitor.component import Alert, Evaluated
from monitor.config import AlertRule, Config
from monitor.extraction import read_verdicts
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.spans import Span, SpanEvent
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

# Statistical behaviour on a simulated clock: hours of verdicts through the engine.
pytestmark = pytest.mark.scorecard

EVALUATOR = "external:faithfulness"
STEP_S = 5.0
PER_STEP = 50  # verdicts every five seconds


def _rules(**rule: object) -> list[AlertRule]:
    config = Config.model_validate(
        {
            "alerts": {
                "evaluation_interval_s": STEP_S,
                "rules": [
                    {
                        "name": "app_judge",
                        "evaluator": EVALUATOR,
                        "window": "60s",
                        "min_samples": 50,
                        "baseline": {"window": "10m", "min_samples": 200},
                        "min_increase": 0.05,
                        "false_page_every": "2h",
                        **rule,
                    }
                ],
            }
        }
    )
    return list(config.alerts.rules)


def _judged(n: int, passed: bool, version: str) -> dict[str, EvalResult]:
    """The app's judge's verdict on request `n`, as the pipeline reads it from its trace."""
    trace_id, span_id = f"{n:032x}", f"{n + 1:016x}"
    event = SpanEvent(
        "gen_ai.evaluation.result",
        n,
        {
            "gen_ai.evaluation.name": "faithfulness",
            "gen_ai.evaluation.score.label": "pass" if passed else "fail",
            "gen_ai.evaluation.evaluator.version": version,
        },
    )
    span = Span(trace_id, span_id, "", "POST /ask", n, n + 1, attributes={}, events=[event])
    record = RagRecord(request_id=str(n), trace_id=trace_id, span_id=span_id, service="shop")
    ((verdicts), *_) = read_verdicts([span], [record]).by_record
    return verdicts


def _run(phases: list[tuple[float, float, str]]) -> tuple[list[Alert], AlertEngine]:
    """`(seconds, fail rate, judge version)` phases through the engine on its own clock."""
    clock = Clock()
    engine = AlertEngine(_rules(), create_telemetry(), evaluation_interval_s=STEP_S, clock=clock)
    n = 0
    sent: list[Alert] = []
    for seconds, rate, version in phases:
        for _ in range(int(seconds / STEP_S)):
            for _ in range(PER_STEP):
                n += 1
                failed = (n % 100) < rate * 100
                record = RagRecord(request_id=str(n), service="shop", response="x")
                engine.emit([Evaluated(record, _judged(n, not failed, version))])
            clock.now += STEP_S
            sent.extend(engine.evaluate())
    return sent, engine


def _started(engine: AlertEngine, reason: str) -> float:
    value = engine._t.registry.get_sample_value(
        "rag_monitor_alert_baselines_started_total", {"rule": "app_judge", "reason": reason}
    )
    return value or 0.0


def test_a_doubling_of_the_app_judges_fail_rate_pages() -> None:
    sent, _ = _run([(900, 0.10, "judge-v1"), (300, 0.20, "judge-v1")])
    firing = [a for a in sent if a.status == "firing"]
    assert firing, "the doubling paged"
    assert {a.rule for a in firing} == {"app_judge"}
    assert firing[0].annotations["evaluator_revision"] == "judge-v1"


def test_a_new_version_of_the_app_judge_starts_a_baseline_and_does_not_page() -> None:
    """The app's new judge reads twice the old one's fail rate on the same traffic."""
    sent, engine = _run([(900, 0.10, "judge-v1"), (600, 0.20, "judge-v2")])
    assert [a for a in sent if a.status == "firing"] == []
    assert _started(engine, "revision") == 1


def test_the_steady_app_judge_never_pages() -> None:
    sent, _ = _run([(1500, 0.10, "judge-v1")])
    assert sent == []


def _engine(rule: dict[str, object]) -> tuple[AlertEngine, Clock]:
    clock = Clock()
    rules = list(
        Config.model_validate(
            {"alerts": {"evaluation_interval_s": STEP_S, "rules": [{"name": "app_judge", **rule}]}}
        ).alerts.rules
    )
    return AlertEngine(rules, create_telemetry(), evaluation_interval_s=STEP_S, clock=clock), clock


def test_a_cohort_rule_names_the_version_whose_app_judge_fails_more() -> None:
    engine, clock = _engine({"evaluator": EVALUATOR, "cohorts": {"by": "version"}})
    sent: list[Alert] = []
    n = 0
    for _ in range(int(1800 / STEP_S)):
        for _ in range(PER_STEP):
            n += 1
            canary = n % 5 == 0
            failed = (n % 100) < (40 if canary else 10)
            version = "2.0-canary" if canary else "1.9"
            record = RagRecord(request_id=str(n), service="shop", response="x", version=version)
            engine.emit([Evaluated(record, _judged(n, not failed, "judge-v1"))])
        clock.now += STEP_S
        sent.extend(engine.evaluate())
    firing = [a for a in sent if a.status == "firing"]
    assert firing and {a.labels.get("cohort") for a in firing} == {"2.0-canary"}


def test_an_slo_rule_burns_on_the_app_judges_fail_rate() -> None:
    engine, clock = _engine(
        {
            "evaluator": EVALUATOR,
            "slo": {
                "objective": 0.9,
                "window": "1d",
                "burn_rates": [{"burn_rate": 2, "long": "10m", "short": "1m"}],
            },
        }
    )
    sent: list[Alert] = []
    n = 0
    for _ in range(int(900 / STEP_S)):
        for _ in range(PER_STEP):
            n += 1
            record = RagRecord(request_id=str(n), service="shop", response="x")
            engine.emit([Evaluated(record, _judged(n, (n % 100) >= 30, "judge-v1"))])
        clock.now += STEP_S
        sent.extend(engine.evaluate())
    assert [a.rule for a in sent if a.status == "firing"][:1] == ["app_judge"]
