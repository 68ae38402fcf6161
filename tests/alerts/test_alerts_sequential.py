"""The sequential test of regression rules (`test: sequential`, the default) and rules that
measure scores (`measure: scores`).

The engine is driven by a fake clock with deterministic verdict streams (as in
test_alerts_regression.py); the false-page bound of the test itself is checked on seeded
random streams.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.rule import Origin
from monitor.component import Evaluated
from monitor.config import AlertBaseline, RegressionRule
from monitor.evidence.history import Expectation
from monitor.evidence.sequential import MARGIN_SCALE, SequentialTest, bets
from monitor.evidence.terms import Terms
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, gauge
from tests.alerts.test_alerts_regression import INTERVAL, Requests, Stream, make

RULE = RegressionRule(
    name="hallucination_regression",
    evaluator="local_groundedness",
    window="5m",
    min_samples=50,
    # The sequential test on a plain trailing baseline (seasons: test_alerts_production.py).
    baseline=AlertBaseline(window="1h", min_samples=500, season="none"),
    min_increase=0.03,
)


def known(samples: int, mean: float) -> Expectation:
    """An expectation of `mean` learned from `samples` independent verdicts."""
    variance = mean * (1 - mean)
    return Expectation(mean, variance, variance / samples, samples, kappa=1.0, rho=0.0)


def test_the_default_regression_rule_is_sequential() -> None:
    assert RULE.test == "sequential"


def test_steady_rate_stays_quiet_and_a_doubling_pages_before_the_window_test() -> None:
    window_rule = RULE.model_copy(update={"name": "window", "test": "window"})
    engine = AlertEngine([RULE, window_rule], create_telemetry(), clock=(clock := Clock()))
    stream = Requests(engine, clock, per_s=2)
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
    assert notes["description"].endswith("(sequential test, one false page per 90d)")
    assert (
        "over the last " in notes["description"]
        and "against 0.30 expected from the previous 1h (" in (notes["description"])
    )
    assert float(notes["p_value"]) <= 1e-5
    assert float(notes["defect_rate"]) > 0.5  # the evidence: verdicts since the rise


def test_too_little_baseline_means_no_page() -> None:
    """A fresh rule's level is its first `baseline.min_samples` (500) verdicts until its
    history holds as many, or those before a rise among them (a fifth of 500 at least, in
    four 30 s units and more after: `FirstLevel`): before that, nothing to judge a rise
    against."""
    engine, t, clock = make(RULE)
    stream = Stream(engine, clock, per_s=1)
    stream.run(60, 0.10)
    stream.run(60, 0.90)  # 120 verdicts in four units, none past the window
    assert stream.pages() == []
    assert gauge(t, "alert_samples", service="shop", rule=RULE.name, window="baseline") == 0


def test_a_page_holds_for_a_window_and_resolves_when_the_rise_ends() -> None:
    engine, _, clock = make(RULE)
    stream = Requests(engine, clock, per_s=2)
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
    saved = json.loads(path.read_text())["rules"][RULE.name]["services"]["shop"][""]
    assert max(saved["state"]["sequential"]["runs"]) > 0

    second, _, _ = make(RULE, state_path=path, clock=clock)
    await second.start()
    again = Stream(second, clock, per_s=2)
    again.run(120, 0.60)
    assert second.firing() == [(RULE.name, "shop")]
    await second.shutdown(10)


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("runs", [float("nan")] * 8),
        ("runs", [-1.0] * 8),
        ("log_wealth", [1.0] * 3),
        ("evidence", [[1.0, 5, 9]] * 8),
        ("since", "x"),
        (None, "x"),
    ],
)
async def test_a_saved_statistic_that_cannot_be_restored_is_left_out(
    tmp_path: Path, key: str | None, bad: object
) -> None:
    path = tmp_path / "alerts.state"
    first, _, clock = make(RULE, state_path=path)
    Stream(first, clock).run(60, 0.2)
    await first.shutdown(10)
    data = json.loads(path.read_text())
    entry = data["rules"][RULE.name]["services"]["shop"][""]["state"]
    if key is None:
        entry["sequential"] = bad
    else:
        entry["sequential"][key] = bad
    path.write_text(json.dumps(data))
    second, t, _ = make(RULE, state_path=path, clock=clock)
    await second.start()
    assert second.snapshot() == {}
    assert gauge(t, "alert_state_entries_dropped_total", when="load") == 1


def test_a_file_without_statistics_starts_them_at_zero() -> None:
    engine, _, clock = make(RULE)
    Stream(engine, clock).run(60, 0.2)
    snapshot = engine.snapshot()
    entry = snapshot[RULE.name]["services"]["shop"][""]["state"]
    del entry["sequential"]  # as a window rule saved it
    again, _, _ = make(RULE, clock=clock)
    again.restore(snapshot)
    restored = again.snapshot()[RULE.name]["services"]["shop"][""]["state"]
    assert restored["sequential"]["runs"] == [0.0] * 8
    assert restored["current"] == entry["current"]


def test_false_pages_stay_within_the_budget_in_time() -> None:
    """While the mean sits at the null point (a rise of exactly half of min_increase, the
    baseline known), the statistic minus the time elapsed is a martingale, so it reaches
    the budget T within a horizon s with probability at most s / T (Doob's inequality),
    whatever the rate: here streams of 2 and of 20 verdicts a second, each watched for a
    fifth of the budget, in batches of 8 verdicts."""
    rng = np.random.default_rng(7)
    budget, horizon = 4000.0, 800.0
    judged = bets(known(10**9, 0.3), Terms(60.0, budget, min_increase=0.03))
    assert judged is not None
    for per_s in (2, 20):
        crossed, streams = 0, 300
        for _ in range(streams):
            test, now = SequentialTest(), 0.0
            while now < horizon:
                now += 8 / per_s
                defects = rng.binomial(8, judged.null)
                test.update(judged, [8.0 - defects, float(defects)], [], now)
                if test.crossed(budget):
                    crossed += 1
                    break
        assert crossed / streams <= horizon / budget, per_s


def test_the_p_value_falls_fast_on_a_doubling() -> None:
    judged = bets(known(100_000, 0.2), Terms(60.0, 90 * 86400, min_increase=0.03))
    assert judged is not None
    test = SequentialTest()
    for i in range(40):  # 40 batches of 15 verdicts at twice the rate
        test.update(judged, [9.0, 6.0], [], 15.0 * i)
    assert test.p_value() < 1e-5
    assert test.strongest().samples == 600
    assert test.crossed(90 * 86400)  # and past a budget of one false page a quarter


def test_each_null_point_covers_the_baseline_s_own_error() -> None:
    """A baseline of 500 verdicts is not one of 50,000: each alternative's null point sits
    above mu0 + min_increase / 2 by a margin M with M (a - null) = MARGIN_SCALE se^2
    ln(J T), larger for small rises and thin baselines; the rises a thin baseline cannot
    tell from its own error are left out."""
    budget = 90 * 86400
    small = bets(known(500, 0.3), Terms(60.0, budget, min_increase=0.03))
    large = bets(known(50_000, 0.3), Terms(60.0, budget, min_increase=0.03))
    assert small is not None and large is not None
    grid = [0.33, 0.36, 0.42, 0.54, 0.78]  # 0.3 + 0.03 x 2^j below 1
    assert large.alternatives == pytest.approx(grid)
    assert large.slots == (0, 1, 2, 3, 4)
    assert small.alternatives == pytest.approx(grid[3:])  # +0.03 to +0.12 left out
    assert small.slots == (3, 4)
    for judged, n in ((small, 500), (large, 50_000)):
        product = MARGIN_SCALE * 0.21 / n * math.log(budget * len(grid))
        for null, a in zip(judged.nulls, judged.alternatives, strict=True):
            assert (null - 0.315) * (a - null) == pytest.approx(product)
        assert list(judged.nulls) == sorted(judged.nulls, reverse=True)
    # A rise far above the edge needs next to no margin; the thin baseline needs more.
    assert large.nulls[-1] - 0.315 < 0.05 * (0.21 / 50_000) ** 0.5
    assert small.nulls[-1] > large.nulls[-1]


def test_an_alternative_left_out_and_back_keeps_its_own_slot() -> None:
    """The statistic of alternative j stays in slot j whichever alternatives a baseline
    admits: a baseline that grows admits the small ones again without handing them the
    wealth of larger ones."""
    test = SequentialTest()
    thin = bets(known(2_000, 0.3), Terms(60.0, 90 * 86400, min_increase=0.03))
    full = bets(known(200_000, 0.3), Terms(60.0, 90 * 86400, min_increase=0.03))
    assert thin is not None and full is not None
    assert thin.slots[0] > 0 and full.slots[0] == 0
    for i in range(20):  # a run building on the large alternatives
        test.update(thin, [2.0, 6.0], [], 10.0 * i)
    assert test.runs[0] == 0 and test.log_wealth[0] == -math.inf
    built = test.runs[thin.slots[0]]
    assert built > 0
    test.update(full, [2.0, 6.0], [], 200.0)
    assert test.runs[thin.slots[0]] > built  # the same alternative, on
    assert 0 < test.runs[0] < built  # the small one starts afresh


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
                # A distinct request's, as `emit` counts a record's (`Requests`).
                origin = Origin("shop", fingerprint=f"{n:016x}", context=False)
                engine.count_results(origin, scored(score), clock.now)
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
            [
                Evaluated(
                    RagRecord(request_id=f"r{i}", service="shop", response="a"),
                    {"local_groundedness": verdict_only},
                )
            ]
        )
    assert verdict_only.normalized is None
    engine.evaluate()
    assert engine.snapshot() == {}
    assert gauge(t, "alert_samples", service="shop", rule=RULE.name, window="current") is None


def test_a_conversations_later_verdicts_are_judged_against_what_its_earlier_ones_predict() -> None:
    """A conversation's first verdict counts as a verdict alone does; a failure after three
    failures of the same conversation is what they predicted, so it counts for less, and a
    pass then counts against the rise more; without correlation the earlier ones change
    nothing."""
    from dataclasses import replace

    from monitor.evidence.counts import Arrival

    expected = replace(known(100_000, 0.2), rho=0.2, rho_bound=0.2)
    judged = bets(expected, Terms(60.0, 90 * 86400.0, min_increase=0.03))
    assert judged is not None
    alone = judged.log_ratios([0.0, 1.0])
    first = judged.log_ratios([0.0, 0.0], [Arrival(1, 1.0, 1.0, 0, 0.0)])
    assert first == pytest.approx(alone)
    after_failures = judged.log_ratios([0.0, 0.0], [Arrival(1, 1.0, 1.0, 3, 3.0)])
    assert all(0 < later < now for later, now in zip(after_failures, first, strict=True))
    pass_alone = judged.log_ratios([1.0, 0.0])
    pass_after = judged.log_ratios([0.0, 0.0], [Arrival(1, 0.0, 0.0, 3, 3.0)])
    assert all(later < now < 0 for later, now in zip(pass_after, pass_alone, strict=True))
    independent = bets(
        replace(expected, rho_bound=0.0), Terms(60.0, 90 * 86400.0, min_increase=0.03)
    )
    assert independent is not None
    assert independent.log_ratios([0.0, 0.0], [Arrival(1, 1.0, 1.0, 3, 3.0)]) == pytest.approx(
        independent.log_ratios([0.0, 1.0])
    )
