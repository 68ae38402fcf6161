"""An evaluator changeover (`monitor.alerts.kinds.regression.Regression.succeed`,
`monitor.alerts.entries`): a regression rule is not blind for a day after its evaluator's
revision changes; a rollout with both revisions live does not restart the entry over and
over. Streams from `harness/production_streams.py` through `rag-monitor backtest`'s engine
on their own simulated time."""

from __future__ import annotations

import functools
import json
import math
import random

import pytest

from harness.production_streams import DAY_S, START, Change, StreamSpec, stream
from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest, Event
from monitor.component import Evaluated
from monitor.config import AlertBaseline, RegressionRule
from monitor.records import RagRecord
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock
from tests.alerts.test_alerts_production import RULE, _verdict, config, pages, replay

# Hours to days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.e2e


def information_limit_s(p0: float, p1: float, rate: float, budget_s: float) -> float:
    divergence = p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0))
    return math.log(rate * budget_s) / divergence / rate


def started(backtest: object) -> float | None:
    registry = backtest.engine._t.registry  # type: ignore[attr-defined]
    value = registry.get_sample_value(
        "rag_monitor_alert_baselines_started_total", {"rule": RULE, "reason": "revision"}
    )
    return float(value) if value is not None else None


# A new detector reads 0.30 where the old one read 0.20, from midnight of day 4; the
# service's defect rate doubles at 03:00.
CHANGE_DAY, STEP_DAY = 4.0, 4.125
LIMIT_S = information_limit_s(0.30, 0.60, 1.0, 90 * DAY_S)
# The four healthy days before the change: the same rows in each stream below.
BEFORE = StreamSpec(rate=1, days=CHANGE_DAY, icc=0.05, ids=False)
# Replayed but their last two minutes: the replay's last evaluation, a minute after its
# last row, comes before the change.
BEFORE_END = START + CHANGE_DAY * DAY_S - 120


@functools.cache
def _before() -> tuple[str, float]:
    """The rule's state after the days before the change, replayed once (as the state
    file holds it), and the backtest's clock then."""
    backtest = Backtest(config(season="day"))
    rows = ((where, row) for where, row in stream(BEFORE) if row["time"] < BEFORE_END)
    assert [e for e in backtest.run(rows) if e.status == "firing"] == []
    assert backtest._clock.now < START + CHANGE_DAY * DAY_S
    return json.dumps(backtest.engine.snapshot()), backtest._clock.now


def from_the_change(spec: StreamSpec) -> tuple[list[Event], Backtest]:
    """`spec`'s rows from the days before its change on (but a minute of healthy rows
    before it), replayed by a backtest restored from them, as a restart would go on."""
    assert spec.seed == BEFORE.seed and (spec.rate, spec.icc, spec.ids) == (1, 0.05, False)
    saved, now = _before()
    backtest = Backtest(config(season="day"))
    backtest._clock.now = now
    backtest.engine.restore(json.loads(saved))
    change = START + CHANGE_DAY * DAY_S
    rows = ((where, row) for where, row in stream(spec) if row["time"] > now)
    events = list(backtest.run(rows))
    assert all(event.time >= change for event in events)
    return events, backtest


def test_a_doubling_three_hours_after_an_evaluator_revision_pages_near_the_limit() -> None:
    spec = StreamSpec(
        rate=1,
        days=4.3,
        icc=0.05,
        ids=False,
        changes=(Change("revision", CHANGE_DAY, 0.30), Change("step", STEP_DAY, 2.0)),
    )
    events, backtest = from_the_change(spec)
    (page, *_) = pages(events)
    assert page.time >= START + STEP_DAY * DAY_S
    assert page.time - (START + STEP_DAY * DAY_S) <= 3 * LIMIT_S
    assert started(backtest) == 1


