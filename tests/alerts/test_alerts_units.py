"""What a regression rule takes as one piece of evidence: a request asked again (its
fingerprint), and conversation ids that are no conversations (one constant id, the pod
that served the request, a recycled pool, a user over days), which the rule sets aside.

The engine reads an injected clock; verdict streams are deterministic.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from harness.production_streams import START
from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest
from monitor.alerts.kinds import Decision, Entry
from monitor.alerts.rule import Origin
from monitor.component import Evaluated
from monitor.config import Config
from monitor.evidence.counts import NOTHING, Arrival, Moments, Unit
from monitor.evidence.history import Expectation, History
from monitor.evidence.sequential import SequentialTest, bets
from monitor.evidence.terms import Terms
from monitor.evidence.units import Units
from monitor.exporters.results_file import results_line
from monitor.records import ContextDoc, RagRecord
from monitor.records.fingerprint import request_fingerprint
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, gauge, question, verdict
from tests.alerts.test_alerts_sequential import RULE
from tests.alerts.test_attribution import healthy as attributed_healthy
from tests.alerts.test_attribution import make as make_attributed

# Statistical behaviour on the injected clock: the scorecard tier (tests/conftest.py).
pytestmark = pytest.mark.scorecard
INTERVAL = 15.0
MIN_INCREASE = 0.03
PASSED = {"local_groundedness": verdict("local_groundedness", True)}
FAILED = {"local_groundedness": verdict("local_groundedness", False)}


def _record(n: int, *, query: str | None = None, conversation: str | None = None) -> RagRecord:
    return RagRecord(
        request_id=f"r{n}",
        trace_id=f"{n + 1:032x}",
        service="shop",
        query=query if query is not None else question(n),
        retrieved_context=(ContextDoc(content="The kettle has a two year warranty."),),
        response="Two years.",
        conversation=conversation,
    )


class Traffic:
    """`per_s` requests a second at a defect rate, judged every `INTERVAL` seconds."""

    def __init__(self, per_s: int = 4) -> None:
        self.clock = Clock()
        self.telemetry: Telemetry = create_telemetry()
        self.engine = AlertEngine(
            [RULE], self.telemetry, evaluation_interval_s=INTERVAL, clock=self.clock
        )
        self.per_s = per_s
        self.n = 0
        self.pages: list[tuple[float, dict[str, str]]] = []

    def run(
        self,
        seconds: float,
        rate: float,
        *,
        conversation: str | None = None,
        burst: tuple[str, bool, int] | None = None,
        burst_conversation: str | None = None,
    ) -> None:
        """`seconds` of traffic at `rate`; with `burst` (a question, whether it fails, how
        many a second), that question sent over and over on top; `conversation` and
        `burst_conversation` name what id every request of the traffic and of the burst
        carries (`{n}` in it: the request's number). The traffic's requests are counted
        from their `Origin` (distinct: a fingerprint each), the burst's from records (their
        fingerprint is what is tested); the attribution sees the burst's records alone."""
        for _ in range(int(seconds / INTERVAL)):
            for _ in range(int(self.per_s * INTERVAL)):
                defect = math.floor((self.n + 1) * rate) > math.floor(self.n * rate)
                self.n += 1
                conv = conversation.format(n=self.n) if conversation is not None else None
                self._count(Origin("shop", conversation=conv, fingerprint=f"{self.n:016x}"), defect)
            if burst is not None:
                text, failing, per_s = burst
                for _ in range(int(per_s * INTERVAL)):
                    self.n += 1
                    # Near-identical: another number in it each time, other spacing.
                    query = f"{text}  #{self.n}"
                    conv = None
                    if burst_conversation is not None:
                        conv = burst_conversation.format(n=self.n)
                    self._emit(_record(self.n, query=query, conversation=conv), failing)
            self.clock.now += INTERVAL
            for alert in self.engine.evaluate():
                if alert.status == "firing" and alert.rule == RULE.name:
                    self.pages.append((self.clock.now, dict(alert.annotations)))

    def restarted(self) -> Traffic:
        """Another service's traffic that goes on from this one's state as it is now (its
        engine restored from the state file's contents): two streams that share a start,
        the start replayed once."""
        other = Traffic(self.per_s)
        other.engine.restore(json.loads(json.dumps(self.engine.snapshot())))
        other.clock.now, other.n = self.clock.now, self.n
        other.pages = list(self.pages)
        return other

    def _emit(self, record: RagRecord, defect: bool) -> None:
        self.engine.emit(
            [Evaluated(record, {"local_groundedness": verdict("local_groundedness", not defect)})]
        )
        self._judge_when_due()

    def _count(self, origin: Origin, defect: bool) -> None:
        """A verdict counted as `emit` counts a record's, from `origin` (no record built)."""
        self.engine.count_results(origin, FAILED if defect else PASSED, self.clock.now)
        self._judge_when_due()

    def _judge_when_due(self) -> None:
        if self.engine.evaluation_due:
            self.pages.extend(
                (self.clock.now, dict(a.annotations))
                for a in self.engine.evaluate()
                if a.status == "firing" and a.rule == RULE.name
            )


