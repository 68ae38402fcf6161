"""A page that says where (`monitor.alerts.attribution`): the slice that carries a rise,
none for a rise spread evenly, retriever or generator, the failing traces with their links,
a cohort's page, the `alert_slice` gauge, the log line, and the memory bound.

The engine is driven with a fake clock and real records and results (seeded draws); the
bench (`bench/alert_attribution.py`) measures the same on production-shaped streams.
"""

from __future__ import annotations

import gc
import logging
import random
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.attribution import CAPS, Attribution
from monitor.alerts.backtest import Backtest
from monitor.alerts.describe import log_text
from monitor.alerts.rule import Rule
from monitor.alerts.state import StateFile
from monitor.component import Alert, Evaluated
from monitor.config import (
    AlertBaseline,
    AlertCohorts,
    AlertRule,
    Alerts,
    CohortRule,
    Config,
    RegressionRule,
)
from monitor.exporters.alertmanager import AlertSender
from monitor.records import ContextDoc, RagRecord
from monitor.records.where import DIMENSIONS, Where
from monitor.results import EvalResult
from monitor.shared.labels import SKETCH_BITS
from monitor.telemetry import Telemetry, create_telemetry
from tests.alerts.test_alerts import Clock, question

INTERVAL = 1.0
PER_S = 10
MODELS = ("m1", "m2", "m3")
ROUTES = ("/ask", "/chat")
SOURCES = ("kb", "wiki")
TRACE_URL = "http://tempo:3200/trace/{trace_id}"

RULE = RegressionRule(
    name="hallucination",
    evaluator="local_groundedness",
    baseline=AlertBaseline(window="10m", min_samples=300, season="none"),
    window="60s",
    min_samples=50,
    min_increase=0.05,
    false_page_every="1h",
)


def verdict(name: str, passed: bool) -> EvalResult:
    return EvalResult(name=name, score=float(passed), normalized=float(passed), passed=passed)


@dataclass
class Sent:
    """What one record was: its trace id, values and verdict."""

    trace_id: str
    model: str
    route: str
    source: str
    failed: bool


@dataclass
class Stream:
    """`PER_S` records a second of simulated time, each of a model, route and source drawn
    evenly; `fails(model, route, source, retrieval_failed)` is the chance its groundedness
    verdict fails and `retrieval(model, route, source)` the chance its retrieval fails."""

    engine: AlertEngine
    clock: Clock
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    sent: list[Sent] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    version: str = "1.0"  # every record's, from now on

    def run(
        self,
        seconds: float,
        fails: Callable[[str, str, str, bool], float],
        retrieval: Callable[[str, str, str], float] | None = None,
    ) -> None:
        rng = self.rng
        for _ in range(int(seconds / INTERVAL)):
            for _ in range(PER_S):
                model, route, source = (
                    rng.choice(MODELS),
                    rng.choice(ROUTES),
                    rng.choice(SOURCES),
                )
                bad_retrieval = retrieval is not None and rng.random() < retrieval(
                    model, route, source
                )
                failed = rng.random() < fails(model, route, source, bad_retrieval)
                n = len(self.sent)
                trace_id = f"{n + 1:032x}"
                record = RagRecord(
                    request_id=f"r{n}",
                    trace_id=trace_id,
                    service="shop",
                    version=self.version,
                    route=route,
                    model=model,
                    query=f"How long is the warranty on {question(n)}?",
                    retrieved_context=(
                        ContextDoc(content="Two years.", doc_uri=f"{source}/warranty.md"),
                    ),
                    response="Two years.",
                )
                results = {"local_groundedness": verdict("local_groundedness", not failed)}
                if retrieval is not None:
                    results["local_retrieval"] = verdict("local_retrieval", not bad_retrieval)
                self.engine.emit([Evaluated(record, results)])
                self.sent.append(Sent(trace_id, model, route, source, failed))
            self.clock.now += INTERVAL
            self.alerts.extend(self.engine.evaluate())

    def restart(self, path: Path) -> None:
        """The process stops, saving its state file at `path`; the next one reads it (its
        attribution starts empty)."""
        StateFile(str(path), create_telemetry()).save(self.clock(), self.engine.snapshot())
        t = create_telemetry()
        self.engine = AlertEngine(
            [RULE], t, evaluation_interval_s=INTERVAL, clock=self.clock, trace_url=TRACE_URL
        )
        self.engine.restore(StateFile(str(path), t).load(self.clock(), 86_400.0))

    def pages(self, status: str = "firing") -> list[Alert]:
        return [a for a in self.alerts if a.status == status and a.labels["alertname"] == a.rule]

    def wheres(self, status: str = "firing") -> list[Alert]:
        wheres = [a for a in self.alerts if a.status == status and a.labels["alertname"] != a.rule]
        assert all(a.labels["alertname"] == a.rule + "_where" for a in wheres)
        return wheres

    def page(self) -> Alert:
        pages = self.pages()
        assert pages, "no page"
        return pages[0]


