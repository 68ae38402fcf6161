"""The sequential test of regression rules (`test: sequential`, the default) and rules that
measure scores (`measure: scores`).

The engine is driven by a fake clock with deterministic verdict streams (as in
test_alerts_regression.py); the false-page bound of the test itself is checked on seeded
random streams.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.sequential import ALTERNATIVES, SequentialTest
from monitor.config import AlertBaseline, AlertRule
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, gauge, record
from tests.alerts.test_alerts_regression import INTERVAL, Stream, make

RULE = AlertRule(
    name="hallucination_regression",
    evaluator="local_groundedness",
    window="5m",
    min_samples=50,
    baseline=AlertBaseline(window="1h", min_samples=500),
    min_increase=0.03,
    confidence=0.99999,
)


def test_the_default_regression_rule_is_sequential() -> None:
    assert RULE.test == "sequential"


def test_steady_rate_stays_quiet_and_a_doubling_pages_before_the_window_test() -> None:
    window_rule = RULE.model_copy(update={"name": "window", "test": "window"})
    engine = AlertEngine([RULE, window_rule], create_telemetry(), clock=(clock := Clock()))
    stream = Stream(engine, clock, per_s=2)
    stream.run(2 * 3600, 0.30)  # two hours of a high but steady rate
    assert stream.pages() == []
    start = clock.now
    stream.run(600, 0.60)
    paged = {a.rule: a for a in stream.pages()}
    assert set(paged) == {RULE.name, "window"}
    sequential, window = paged[RULE.name], paged["window"]
    assert sequential.starts_at < window.starts_at
    assert sequential.starts_at.timestamp() - start <= 180
    notes = sequential.annotations
    assert notes["description"].endswith("(sequential test)")
    assert (
        "over the last " in notes["description"]
        and "against 0.30 over the previous 1h (" in (notes["description"])
    )
    assert float(notes["p_value"]) <= 1e-5
    assert float(notes["defect_rate"]) > 0.5  # the evidence: verdicts since the rise


def test_a_rise_smaller_than_min_increase_does_not_page() -> None:
    engine, _, clock = make(RULE)
    # 45,000 verdicts in the rise's half hour: a fixed test over them would call +0.02
    # significant (z near 9); below min_increase, the sequential test drifts down.
    stream = Stream(engine, clock, per_s=25)
    stream.run(3900, 0.30)
    stream.run(1800, 0.32)
    assert stream.pages() == []


def test_too_little_baseline_means_no_page() -> None:
    engine, t, clock = make(RULE)
    stream = Stream(engine, clock, per_s=1)
    stream.run(480, 0.10)
    stream.run(180, 0.90)  # 360 verdicts have reached the baseline, short of its 500
    assert stream.pages() == []
    assert gauge(t, "alert_samples", service="shop", rule=RULE.name, window="baseline") == 360


def test_a_page_holds_for_a_window_and_resolves_when_the_rise_ends() -> None:
    engine, _, clock = make(RULE)
    stream = Stream(engine, clock, per_s=2)
    stream.run(3900, 0.20)
    stream.run(120, 0.60)
    assert engine.firing() == [(RULE.name, "shop")]
    paged_at = stream.pages()[0].starts_at.timestamp()
    stream.run(60, 0.20)  # the window still holds the rise: firing
    assert engine.firing() == [(RULE.name, "shop")]
    while engine.firing():
        stream.run(INTERVAL, 0.20)
    assert clock.now - paged_at >= 300  # at least one window after the page
    assert [a.status for a in stream.sent][-1] == "resolved"
    resolved = len(stream.sent)
    stream.run(1800, 0.20)  # the statistics restarted at the resolve: quiet again
    assert stream.sent[resolved:] == []


async def test_the_statistics_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "alerts.state"
    first, _, clock = make(RULE, state_path=path)
    await first.start()
    stream = Stream(first, clock, per_s=2)
    stream.run(3900, 0.20)
    stream.run(10, 0.60)  # evidence gathered, not yet a page
    assert first.firing() == []
    await first.shutdown(10)
    saved = json.loads(path.read_text())["rules"][RULE.name]["services"]["shop"]
    assert max(s for s, *_ in saved["sequential"]) > 0

    second, _, _ = make(RULE, state_path=path, clock=clock)
    await second.start()
    again = Stream(second, clock, per_s=2)
    again.run(120, 0.60)
    assert second.firing() == [(RULE.name, "shop")]
    await second.shutdown(10)


@pytest.mark.parametrize(
    "bad", [[[float("nan"), 1, 1, 1]] * 4, [[1.0, 5, 9, 1]] * 4, [[-1.0, 0, 0, 0]] * 4, "x"]
)
async def test_a_saved_statistic_that_cannot_be_restored_is_left_out(
    tmp_path: Path, bad: object
) -> None:
    path = tmp_path / "alerts.state"
    first, _, clock = make(RULE, state_path=path)
    Stream(first, clock).run(60, 0.2)
    await first.shutdown(10)
    data = json.loads(path.read_text())
    data["rules"][RULE.name]["services"]["shop"]["sequential"] = bad
    path.write_text(json.dumps(data))
    second, t, _ = make(RULE, state_path=path, clock=clock)
    await second.start()
    assert second.snapshot() == {}
    assert gauge(t, "alert_state_entries_dropped_total", when="load") == 1


def test_a_file_without_statistics_starts_them_at_zero(tmp_path: Path) -> None:
    engine, _, clock = make(RULE)
    Stream(engine, clock).run(60, 0.2)
    snapshot = engine.snapshot()
    del snapshot[RULE.name]["services"]["shop"]["sequential"]  # as a window rule saved it
    again, _, _ = make(RULE, clock=clock)
    again.restore(snapshot)
    assert again.snapshot()[RULE.name]["services"]["shop"]["sequential"][0][0] == 0


def test_false_pages_stay_within_the_bound() -> None:
    """Healthy streams (the baseline rate exactly known), each watched for `looks`
    evaluations: a bettor starting at any one evaluation reaches p <= alpha with
    probability at most alpha (Ville's inequality), so the share of streams in which the
    test ever pages stays at most `looks` x alpha."""
    rng = random.Random(7)
    alpha, mu, looks, streams, crossed = 1e-4, 0.3, 100, 500, 0
    for _ in range(streams):
        test = SequentialTest()
        for _ in range(looks):
            defects = sum(rng.random() < mu for _ in range(5))
            test.update([5 - defects, defects], [0.0, 1.0], mu, mu * (1 - mu), 0.03)
            if test.p_value() <= alpha:
                crossed += 1
                break
    assert crossed / streams <= looks * alpha
    assert len(ALTERNATIVES) == 4


def test_the_p_value_falls_fast_on_a_doubling() -> None:
    test = SequentialTest()
    for _ in range(40):  # 40 evaluations of 15 verdicts at twice the rate
        test.update([9, 6], [0.0, 1.0], 0.2, 0.16, 0.03)
    assert test.p_value() < 1e-5
    assert test.strongest().samples == 600


def scored(score: float) -> dict[str, EvalResult]:
    return {
        "local_groundedness": EvalResult(
            name="local_groundedness", score=score, normalized=score, passed=score >= 0.5
        )
    }


def test_a_score_rule_pages_on_a_drift_the_verdicts_do_not_show() -> None:
    """Every answer passes (scores above the 0.5 pass mark) but the scores fall from around
    0.9 to around 0.65: a verdict rule cannot see it, a score rule pages."""
    scores = RULE.model_copy(update={"name": "scores", "measure": "scores"})
    engine = AlertEngine([RULE, scores], create_telemetry(), clock=(clock := Clock()))
    rng = random.Random(3)
    sent = []
    n = 0
    for seconds, centre in ((3900, 0.9), (900, 0.65)):
        for _ in range(int(seconds / INTERVAL)):
            for _ in range(10):
                n += 1
                score = min(1.0, max(0.5, rng.gauss(centre, 0.05)))
                engine.emit(record("shop", n), scored(score))
            clock.now += INTERVAL
            sent.extend(engine.evaluate())
    assert [(a.rule, a.status) for a in sent][:1] == [("scores", "firing")]
    assert {a.rule for a in sent} == {"scores"}
    notes = sent[0].annotations
    assert notes["description"].startswith("mean defect score 0.")
    assert float(notes["defect_rate"]) > 0.2
    assert float(notes["baseline_defect_rate"]) == pytest.approx(0.1, abs=0.01)


def test_scores_without_a_normalised_value_are_not_samples() -> None:
    scores = RULE.model_copy(update={"measure": "scores"})
    engine, t, _ = make(scores)
    verdict_only = EvalResult(name="local_groundedness", passed=False)
    for i in range(100):
        engine.emit(
            RagRecord(request_id=f"r{i}", service="shop", response="a"),
            {"local_groundedness": verdict_only},
        )
    assert verdict_only.normalized is None
    engine.evaluate()
    assert engine.snapshot() == {}
    assert gauge(t, "alert_samples", service="shop", rule=RULE.name, window="current") is None
