"""`rag-monitor backtest` over the results file of an evaluator changeover with both
revisions scoring the same records (`evaluators[].previous`) gives the pages the live
engine sent: the sidecar's evaluation stage scores each record, in its worker process,
with the new revision of the embedded `local_groundedness` and half of them with its
previous one too (the worker's outcome says which revision gave each result), its results
file keeps the previous revision's verdicts under each line's `previous`, and the backtest
pairs them with the record's own as the live engine did (`AlertEngine.emit`, with
`Evaluated.previous`).

The pipeline is `build_pipeline`'s (the evaluation stage, its CPU scorers, the results
file), restarted at the changeover with the new config as a user would; one alert engine,
built as the sidecar builds it (`AlertEngine.from_config`), takes both pipelines' records
and is judged by the test as the sidecar's loop judges it (every interval, and at once when
a test reaches its budget) on an injected clock, each record at its own time, so that the
live pages and the replayed ones are comparable to the second."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.otlp import asked
from harness.rag_answers import Answer, answers
from harness.wait import CONDITION_S
from monitor.alerts import AlertEngine
from monitor.alerts.backtest import Backtest, read_rows
from monitor.component import SampledRecord
from monitor.config import Config
from monitor.pipeline import Pipeline, build_pipeline
from monitor.processors.evaluation import _queue as queue_module
from monitor.records import ContextDoc, RagRecord
from monitor.telemetry import create_telemetry
from tests.alerts.test_alerts import Clock

# A quarter of an hour of simulated traffic through the evaluation stage, a record at a
# time: the slow tier.
pytestmark = pytest.mark.e2e

EVALUATOR = "local_groundedness"
INTERVAL = 15.0
RATE = 2  # records a second
TURNS = 2  # records of a conversation
START = 1_767_225_600.0
CHANGE_MIN = 10  # the new revision goes live
RISE_MIN = 12  # the service's hallucinated share doubles
END_MIN = 15
RULES = Config.model_validate(
    {
        "alerts": {
            "evaluation_interval_s": INTERVAL,
            "rules": [
                {
                    "name": "changeover_regression",
                    "evaluator": EVALUATOR,
                    "window": "2m",
                    "min_samples": 50,
                    "min_increase": 0.05,
                    "false_page_every": "6h",
                    "baseline": {"window": "10m", "min_samples": 200, "season": "none"},
                }
            ],
        }
    }
)
# The new revision's pass mark is above some faithful answers' scores (harness/rag_answers.py:
# 0.82 to 0.90; hallucinated ones at most 0.37), so it reads the same traffic higher.
NEW = {"name": EVALUATOR, "threshold": 0.83}
DUAL = {**NEW, "previous": {"until": "2100-01-01", "share": 0.5, "threshold": None}}

Page = tuple[float, str, str, str]  # time, status, rule, service


def stream(seed: int) -> list[RagRecord]:
    """`RATE` requests a second in conversations of `TURNS`, each asked in words of its
    own; a fifth of the answers hallucinated, two fifths from `RISE_MIN`."""
    rng = random.Random(seed)
    pool = answers()
    faithful = [a for a in pool if not a.hallucinated]
    hallucinated = [a for a in pool if a.hallucinated]
    out = []
    t = START
    n = 0
    while t < START + END_MIN * 60:
        t += rng.expovariate(RATE)
        share = 0.4 if t >= START + RISE_MIN * 60 else 0.2
        item = rng.choice(hallucinated if rng.random() < share else faithful)
        out.append(_record(item, n, t))
        n += 1
    return out


def _record(item: Answer, n: int, t: float) -> RagRecord:
    return RagRecord(
        request_id=f"r{n}",
        trace_id=f"{n + 1:032x}",
        service="shop",
        route="/ask",
        conversation=f"c{n // TURNS}",
        timestamp=t,
        query=asked(item.question, n),
        retrieved_context=tuple(ContextDoc(content=text) for text in item.context),
        response=item.answer,
    )


def pipeline_config(results: Path, evaluator: dict[str, Any]) -> Config:
    return Config.model_validate(
        {
            "evaluators": [evaluator],
            "pipeline": {"processes": 1},
            "exporters": {"results_file": str(results)},
        }
    )


class Live:
    """The alert engine as the sidecar runs it, on `clock`: what it sent, once each."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.engine = AlertEngine.from_config(RULES, create_telemetry(), clock=clock)
        self.sent: list[Page] = []
        self._firing: set[str] = set()
        self._tick: float | None = None

    def evaluate(self, t: float) -> None:
        self.clock.now = t
        for alert in self.engine.evaluate():
            name = alert.labels.get("alertname", alert.rule)
            if name != alert.rule:
                continue  # a page's `Where` alert
            if alert.status == "firing" and name in self._firing:
                continue  # a re-send
            (self._firing.add if alert.status == "firing" else self._firing.discard)(name)
            self.sent.append((t, alert.status, alert.rule, alert.service))

    def before(self, t: float) -> None:
        """The evaluations due by `t`, then the clock at `t`."""
        if self._tick is None:
            self._tick = t + INTERVAL
        while self._tick <= t:
            self.evaluate(self._tick)
            self._tick += INTERVAL
        self.clock.now = t