def make(rule: AlertRule = RULE, trace_url: str | None = TRACE_URL) -> tuple[Stream, Telemetry]:
    t = create_telemetry()
    clock = Clock()
    engine = AlertEngine(
        [rule], t, evaluation_interval_s=INTERVAL, clock=clock, trace_url=trace_url
    )
    return Stream(engine, clock), t


def healthy(model: str, route: str, source: str, bad_retrieval: bool) -> float:
    return 0.2


def m2(model: str, route: str, source: str, bad_retrieval: bool) -> float:
    return 0.7 if model == "m2" else 0.2


@dataclass
class Rise:
    """A stream that rose in model m2: what the tests that only read it share."""

    stream: Stream
    telemetry: Telemetry
    rise_from: int  # the first record of the rise
    logged: list[str]  # the engine's warnings during the rise


class Lines(logging.Handler):
    """The messages logged to it (caplog is the test's, not a module fixture's)."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def m2_rise() -> Rise:
    """Twelve healthy minutes, then five of m2 failing at 0.7: one run, read by the tests
    below and changed by none (those that go on from it make their own)."""
    stream, t = make()
    stream.run(12 * 60, healthy)
    assert not stream.alerts, "a healthy stream pages"
    rise_from = len(stream.sent)
    handler = Lines(logging.WARNING)
    engine_log = logging.getLogger("monitor.alerts.engine")
    level = engine_log.level
    engine_log.addHandler(handler)
    engine_log.setLevel(logging.WARNING)
    try:
        stream.run(5 * 60, m2)
    finally:
        engine_log.removeHandler(handler)
        engine_log.setLevel(level)
    return Rise(stream, t, rise_from, handler.lines)


def test_a_rise_in_one_model_names_that_model_with_its_failing_traces(m2_rise: Rise) -> None:
    stream, t, rise_from = m2_rise.stream, m2_rise.telemetry, m2_rise.rise_from
    page = stream.page()
    notes = page.annotations
    assert notes["slice"] == "model=m2"
    assert notes["where"].startswith("model m2: 0.")
    assert "of the excess" in notes["where"]
    assert "at one false page per 1h" in notes["where"]
    # Up to five traces, each a failing m2 record of the rise, with its link.
    by_id = {s.trace_id: s for s in stream.sent}
    ids = notes["trace_ids"].split()
    assert 1 <= len(ids) <= 5
    for trace_id in ids:
        sent = by_id[trace_id]
        assert sent.model == "m2" and sent.failed
        assert stream.sent.index(sent) >= rise_from
    assert notes["trace_urls"].split() == [TRACE_URL.replace("{trace_id}", i) for i in ids]
    assert "changed" not in notes  # the models' shares are as they were before the rise
    # A webhook and Alertmanager get them with the rest of the annotations.
    (posted,) = AlertSender._body("webhook", [page])["alerts"]
    assert posted["annotations"]["slice"] == "model=m2"
    assert page.to_alertmanager()["annotations"] == notes
    # The dashboard's gauge: the named slice's share of the excess, while it fires.
    share = t.registry.get_sample_value(
        "rag_monitor_alert_slice",
        {
            "service": "shop",
            "rule": "hallucination",
            "cohort": "",
            "dimension": "model",
            "value": "m2",
        },
    )
    assert share is not None and 0.5 < share <= 1.5
    # The JSON page lists it as last sent (a re-send says the same with more verdicts).
    last = stream.pages()[-1]
    (listed,) = stream.engine.attribution.firing_alerts()
    assert listed["annotations"] == last.annotations
    assert listed["rule"] == "hallucination" and listed["service"] == "shop"
    first = listed["attribution"]["slices"][0]
    assert (first["dimension"], first["value"]) == ("model", "m2")
    assert first["defect_rate"] > first["expected"] + 0.3
    assert [t["trace_id"] for t in listed["attribution"]["traces"]] == (
        last.annotations["trace_ids"].split()
    )


def test_a_page_that_names_a_slice_sends_its_where_alert_with_it(m2_rise: Rise) -> None:
    """The pager hears of the slice as an alert of its own (Alertmanager does not notify
    for changed annotations): the page's labels, its alertname with `_where`, the slice in
    `dimension` and `value`; re-sent with the page."""
    stream = m2_rise.stream
    page = stream.page()
    where = stream.wheres()[0]
    assert stream.alerts.index(where) == stream.alerts.index(page) + 1  # the same batch
    assert where.labels == {
        **page.labels,
        "alertname": "hallucination_where",
        "dimension": "model",
        "value": "m2",
    }
    notes = where.annotations
    assert notes["summary"] == "hallucination on shop: the excess is in model m2"
    assert notes["description"] == page.annotations["where"] == notes["where"]
    assert notes["page"] == "hallucination"
    assert notes["trace_ids"] == page.annotations["trace_ids"]
    assert where.to_alertmanager()["endsAt"] == page.to_alertmanager()["endsAt"]
    # Re-sent with the page (every re-send), never alone.
    assert len(stream.wheres()) == len(stream.pages()) >= 5


def test_a_slice_named_after_the_page_reaches_the_pager_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A page on a rise spread evenly names no slice; when one model then carries more,
    the evaluation that first names it sends the `Where` alert (and the page with its new
    annotations), without waiting for the next re-send, and logs it."""
    stream, _ = make()
    stream.run(12 * 60, healthy)
    stream.run(2 * 60, lambda m, r, s, b: 0.45)
    assert "slice" not in stream.page().annotations
    assert stream.wheres() == []
    with caplog.at_level(logging.WARNING, logger="monitor.alerts.engine"):
        stream.run(5 * 60, lambda m, r, s, b: 0.9 if m == "m3" else 0.45)
    (line,) = [r.getMessage() for r in caplog.records if "says where" in r.getMessage()]
    assert line.startswith("alert hallucination for shop says where: ")
    assert "; where: model m3: " in line
    first = stream.wheres()[0]
    assert (first.labels["dimension"], first.labels["value"]) == ("model", "m3")
    pages = stream.pages()
    at = stream.alerts.index(first)
    along = stream.alerts[at - 1]
    assert along in pages and along.annotations["slice"] == "model=m3"
    # Sent between two re-sends: the page before it is less than a re-send ago.
    before = [a for a in pages if stream.alerts.index(a) < at - 1][-1]
    assert (along.ends_at - before.ends_at).total_seconds() < 60
    assert first.starts_at > stream.page().starts_at


