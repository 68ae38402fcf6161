"""`rag-monitor backtest` over a results file gives the pages the live engine sent on the
same records: the results line carries the conversation, the request's fingerprint, each
evaluator's revision and the dimensions the engine reads
(`monitor.exporters.results_file.results_line`), and the backtest reads them back
(`monitor.alerts.backtest`). The live engine is driven as the sidecar's loop drives it (an
evaluation every interval and whenever a test asks), on an injected clock."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest, read_rows
from monitor.component import Evaluated
from monitor.config import Config
from monitor.exporters.results_file import results_line
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock, record
from tests.alerts.test_alerts_production import _verdict

# Hours to days of simulated traffic each: the slow tier.
pytestmark = pytest.mark.e2e

INTERVAL = 15.0
CONFIG = Config.model_validate(
    {
        "alerts": {
            "evaluation_interval_s": INTERVAL,
            "rules": [
                {
                    "name": "regression",
                    "evaluator": "local_groundedness",
                    "window": "2m",
                    "min_samples": 50,
                    "min_increase": 0.05,
                    "false_page_every": "6h",
                    "baseline": {"window": "20m", "min_samples": 200, "season": "none"},
                }
            ],
        }
    }
)


def records(seed: int) -> list[tuple[RagRecord, dict[str, EvalResult]]]:
    """Two requests a second in conversations of five turns; the evaluator's revision
    changes at 50 minutes (it reads 0.05 higher) and the defect rate doubles at 80."""
    rng = random.Random(seed)
    out = []
    t = 1_767_225_600.0
    for n in range(2 * 100 * 60):
        t += rng.expovariate(2.0)
        minute = n / 120
        revision = "r1" if minute < 50 else "r2"
        rate = (0.2 if minute < 50 else 0.25) * (2 if minute >= 80 else 1)
        passed = rng.random() >= rate
        update = {"route": "/ask", "conversation": f"c{n // 5}", "timestamp": t}
        out.append((record("shop", n).model_copy(update=update), _verdict(passed, revision)))
    return out


def burst_records(seed: int) -> list[tuple[RagRecord, dict[str, EvalResult]]]:
    """Two distinct requests a second, no conversation ids; from 30 to 40 minutes a client
    also sends one failing request, the same question with the same context, about three
    times a second; the defect rate doubles at 80."""
    rng = random.Random(seed)
    out: list[tuple[RagRecord, dict[str, EvalResult]]] = []
    t = 1_767_225_600.0
    n = 0
    while n < 2 * 100 * 60:
        t += rng.expovariate(2.0)
        minute = n / 120
        if 30 <= minute < 40:
            for _ in range(rng.choices((1, 2), (1, 2))[0]):
                t += 1e-3
                update = {"route": "/ask", "query": "what is the refund policy", "timestamp": t}
                again = record("shop", len(out) + 10**6).model_copy(update=update)
                out.append((again, _verdict(False, "r1")))
        passed = rng.random() >= (0.4 if minute >= 80 else 0.2)
        update = {"route": "/ask", "timestamp": t}
        out.append((record("shop", n).model_copy(update=update), _verdict(passed, "r1")))
        n += 1
    return out


def live(stream: list[tuple[RagRecord, dict[str, EvalResult]]]) -> list[tuple[float, str, str]]:
    clock = Clock()
    rules = CONFIG.alerts.rules
    engine = AlertEngine(rules, create_telemetry(), evaluation_interval_s=INTERVAL, clock=clock)
    out: list[tuple[float, str, str]] = []
    firing: set[str] = set()

    def evaluate(t: float) -> None:
        clock.now = t
        for alert in engine.evaluate():
            name = alert.labels.get("alertname", alert.rule)
            if alert.status == "firing" and name in firing:
                continue
            (firing.add if alert.status == "firing" else firing.discard)(name)
            out.append((t, alert.status, alert.annotations["description"]))

    first = stream[0][0].timestamp
    assert first is not None
    tick = first + INTERVAL
    for rec, results in stream:
        assert rec.timestamp is not None
        while tick <= rec.timestamp:
            evaluate(tick)
            tick += INTERVAL
        clock.now = rec.timestamp
        engine.emit([Evaluated(rec, results)])
        if engine.evaluation_due:
            evaluate(rec.timestamp)
    evaluate(clock.now + INTERVAL)
    return out


def replayed(
    stream: list[tuple[RagRecord, dict[str, EvalResult]]], path: Path
) -> list[tuple[float, str, str]]:
    """The pages `rag-monitor backtest` gives on `stream` written as a results file."""
    with gzip.open(path, "wt") as out:
        for rec, results in stream:
            out.write(json.dumps(results_line(rec, results)) + "\n")
    backtest = Backtest(CONFIG)
    events: list[tuple[float, str, str]] = [
        (e.time, e.status, e.alert.annotations["description"])
        for e in backtest.run(read_rows([path]))
        if e.alert.labels.get("alertname", e.alert.rule) == e.alert.rule
    ]
    assert backtest.summary.refusals == [] and backtest.summary.late == 0
    return events


def test_a_results_file_replayed_gives_the_pages_the_live_engine_sent(tmp_path: Path) -> None:
    stream = records(seed=5)
    sent = live(stream)
    assert [s for s in sent if s[1] == "firing"], "the doubling pages"
    assert replayed(stream, tmp_path / "results.jsonl.gz") == sent
    # The page came after the doubling: the revision change paged nothing.
    doubled = first_time(stream) + 80 * 60
    assert all(t >= doubled for t, status, _ in sent if status == "firing")


def first_time(stream: list[tuple[RagRecord, dict[str, EvalResult]]]) -> float:
    t = stream[0][0].timestamp
    assert t is not None
    return t


def test_a_burst_of_one_request_replayed_pages_as_little_as_it_did_live(tmp_path: Path) -> None:
    """The fingerprint in the results line: the burst is one request to the backtest as it
    was to the live engine, and only the doubling pages in either."""
    stream = burst_records(seed=3)
    sent = live(stream)
    assert [s for s in sent if s[1] == "firing"], "the doubling pages"
    doubled = first_time(stream) + 80 * 60
    assert all(t >= doubled for t, status, _ in sent if status == "firing")
    assert replayed(stream, tmp_path / "results.jsonl.gz") == sent