# -- the fingerprint -----------------------------------------------------------------------


def test_near_identical_requests_share_a_fingerprint_and_other_questions_do_not() -> None:
    a = _record(1, query="How long is the WARRANTY on order 1234?")
    b = _record(2, query="how long is the warranty on order 98  ?!")
    other_question = _record(3, query="Who makes the kettle?")
    other_context = a.model_copy(
        update={"retrieved_context": (ContextDoc(content="The toaster: one year."),)}
    )
    fingerprint = request_fingerprint(a)
    assert fingerprint is not None and len(fingerprint) == 16
    assert request_fingerprint(b) == fingerprint
    assert request_fingerprint(other_question) != fingerprint
    assert request_fingerprint(other_context) != fingerprint
    assert request_fingerprint(a.model_copy(update={"query": None})) is None


def test_the_fingerprint_of_a_huge_request_is_as_short() -> None:
    huge = _record(1, query="why " * 1_000_000)
    fingerprint = request_fingerprint(huge)
    assert fingerprint is not None and len(fingerprint) == 16


# -- a burst of one request ----------------------------------------------------------------


def test_a_burst_of_one_failing_request_does_not_page_but_as_many_distinct_ones_do() -> None:
    """Two thousand near-identical failing requests over ten minutes on a service that did
    not change are one piece of evidence; two thousand distinct failing requests are a
    regression."""
    burst = Traffic(per_s=1)
    burst.run(2 * 3600, 0.2)
    distinct = burst.restarted()
    burst.run(600, 0.2, burst=("Is my kettle covered by the warranty?", True, 3))
    burst.run(1800, 0.2)
    assert burst.pages == []

    distinct.run(600, 0.2 + 0.8 * 3 / 7)  # as many failing verdicts, each its own request
    assert distinct.pages


def test_a_burst_of_one_request_each_with_a_fresh_session_id_does_not_page() -> None:
    """The fingerprint is read whatever id a verdict carries: a client that sends one
    failing request two thousand times, each with a session id of its own, is one piece
    of evidence, as without ids; the service's own conversations are judged as before."""
    burst = Traffic(per_s=1)
    burst.run(2 * 3600, 0.2, conversation="c-{n}")
    distinct = burst.restarted()
    kettle = ("Is my kettle covered by the warranty?", True, 3)
    burst.run(600, 0.2, conversation="c-{n}", burst=kettle, burst_conversation="fresh-{n}")
    burst.run(1800, 0.2, conversation="c-{n}")
    assert burst.pages == []

    distinct.run(600, 0.2 + 0.8 * 3 / 7, conversation="c-{n}")
    assert distinct.pages


def test_a_page_says_how_many_distinct_requests_it_rests_on() -> None:
    traffic = Traffic(per_s=1)
    traffic.run(2 * 3600, 0.2)
    traffic.run(1200, 0.45, burst=("Is my kettle covered by the warranty?", True, 2))
    assert traffic.pages
    _, notes = traffic.pages[0]
    samples, distinct = int(notes["samples"]), int(notes["distinct_requests"])
    assert 0 < distinct < samples
    assert f"{distinct:,} distinct requests" in notes["description"]


def test_one_question_asked_over_and_over_with_verdicts_of_its_own_keeps_its_evidence() -> None:
    """A few questions asked again and again (an FAQ), whose verdicts differ from asking to
    asking, are not one piece of evidence: their repeats are measured as unalike, and a
    doubling pages."""
    traffic = Traffic()
    # What `emit` reads of each question's record (its fingerprint), read once.
    faq = [Origin.of(_record(k, query=f"faq {chr(ord('a') + k)}")) for k in range(4)]
    for phase, rate in ((2 * 3600, 0.2), (900, 0.4)):
        for _ in range(int(phase / INTERVAL)):
            for _ in range(int(traffic.per_s * INTERVAL)):
                defect = math.floor((traffic.n + 1) * rate) > math.floor(traffic.n * rate)
                traffic.n += 1
                traffic._count(faq[traffic.n % 4], defect)
            traffic.clock.now += INTERVAL
            traffic.pages.extend(
                (traffic.clock.now, dict(a.annotations))
                for a in traffic.engine.evaluate()
                if a.status == "firing"
            )
        if rate == 0.2:
            assert traffic.pages == []
    assert traffic.pages