def test_a_rise_spread_evenly_names_no_slice_and_says_so() -> None:
    stream, _ = make()
    stream.run(12 * 60, healthy)
    stream.run(5 * 60, lambda m, r, s, b: 0.45)
    notes = stream.page().annotations
    assert "slice" not in notes
    assert stream.wheres() == []
    assert notes["where"].startswith("no slice: the rise is spread evenly (none of ")
    # The traces are the rise's failing records, of any slice.
    by_id = {s.trace_id: s for s in stream.sent}
    assert all(by_id[i].failed for i in notes["trace_ids"].split())


def test_an_even_rise_on_unequal_rates_names_none() -> None:
    """The same factor on every model, whose own rates differ: spread evenly."""
    base = {"m1": 0.1, "m2": 0.2, "m3": 0.3}
    stream, _ = make()
    stream.run(12 * 60, lambda m, r, s, b: base[m])
    stream.run(5 * 60, lambda m, r, s, b: base[m] * 2.2)
    assert "slice" not in stream.page().annotations


def test_the_resolve_and_the_gauge_end_with_the_rise() -> None:
    stream, t = make()
    stream.run(12 * 60, healthy)
    stream.run(5 * 60, lambda m, r, s, b: 0.7 if m == "m2" else 0.2)
    assert stream.page().annotations["slice"] == "model=m2"
    stream.run(5 * 60, healthy)
    resolved = stream.pages("resolved")
    assert resolved and "where" not in resolved[0].annotations
    # The page's `Where` alert is resolved with it, still naming its slice.
    (where,) = stream.wheres("resolved")
    assert stream.alerts.index(where) == stream.alerts.index(resolved[0]) + 1
    assert (where.labels["dimension"], where.labels["value"]) == ("model", "m2")
    labels = {"service": "shop", "rule": "hallucination", "cohort": ""}
    assert (
        t.registry.get_sample_value(
            "rag_monitor_alert_slice", {**labels, "dimension": "model", "value": "m2"}
        )
        is None
    )
    assert stream.engine.attribution.firing_alerts() == []