async def run_live(
    records: list[RagRecord], results: Path, evaluator: dict[str, Any], live: Live
) -> None:
    """`records` through a pipeline of `evaluator` that writes `results`, one at a time,
    each at its own time."""
    pipeline = build_pipeline(
        pipeline_config(results, evaluator),
        lambda: (True, ""),
        telemetry=create_telemetry(),
        serve_http=False,
        with_receivers=False,
        extra_sinks=[live.engine],
        wall_clock=live.clock,
        # The budgets' windows too: on the machine's clock, a quarter of an hour of traffic
        # put through in seconds reads as a base sample near the local limit, which then
        # refuses the previous revision's share (admitted as a boost's) as the pace rises.
        monotonic_clock=live.clock,
    )
    await _start(pipeline, live.engine)
    loop = asyncio.get_running_loop()
    try:
        for record in records:
            assert record.timestamp is not None
            live.before(record.timestamp)
            done: asyncio.Future[bool] = loop.create_future()
            item = SampledRecord(record, "test", frozenset({EVALUATOR}), done.set_result)
            assert await pipeline.stage.put_many([item]) == 1
            assert await asyncio.wait_for(done, CONDITION_S), "its results were written"
            if live.engine.evaluation_due:
                live.evaluate(record.timestamp)
    finally:
        await pipeline.stage.shutdown(CONDITION_S)
        for sink in pipeline.sinks:
            await sink.shutdown(CONDITION_S)


async def _start(pipeline: Pipeline, engine: AlertEngine) -> None:
    """The sinks but the engine (the test judges it), then the stage."""
    for sink in pipeline.sinks:
        if sink is not engine:
            await sink.start()
    await pipeline.stage.start()


def replayed(path: Path) -> list[Page]:
    backtest = Backtest(RULES)
    pages: list[Page] = [
        (e.time, e.status, e.alert.rule, e.alert.service)
        for e in backtest.run(read_rows([path]))
        if e.alert.labels.get("alertname", e.alert.rule) == e.alert.rule
    ]
    assert backtest.summary.refusals == [] and backtest.summary.late == 0
    return pages


# The stage's wait for a batch to fill (records go in one at a time here, so it is all the
# wall time) at a pace far quicker than its default, and at the default: what is compared
# must not depend on it.
@pytest.mark.parametrize("batch_interval_s", [0.002, queue_module.BATCH_INTERVAL_S])
async def test_a_changeover_with_both_revisions_replayed_gives_the_pages_the_live_engine_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_interval_s: float
) -> None:
    monkeypatch.setattr(queue_module, "BATCH_INTERVAL_S", batch_interval_s)
    records = stream(seed=2)
    results = tmp_path / "results.jsonl"
    live = Live(Clock())
    change = START + CHANGE_MIN * 60
    before = [r for r in records if (r.timestamp or 0.0) < change]
    await run_live(before, results, {"name": EVALUATOR}, live)
    await run_live(records[len(before) :], results, DUAL, live)
    live.evaluate(live.clock.now + INTERVAL)

    firing = [page for page in live.sent if page[1] == "firing"]
    assert firing, "the doubling after the changeover paged live"
    assert all(t >= START + RISE_MIN * 60 for t, *_ in firing)
    assert replayed(results) == live.sent

    # Half the new revision's lines carry the previous revision's verdict on the record.
    lines = [orjson.loads(line) for line in results.read_bytes().splitlines()]
    assert len(lines) == len(records)
    paired = [line for line in lines if "previous" in line]
    assert paired and all(line["time"] >= change for line in paired)
    old, new = (paired[0][field][EVALUATOR]["revision"] for field in ("previous", "results"))
    assert old != new
    assert {line["results"][EVALUATOR]["revision"] for line in lines[: len(before)]} == {old}
    assert 0.35 < len(paired) / (len(lines) - len(before)) < 0.65

    # The same file without the previous revision's verdicts (as results files were
    # written before they carried them) replays other pages: the pairs made the difference.
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(
        b"".join(
            orjson.dumps({k: v for k, v in line.items() if k != "previous"}) + b"\n"
            for line in lines
        )
    )
    assert replayed(bare) != live.sent