def test_a_rollout_with_both_revisions_live_starts_one_baseline_and_a_doubling_pages() -> None:
    """10 % -> 50 % -> 100 % of the turns on the new revision over six hours from midnight;
    the defect rate doubles at noon."""
    step = CHANGE_DAY + 0.5
    spec = StreamSpec(
        rate=1,
        days=4.7,
        icc=0.05,
        ids=False,
        changes=(Change("rollout", CHANGE_DAY, 0.30, 0.25), Change("step", step, 2.0)),
    )
    events, backtest = from_the_change(spec)
    assert started(backtest) == 1
    (page, *_) = pages(events)
    assert page.time >= START + step * DAY_S
    assert page.time - (START + step * DAY_S) <= 3 * LIMIT_S


def test_a_healthy_rollout_never_pages() -> None:
    # A revision switched at once on the same stream: test_alerts_production.py.
    change = Change("rollout", 1.5, 0.35, 0.25)
    spec = StreamSpec(rate=1, days=3, icc=0.05, cycle=0.03, ids=False, changes=(change,))
    events, _ = replay(spec, config(season="day", budget="7d"))
    assert pages(events) == []


def test_interleaved_revisions_keep_the_newest_and_a_rollback_replaces_it() -> None:
    rule = RegressionRule(
        name=RULE, evaluator="local_groundedness", window="60s", baseline=AlertBaseline()
    )
    clock = Clock()
    engine = AlertEngine([rule], create_telemetry(), evaluation_interval_s=15, clock=clock)
    record = RagRecord(request_id="r", service="shop", response="x")
    engine.emit([Evaluated(record, _verdict(True, "a"))])
    for i in range(600):  # both live, one a second, for ten minutes
        clock.now += 1
        engine.emit([Evaluated(record, _verdict(i % 5 > 0, "b" if i % 2 else "a"))])
    assert next(iter(engine._entries.values())).revision == "b"
    for _ in range(120):  # "b" is gone: "a" alone for two windows is a rollback
        clock.now += 1
        engine.emit([Evaluated(record, _verdict(True, "a"))])
    assert next(iter(engine._entries.values())).revision == "a"
    assert started(type("B", (), {"engine": engine})) == 2


def test_a_judge_change_read_from_the_fleet_is_a_changeover_not_a_regression() -> None:
    """`alerts.fleet` hands the engine counts with their revision: a judge whose new
    prompt fails 0.05 more of the same answers starts a changeover, and never pages."""
    rule = RegressionRule(
        name=RULE,
        evaluator="local_groundedness",
        baseline=AlertBaseline(season="none", window="6h"),
        false_page_every="7d",
    )
    clock = Clock()
    engine = AlertEngine([rule], create_telemetry(), evaluation_interval_s=15, clock=clock)
    rng = random.Random(3)
    sent = []
    for second in range(int(2 * DAY_S) // 15):
        clock.now += 15
        revision, rate = ("r1", 0.20) if second < DAY_S // 15 else ("r2", 0.25)
        n = 30  # two verdicts a second, read every 15 s
        k = sum(rng.random() < rate for _ in range(n))
        engine.add_counts(RULE, "shop", "", [float(n - k), float(k)], revision)
        sent.extend(engine.evaluate())
    assert [a for a in sent if a.status == "firing"] == []
    entry = next(iter(engine._entries.values()))
    assert entry.revision == "r2"
    assert entry.state.baseline.changeover is None and entry.state.baseline.translated is not None


def test_a_changeover_under_way_survives_a_restart() -> None:
    spec = StreamSpec(
        rate=1, days=4.05, icc=0.05, ids=False, changes=(Change("revision", CHANGE_DAY, 0.30),)
    )
    _, first = from_the_change(spec)
    saved = first.engine.snapshot()
    state = saved[RULE]["services"]["svc-0"][""]["state"]
    assert state["changeover"] is not None
    assert 0 <= state["changeover"][0] - (START + CHANGE_DAY * DAY_S) <= 60
    second = Backtest(config(season="day"))
    # Restored when it was saved, as a restart would be (times later than the clock are
    # clamped to it).
    second._clock.now = first._clock.now
    second.engine.restore(saved)
    assert second.engine.snapshot() == saved