def test_a_where_alert_outlives_a_restart_with_the_state_file(tmp_path: Path) -> None:
    """The slice a firing page named is saved with its entry: after a restart the page's
    re-sends carry the same `Where` alert (its labels and `startsAt`: no second
    notification), and the new process resolves it with the page."""
    stream, _ = make()
    stream.run(12 * 60, healthy)
    stream.run(5 * 60, lambda m, r, s, b: 0.7 if m == "m2" else 0.2)
    first = stream.wheres()[0]
    assert (first.labels["dimension"], first.labels["value"]) == ("model", "m2")
    stream.restart(tmp_path / "alerts.state")
    assert stream.engine.firing() == [("hallucination", "shop")]
    before = len(stream.alerts)
    stream.run(3 * 60, lambda m, r, s, b: 0.7 if m == "m2" else 0.2)
    stream.alerts = stream.alerts[before:]
    assert len(stream.wheres()) == len(stream.pages()) >= 2  # with every re-send
    for where in stream.wheres():
        assert where.labels == first.labels and where.starts_at == first.starts_at
    stream.run(5 * 60, healthy)
    (resolved,) = stream.pages("resolved")
    (where,) = stream.wheres("resolved")
    assert stream.alerts.index(where) == stream.alerts.index(resolved) + 1
    assert where.labels == first.labels and where.starts_at == first.starts_at
    assert where.to_alertmanager()["startsAt"] == first.to_alertmanager()["startsAt"]
    assert stream.engine.snapshot()["hallucination"]["services"]["shop"][""]["where"] is None