# -- conversation ids that are none --------------------------------------------------------


# At a request a second (`ID_PER_S`): the statistics of these streams are the scorecard's
# (its healthy id streams and id corners); what is held here is the wiring: the set-aside,
# said once, in the gauge, and the page that follows.
ID_PER_S = 1
IDS: dict[str, Callable[[int], str]] = {
    "one constant id": lambda n: "everyone",
    "ids = pods": lambda n: f"pod-{n % 8}",
    "a recycled pool": lambda n: f"slot-{n % 1000}",
    # Conversations of 10 requests, a slot back after 1,250 s: judged by its sessions.
    "a pool reused after a pause": lambda n: f"slot-{(n // 10) % 125}",
}


@pytest.mark.parametrize("ids", list(IDS))
def test_ids_that_are_no_conversations_are_set_aside_said_once_and_a_doubling_pages(
    ids: str, caplog: pytest.LogCaptureFixture
) -> None:
    traffic = Traffic(per_s=ID_PER_S)
    with caplog.at_level(logging.WARNING, logger="monitor.evidence.units"):
        # A recycled slot is known once it spans more than a unit may last (6 h).
        _steps(traffic, 7 * 3600, 0.2, IDS[ids])
        assert traffic.pages == []
        assert _fallback(traffic) == 1
        if ids != "a pool reused after a pause":  # judged by its sessions: its hours stand
            # The history reclassified (tests/alerts/test_ids_reclassified.py): every clean
            # verdict counts as one without a conversation, and no unit of these ids is left
            # to measure a correlation from.
            rows = _history_rows(traffic.engine.snapshot())
            assert rows and all(row[6] == row[0] and row[8] == 0 for row in rows)
        start = traffic.clock.now
        _steps(traffic, 1800, 0.4, IDS[ids])
    said = [r for r in caplog.records if "set aside" in r.getMessage()]
    assert len(said) == 1
    assert traffic.pages
    when, notes = traffic.pages[0]
    assert when - start <= 600
    assert float(notes["increase"]) >= MIN_INCREASE / 2


def _history_rows(saved: Any) -> list[list[float]]:
    """Every bucket row of the regression rule's history in an engine's `snapshot`, as
    saved: [N, D, Q, RN, RD, RQ, SN, SD, UN, M2, DD, ND, M3] (SN, SD: the verdicts without
    a conversation; from UN on: the conversations' sums)."""
    found: list[list[float]] = []
    if isinstance(saved, dict):
        if "buckets" in saved and "origin" in saved:
            return [[*row[1:], *[0.0] * (14 - len(row))] for row in saved["buckets"]]
        for value in saved.values():
            found += _history_rows(value)
    return found


def _fallback(traffic: Traffic) -> float | None:
    return gauge(traffic.telemetry, "alert_conversation_fallback", service="shop", rule=RULE.name)


def _steps(traffic: Traffic, seconds: float, rate: float, id_of: Callable[[int], str]) -> None:
    """Distinct requests (a fingerprint each), each with the conversation id `id_of` its
    number: what `emit` reads of such records (`Origin.of`), without building them."""
    for _ in range(int(seconds / INTERVAL)):
        for _ in range(int(traffic.per_s * INTERVAL)):
            defect = math.floor((traffic.n + 1) * rate) > math.floor(traffic.n * rate)
            traffic.n += 1
            origin = Origin("shop", conversation=id_of(traffic.n), fingerprint=f"{traffic.n:016x}")
            traffic._count(origin, defect)
        traffic.clock.now += INTERVAL
        traffic.pages.extend(
            (traffic.clock.now, dict(a.annotations))
            for a in traffic.engine.evaluate()
            if a.status == "firing"
        )


def test_real_conversations_are_not_set_aside() -> None:
    traffic = Traffic(per_s=ID_PER_S)
    _steps(traffic, 4 * 3600, 0.2, lambda n: f"c{n // 10}")  # conversations of 10 turns
    assert _fallback(traffic) == 0
    assert traffic.pages == []


