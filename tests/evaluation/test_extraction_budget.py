"""One trace's extraction costs at most its own budget (`pipeline.extraction_timeout_s`):
past it, in a worker process, the trace is set aside alone (`extract_timeout`), its
batch-mates are extracted and scored, and the worker is neither killed nor replaced.

The over-long extractions are scripted (`harness.pool_scorers.scripted_extraction`): a
span named `spin` runs Python code for ever, `backtrack` a regular expression that
backtracks for ever, `hang:<path>` waits for ever; no real input is left that does.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest

from harness.otlp import CONVENTIONS, WATER, capture, otlp_bytes
from harness.pool_scorers import pool, scripted_extraction
from monitor.config import EvaluatorConfig
from monitor.extraction import TraceRecords, Unreadable, extract_within
from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import (
    EXTRACT_TIMEOUT,
    Job,
    OverBudget,
    Settings,
    extraction_budget,
)
from monitor.records.limits import SizeLimits
from monitor.spans import Span, decode_protobuf
from monitor.telemetry import create_telemetry

BUDGET_S = 0.5
SCRIPTED = EvaluatorConfig(name="scripted")


def _span(name: str) -> Span:
    return Span("ab" * 16, "1" * 16, "", name, 1, 2, attributes={"http.route": "/x"})


def _honest() -> list[list[Span]]:
    return [
        decode_protobuf(otlp_bytes(capture(emit, WATER)[1]), lazy=True).spans
        for emit in list(CONVENTIONS.values())[:3]
    ]


@pytest.mark.parametrize("over", ["spin", "backtrack", "hang"])
async def test_a_trace_past_its_budget_is_set_aside_alone(over: str, tmp_path: Path) -> None:
    telemetry = create_telemetry()
    settings = Settings(extraction_budget_s=BUDGET_S)
    # The pool's own deadline is far off: only the trace's budget can stop it.
    processes = pool([SCRIPTED], 1, 600.0, telemetry, scripted_extraction, settings)
    await processes.start()
    runner = TaskRunner(
        processes,
        {"scripted": scripted_extraction(SCRIPTED)},
        settings,
        evaluation_timeout_s=600.0,
        extraction_timeout_s=BUDGET_S,
    )
    name = f"hang:{tmp_path / 'inside'}" if over == "hang" else over
    honest = _honest()
    traces = [honest[0], [_span(name)], *honest[1:]]
    try:
        (pid,) = processes.pids
        done = await asyncio.wait_for(
            runner.run([Job(("scripted",), spans=spans) for spans in traces]), 120
        )
        assert processes.pids == [pid]  # the same worker: none killed or replaced
    finally:
        await processes.shutdown(5.0)
    set_aside = done[1].extraction
    assert isinstance(set_aside, Unreadable) and set_aside.reason == EXTRACT_TIMEOUT
    assert done[1].scored == []
    mates = [done[0], *done[2:]]
    expected = [extract_within(spans, "http.route", SizeLimits()) for spans in honest]
    assert [outcome.extraction for outcome in mates] == expected
    for outcome in mates:
        assert isinstance(outcome.extraction, TraceRecords) and outcome.extraction.records
        assert outcome.scored is not None
        assert [s["scripted"][0].outcome for s in outcome.scored] == ["pass"]
    restarts = telemetry.registry.get_sample_value(
        "rag_monitor_worker_restarts_total", {"reason": "hung"}
    )
    assert not restarts


def test_the_budget_stops_python_code_in_the_main_thread() -> None:
    with pytest.raises(OverBudget), extraction_budget(0.05):
        while True:
            pass


def test_the_budget_is_disarmed_after_its_block() -> None:
    before = signal.getsignal(signal.SIGALRM)
    other = signal.getitimer(signal.ITIMER_REAL)[0]  # a test runner's timeout, if any
    with extraction_budget(3600.0):
        assert signal.getitimer(signal.ITIMER_REAL)[0] > max(other, 600.0)
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert left == 0.0 if not other else left <= other
    assert signal.getsignal(signal.SIGALRM) is before


def test_a_timer_armed_before_goes_on_after() -> None:
    before = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 600.0)
        with extraction_budget(60.0):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 60.0 < left <= 600.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_outside_the_main_thread_nothing_is_armed() -> None:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            with extraction_budget(0.01):
                pass
        except BaseException as exc:  # pragma: no cover - what the test looks for
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert raised == []