def test_a_slice_first_named_after_a_restart_reaches_the_pager_at_once(tmp_path: Path) -> None:
    """A page restored from the state file without a slice, that names one once the new
    process has seen the slice carry the rise, sends its `Where` alert at that evaluation,
    not at the next re-send."""
    stream, _ = make()
    stream.run(12 * 60, healthy)
    stream.run(2 * 60, lambda m, r, s, b: 0.45)
    assert stream.wheres() == []
    stream.restart(tmp_path / "alerts.state")
    stream.run(5 * 60, lambda m, r, s, b: 0.9 if m == "m3" else 0.45)
    first = stream.wheres()[0]
    assert (first.labels["dimension"], first.labels["value"]) == ("model", "m3")
    at = stream.alerts.index(first)
    along = stream.alerts[at - 1]
    assert along in stream.pages() and along.annotations["slice"] == "model=m3"
    # Sent between two re-sends: the page before it is less than a re-send ago.
    before = [a for a in stream.pages() if stream.alerts.index(a) < at - 1][-1]
    assert (along.ends_at - before.ends_at).total_seconds() < 60


def test_retrieval_that_fails_more_often_is_the_retriever() -> None:
    stream, _ = make()

    def fails(m: str, r: str, s: str, bad: bool) -> float:
        return 0.7 if bad else 0.15

    stream.run(12 * 60, fails, lambda m, r, s: 0.1)
    stream.run(5 * 60, fails, lambda m, r, s: 0.7 if s == "wiki" else 0.1)
    notes = stream.page().annotations
    assert notes["cause"] == "retriever"
    assert notes["cause_detail"].startswith("the retriever (the index, the documents)")
    assert "local_retrieval failed 0.1" in notes["cause_detail"]
    # The first page may come before the slice is told apart from the rest (the window's
    # first verdicts); a re-send, with the evidence since, names it.
    latest = [a for a in stream.alerts if a.status == "firing"][-1].annotations
    assert latest["cause"] == "retriever"
    assert latest["slice"] == "source=wiki"


def test_groundedness_falling_at_the_same_retrieval_is_the_generator() -> None:
    stream, _ = make()
    stream.run(12 * 60, lambda m, r, s, bad: 0.7 if bad else 0.15, lambda m, r, s: 0.1)
    stream.run(
        5 * 60,
        lambda m, r, s, bad: 0.7 if bad else (0.55 if m == "m3" else 0.15),
        lambda m, r, s: 0.1,
    )
    notes = stream.page().annotations
    assert notes["cause"] == "generator"
    assert notes["slice"] == "model=m3"


def test_without_a_retrieval_evaluator_the_page_says_nothing_of_the_cause() -> None:
    stream, _ = make(trace_url=None)
    stream.run(12 * 60, healthy)
    stream.run(5 * 60, lambda m, r, s, b: 0.7 if r == "/chat" else 0.2)
    notes = stream.page().annotations
    assert notes["where"] and notes["trace_ids"]
    assert "cause" not in notes and "cause_detail" not in notes and "trace_urls" not in notes


def test_a_cohort_page_names_where_within_the_cohort() -> None:
    rule = CohortRule(
        name="canary",
        evaluator="local_groundedness",
        cohorts=AlertCohorts(by="model"),
        window="2m",
        min_samples=100,
        min_increase=0.05,
        false_page_every="1h",
    )
    stream, _ = make(rule)
    stream.run(3 * 60, lambda m, r, s, b: 0.8 if (m, r) == ("m2", "/chat") else 0.2)
    page = stream.page()
    assert page.labels["cohort"] == "m2"
    assert page.annotations["slice"] == "route=/chat"


def test_the_log_line_of_a_page_says_where(m2_rise: Rise) -> None:
    (line,) = [message for message in m2_rise.logged if "firing" in message]
    assert "; where: model m2: " in line and "; traces: " in line


def test_trace_url_must_name_the_trace() -> None:
    with pytest.raises(ValueError, match=r"must contain \{trace_id\}"):
        Alerts.model_validate({"trace_url": "http://tempo/trace/"})
    assert Alerts.model_validate({"trace_url": TRACE_URL}).trace_url == TRACE_URL