def test_a_user_id_over_days_is_no_conversation() -> None:
    units = Units(600.0)
    levels = [0.0, 1.0]
    now = 0.0
    # 50 users back every few minutes for a day and more.
    for k in range(40_000):
        now += 2.5
        units.add(k % 50, None, [1.0, 0.0], levels, now)
    assert units.fallback
    fresh = Units(600.0)
    for k in range(40_000):
        fresh.add(k // 10, None, [1.0, 0.0], levels, 2.5 * k)
    assert not fresh.fallback


def test_the_set_aside_survives_a_restart_of_the_units() -> None:
    units = Units(600.0)
    for k in range(200):
        units.add(1, None, [1.0, 0.0], [0.0, 1.0], float(k))
    assert units.fallback
    again = Units(600.0)
    again.restore(units.snapshot())
    assert again.fallback


# -- no page says +0.00 --------------------------------------------------------------------


def test_a_statistic_past_the_budget_on_evidence_that_did_not_rise_does_not_page() -> None:
    """The regression kind pages only when the evidence it names rose by at least half of
    `min_increase` over the expectation: a page saying "+0.00" is never sent."""
    clock = Clock()
    engine = AlertEngine([RULE], create_telemetry(), evaluation_interval_s=INTERVAL, clock=clock)
    kind = engine._kinds[0]
    entry = Entry(kind.new_state(), None)
    state = entry.state
    for k in range(int(3 * 3600 / INTERVAL)):
        clock.now += INTERVAL
        for j in range(60):
            kind.add(
                state, [0.0, 1.0] if (k * 60 + j) % 5 == 0 else [1.0, 0.0], None, clock.now, False
            )
        kind.advance(state, clock.now, False)
        kind.judge({"": entry}, clock.now)
    test = state.judging.sequential
    assert isinstance(test, SequentialTest)
    # A statistic far past the budget, on evidence at the expected rate.
    test.log_wealth = [60.0] * len(test.log_wealth)
    test.runs = [30.0] * len(test.runs)
    test.evidence = [Moments(5_000, 1_000.0, 1_000.0)] * len(test.evidence)
    kind.advance(state, clock.now + 1, False)
    judgment = kind.judge({"": entry}, clock.now + 1)[""]
    assert judgment.decision is Decision.HOLD
    expected = judgment.reference.mean
    assert abs(judgment.current.mean - expected) < MIN_INCREASE / 2
    # The same statistic on evidence that rose pages.
    test.log_wealth = [60.0] * len(test.log_wealth)
    test.runs = [30.0] * len(test.runs)
    test.evidence = [Moments(5_000, 1_500.0, 1_500.0)] * len(test.evidence)
    kind.advance(state, clock.now + 2, False)
    assert kind.judge({"": entry}, clock.now + 2)[""].decision is Decision.FIRE


def test_a_request_s_repeats_are_predicted_with_their_own_correlation() -> None:
    """Alike repeats (a burst) carry a correlation near 1: after the first, a repeat's
    verdict adds nothing to the statistic."""
    units = Units(600.0)
    levels = [0.0, 1.0]
    arrivals = []
    for k in range(200):
        arrival, _ = units.add(None, 7, [0.0, 1.0], levels, float(k))
        arrivals.append(arrival)
    assert arrivals[0] is None  # the first asking is a verdict of its own
    last = arrivals[-1]
    assert last is not None and last.rho is not None and last.rho > 0.9
    assert not last.counted
    expected = Expectation(0.2, 0.16, 1e-6, 100_000, kappa=1.0, rho=0.0, rho_bound=0.0)
    judged = bets(expected, Terms(60.0, 90 * 86_400.0, min_increase=0.03))
    assert judged is not None
    assert max(abs(r) for r in judged.log_ratios([0.0, 0.0], [last])) < 1e-3


# -- clustering nobody declared -------------------------------------------------------------


def _history(wander: float, seed: int = 5) -> History:
    """Two days of hours of 3,600 conversations of 10 verdicts (independent within each)
    about an hourly rate that wanders about 0.3 by `wander` (sd) from hour to hour."""
    rng = np.random.default_rng(seed)
    history = History(60 * 3_600.0, "none", 1, 90 * 86_400.0)  # hourly buckets
    for hour in range(48):
        rate = 0.3 + rng.normal(0.0, wander)
        fails = rng.binomial(10, rate, 3_600)
        t = hour * 3_600.0 + 1.0
        history.add(t, Moments(36_000, float(fails.sum()), float(fails.sum())), NOTHING, rise=False)
        for d in fails.tolist():
            history.add_unit(t, Unit(10, float(d), float(d), conversation=True))
    return history


def test_hour_to_hour_wander_that_conversations_do_not_explain_tempers_the_evidence() -> None:
    """A topic mix that wanders moves every conversation's rate with the hour: the
    conversations look independent about their hour, but the hours vary far more than
    36,000 verdicts would. The history measures that excess from all verdicts' hourly
    rates, widens its error and tempers every conversation's evidence by it."""
    steady = _history(0.0).expectation(48 * 3_600.0, 500)
    wandering = _history(0.01).expectation(48 * 3_600.0, 500)
    assert steady is not None and wandering is not None
    assert steady.excess < 1.5
    # 1 + 36,000 x 0.01^2 / 0.21, about 18, as its second differences see it.
    assert wandering.excess > 8
    assert wandering.se2 > 5 * steady.se2
    arrival = Arrival(1, 1.0, 1.0, 0, 0.0)
    calm, tempered = (
        bets(e, Terms(60.0, 90 * 86_400.0, min_increase=0.03)) for e in (steady, wandering)
    )
    assert calm is not None and tempered is not None
    assert (
        tempered.log_ratios([0.0, 0.0], [arrival])[0]
        < calm.log_ratios([0.0, 0.0], [arrival])[0] / 5
    )


# -- the fingerprint through results lines and backtest -------------------------------------


def _rows(fingerprinted: bool) -> list[tuple[str, dict[str, object]]]:
    """Three hours of distinct requests at 0.2, a verdict a second, and on top of them 2,000
    copies of one failing request over ten minutes (with their fingerprint, or without one:
    as if each were its own)."""
    base = {"service": "shop", "evaluator": "local_groundedness", "revision": "r1"}
    rows: list[dict[str, object]] = [
        {**base, "time": START + k, "outcome": "fail" if k % 5 == 0 else "pass"}
        for k in range(3 * 3_600)
    ]
    for k in range(2_000):
        row = {**base, "time": START + 7_200 + 0.3 * k, "outcome": "fail"}
        if fingerprinted:
            row["fingerprint"] = "9f0c1d2e3a4b5c6d"
        rows.append(row)
    rows.sort(key=lambda row: float(str(row["time"])))
    return [(f"row {i}", row) for i, row in enumerate(rows)]


def _backtest_config() -> Config:
    return Config.model_validate(
        {
            "alerts": {
                "evaluation_interval_s": 15,
                "rules": [RULE.model_dump(exclude_none=True)],
            }
        }
    )


def test_backtest_reads_the_fingerprint_and_a_burst_of_one_request_does_not_page() -> None:
    quiet = Backtest(_backtest_config())
    assert [e for e in quiet.run(_rows(fingerprinted=True)) if e.status == "firing"] == []
    assert not quiet.summary.refused
    loud = Backtest(_backtest_config())
    assert [e for e in loud.run(_rows(fingerprinted=False)) if e.status == "firing"]


def test_backtest_refuses_a_fingerprint_longer_than_it_writes() -> None:
    replay = Backtest(_backtest_config())
    row = {
        "time": START,
        "service": "shop",
        "evaluator": "local_groundedness",
        "outcome": "fail",
        "fingerprint": "f" * 65,
    }
    list(replay.run([("row 1", row)]))
    assert replay.summary.refused["invalid"] == 1
    assert "fingerprint: longer than 64 characters" in replay.summary.refusals[0]


def test_a_results_line_carries_the_fingerprint_the_engine_uses() -> None:
    record = _record(1, query="How long is the warranty?")
    line = results_line(record, {"local_groundedness": verdict("local_groundedness", True)})
    assert line["fingerprint"] == request_fingerprint(record)
    assert Origin.of(record).fingerprint == line["fingerprint"]


# -- a decoy cannot hold the Where alert ------------------------------------------------------


def test_a_decoy_slice_that_rose_first_gives_way_to_the_later_rise_as_a_new_where_alert() -> None:
    """One model's verdicts rise first (a decoy: a sender forging failures under it) and the
    page names it; then the decoy goes quiet and another model carries a larger rise while
    the page still fires. The slice the page names is a new `Where` alert, and the decoy's
    is resolved: a decoy cannot keep the pager looking at the wrong slice."""
    stream, _ = make_attributed()
    stream.run(12 * 60, attributed_healthy)
    stream.run(3 * 60, lambda m, r, s, b: 0.7 if m == "m2" else 0.2)
    first = stream.wheres()[0]
    assert (first.labels["dimension"], first.labels["value"]) == ("model", "m2")
    stream.run(4 * 60, lambda m, r, s, b: 0.9 if m == "m3" else 0.2)
    assert stream.engine.firing() == [("hallucination", "shop")]
    named = {(a.labels["dimension"], a.labels["value"]) for a in stream.wheres()}
    assert ("model", "m3") in named
    resolved = [(a.labels["value"], a.starts_at) for a in stream.wheres("resolved")]
    assert ("m2", first.starts_at) in resolved