def test_100000_values_of_a_dimension_stay_within_the_stated_bound() -> None:
    """A spray of distinct document sources: at most the cap's values hold counts, the
    rest count as `other`, and what is kept stays within `bytes_bound` and the cap's
    sketch and slots."""
    t = create_telemetry()
    clock = Clock()
    rules = [Rule.of(RULE, "90d", {})]
    attribution = Attribution(rules, t, INTERVAL, clock=clock)
    key = (0, "shop", "")
    base = ("1.0", "m1", "/ask", "", "1", "<500", "", "en", "warranty")
    source = DIMENSIONS.index("source")

    records = [
        Where((*base[:source], f"host-{k}", *base[source + 1 :]), f"{k:032x}", f"c{k}")
        for k in range(100_000)
    ]
    for where in records:
        attribution.observe(key, where, [1.0, 0.0], None, clock.now)
        clock.now += 0.01
    kept = _deep_size([attribution._keys, attribution._caps])
    held = attribution._keys[key].values[source]
    assert len(held) <= CAPS["source"] + 1 and "other" in held
    # The key's counts, and the source cap's sketch and slots (the one cap that filled).
    sketch = 2 * (1 << SKETCH_BITS) * 4
    slots = CAPS["source"] * 200
    assert kept <= attribution.bytes_bound(key) + sketch + slots, kept


def _deep_size(root: object) -> int:
    """Bytes of `root` and everything it holds (each object once; no classes, functions
    or modules)."""
    seen: set[int] = set()
    total = 0
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


def test_a_backtest_prints_the_where_alert_as_an_event_of_its_own() -> None:
    """The backtest shows what the pager would get: the page, then its `Where` alert; only
    the page counts as one."""
    rng = random.Random(3)
    rows: list[tuple[str, object]] = []
    for k in range(17 * 60 * PER_S):
        model = rng.choice(MODELS)
        rate = 0.7 if model == "m2" and k >= 12 * 60 * PER_S else 0.2
        row = {
            "time": 1_700_000_000 + k / PER_S,
            "service": "shop",
            "evaluator": "local_groundedness",
            "outcome": "fail" if rng.random() < rate else "pass",
            "model": model,
            "trace_id": f"{k + 1:032x}",
        }
        rows.append((f"row {k}", row))
    config = Config.model_validate(
        {"alerts": {"evaluation_interval_s": INTERVAL, "rules": [RULE.model_dump()]}}
    )
    backtest = Backtest(config)
    events = [e for e in backtest.run(rows) if e.status == "firing"]
    page, where = events[:2]
    assert page.alert.labels["alertname"] == "hallucination"
    assert where.alert.labels["alertname"] == "hallucination_where"
    assert (where.alert.labels["dimension"], where.alert.labels["value"]) == ("model", "m2")
    head = where.text().splitlines()[0]
    assert head.endswith(
        "  firing    hallucination_where  shop: " + where.alert.annotations["where"]
    )
    assert backtest.summary.pages["hallucination"] == 1


def test_a_page_says_that_a_version_came_at_the_rise() -> None:
    """A new version rolled out at the rise (all of the traffic at once): the
    page, its log line and its `Where` alert say the version changed at the rise, with its
    share of the verdicts before and since; `GET /alerts` has the figures."""
    stream, _ = make()
    stream.run(12 * 60, healthy)
    stream.version = "2.0"
    stream.run(5 * 60, lambda m, r, s, b: 0.6)
    page = stream.page()
    changed = page.annotations["changed"]
    # The change point is estimated: "since" may hold a few minutes from before the rise.
    said = re.fullmatch(r"version 2\.0 \(0% of verdicts before the rise, (\d+)% since\)", changed)
    assert said is not None and int(said[1]) >= 50, changed
    assert f"changed at the rise: {changed}" in log_text(page)
    assert all(w.annotations["changed"] == changed for w in stream.wheres())
    (shown,) = stream.engine.attribution.firing_alerts()
    (version,) = shown["attribution"]["changed"]
    assert version["dimension"] == "version" and version["value"] == "2.0"
    assert version["share_before"] <= 0.05 and version["share_since"] >= 0.5
