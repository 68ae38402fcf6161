"""The evaluation stage: bounded intake, error outcomes, budgets, escalation, shutdown."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Literal

import pytest

from harness.wait import wait_until_async
from monitor.component import Evaluated, OnDone, ResultSink, SampledRecord, SampledTrace
from monitor.config import Budget, EvaluatorConfig
from monitor.exporters.prometheus import MetricsSink
from monitor.exporters.results_file import ResultsFileSink
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage
from monitor.processors.evaluation import _queue as queue_module
from monitor.processors.evaluation._task import Job, Outcome
from monitor.receivers.replay_summary import SummarySink
from monitor.records import NOT_EVALUATED, Part, RagRecord
from monitor.results import EvalResult
from monitor.spans import Span
from monitor.telemetry import Telemetry


class ScriptedEvaluator:
    """An in-process evaluator whose behaviour the test chooses."""

    def __init__(
        self,
        name: str,
        *,
        kind: Literal["local", "judge"] = "local",
        value: float = 1.0,
        raises: bool = False,
        delay: float = 0.0,
        requires: frozenset[Part] = frozenset(),
        per_record: dict[str, float] | None = None,
    ) -> None:
        self.name, self.kind, self.requires = name, kind, requires
        self.value, self.raises, self.delay = value, raises, delay
        self.per_record = per_record or {}
        self.calls = 0

    async def evaluate(self, record: RagRecord) -> EvalResult:
        self.calls += 1
        await asyncio.sleep(self.delay)
        if self.raises:
            raise RuntimeError("judge exploded")
        value = self.per_record.get(record.request_id, self.value)
        return EvalResult(
            name=self.name,
            score=value,
            normalized=value,
            passed=value >= 0.5,
            input_tokens=10,
            output_tokens=5,
        )


def _stage(
    telemetry: Telemetry,
    evaluators: list[ScriptedEvaluator],
    *,
    specs: list[EvaluatorConfig] | None = None,
    budget: Budget | None = None,
    queue_size: int = 100,
    timeout: float = 5.0,
    workers: int = 2,
    queue_bytes: int = 1 << 30,
    extra_sinks: tuple[ResultSink, ...] = (),
) -> tuple[EvaluationStage, SummarySink]:
    summary = SummarySink()
    specs = specs or [EvaluatorConfig(name="local_groundedness") for _ in evaluators]
    stage = EvaluationStage(
        list(zip(evaluators, specs, strict=True)),
        BudgetGate(budget or Budget()),
        [MetricsSink(telemetry), summary, *extra_sinks],
        telemetry,
        queue_size=queue_size,
        queue_bytes=queue_bytes,
        workers=workers,
        evaluation_timeout_s=timeout,
    )
    return stage, summary


_ALL = frozenset({"good", "bad", "broken", "stuck", "ctx", "any", "judge", "local", "e"})
_ALL |= {"local_groundedness", "groundedness", "slow", "a", "b", "c"}


async def _put(
    stage: EvaluationStage,
    record: RagRecord,
    on_done: OnDone | None = None,
    sampled: frozenset[str] = _ALL,
) -> None:
    """Hand in one record as the trace stage does, sampled for every evaluator named."""
    assert await stage.put_many([SampledRecord(record, "test", sampled, on_done)]) == 1


def _rec(i: int, **kw: object) -> RagRecord:
    base: dict[str, object] = {
        "request_id": f"r{i}",
        "trace_id": f"{i:032x}",
        "query": "q",
        "response": "a",
        "retrieved_context": [{"content": "c"}],
        "service": "svc",
        "route": "/ask",
    }
    base.update(kw)
    return RagRecord.model_validate(base)


def _value(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


def _record_done(done: list[tuple[int, bool]], i: int, ok: bool) -> None:
    done.append((i, ok))


async def test_results_reach_sinks_and_on_done_fires(telemetry: Telemetry) -> None:
    good, bad = ScriptedEvaluator("good", value=0.9), ScriptedEvaluator("bad", value=0.1)
    stage, summary = _stage(telemetry, [good, bad])
    await stage.start()
    done: list[tuple[int, bool]] = []
    for i in range(5):
        await _put(stage, _rec(i), on_done=partial(_record_done, done, i))
    await stage.shutdown(5)
    assert sorted(done) == [(i, True) for i in range(5)]
    assert summary.totals["good"].passed == 5 and summary.totals["bad"].failed == 5
    assert (
        _value(
            telemetry,
            "evaluations_total",
            service="svc",
            version="",
            route="/ask",
            evaluator="bad",
            outcome="fail",
        )
        == 5
    )


async def test_evaluator_exception_and_timeout_are_errors_not_verdicts(
    telemetry: Telemetry,
) -> None:
    broken = ScriptedEvaluator("broken", raises=True)
    stuck = ScriptedEvaluator("stuck", delay=10)
    stage, summary = _stage(telemetry, [broken, stuck], timeout=0.2)
    await stage.start()
    await _put(stage, _rec(1))
    await stage.shutdown(5)
    for name in ("broken", "stuck"):
        totals = summary.totals[name]
        assert (totals.errors, totals.passed, totals.failed) == (1, 0, 0)
        assert (
            _value(
                telemetry,
                "evaluations_total",
                service="svc",
                version="",
                route="/ask",
                evaluator=name,
                outcome="error",
            )
            == 1
        )
        assert _value(telemetry, "evaluation_score_count", service="svc", evaluator=name) == 0


async def test_missing_parts_skip_evaluators_and_are_counted(telemetry: Telemetry) -> None:
    needs_context = ScriptedEvaluator("ctx", requires=frozenset({"context"}))
    any_record = ScriptedEvaluator("any")
    stage, _ = _stage(telemetry, [needs_context, any_record])
    await stage.start()
    await _put(stage, _rec(1, retrieved_context=[]))
    await stage.shutdown(5)
    assert (needs_context.calls, any_record.calls) == (0, 1)
    # No decision is counted for an evaluator whose input is missing (the trace stage
    # counts the record in records_incomplete_total).
    assert (
        _value(
            telemetry,
            "sampling_decisions_total",
            service="svc",
            evaluator="ctx",
            decision="sampled",
        )
        == 0
    )
    # The skip itself is counted, by evaluator and reason.
    skipped = {"service": "svc", "evaluator": "ctx", "reason": "no_context"}
    assert _value(telemetry, "evaluations_skipped_total", **skipped) == 1
    assert _value(telemetry, "evaluations_skipped_total", **{**skipped, "evaluator": "any"}) == 0


async def test_evaluators_not_in_the_carried_decision_are_skipped(telemetry: Telemetry) -> None:
    """The sampling decision travels with the record: the stage does not decide again."""
    chosen, other = ScriptedEvaluator("a"), ScriptedEvaluator("b")
    stage, _ = _stage(telemetry, [chosen, other])
    await stage.start()
    await _put(stage, _rec(1), sampled=frozenset({"a"}))
    await stage.shutdown(5)
    assert (chosen.calls, other.calls) == (1, 0)
    assert (
        _value(
            telemetry, "sampling_decisions_total", service="svc", evaluator="b", decision="skipped"
        )
        == 1
    )


async def test_judges_stop_at_budget_local_keeps_running(telemetry: Telemetry) -> None:
    judge = ScriptedEvaluator("judge", kind="judge")
    local = ScriptedEvaluator("local")
    stage, _ = _stage(telemetry, [judge, local], budget=Budget(max_evaluations_per_minute=3))
    await stage.start()
    for i in range(10):
        await _put(stage, _rec(i))
    await stage.shutdown(5)
    assert (judge.calls, local.calls) == (3, 10)
    assert (
        _value(
            telemetry,
            "sampling_decisions_total",
            service="svc",
            evaluator="judge",
            decision="over_budget",
        )
        == 7
    )


async def test_escalation_runs_judge_only_inside_band(telemetry: Telemetry) -> None:
    unsure = ScriptedEvaluator("local_groundedness", per_record={"r1": 0.5, "r2": 0.95})
    judge = ScriptedEvaluator("groundedness", kind="judge")
    specs = [
        EvaluatorConfig(name="local_groundedness"),
        EvaluatorConfig(
            name="local_groundedness", escalate_from="local_groundedness", band=(0.4, 0.6)
        ),
    ]
    stage, _ = _stage(telemetry, [unsure, judge], specs=specs)
    await stage.start()
    await _put(stage, _rec(1))
    await _put(stage, _rec(2))
    await stage.shutdown(5)
    assert judge.calls == 1
    assert (
        _value(
            telemetry,
            "sampling_decisions_total",
            service="svc",
            evaluator="groundedness",
            decision="not_escalated",
        )
        == 1
    )


class CollectingSink:
    """Every record's results the stage hands on, persisted at once."""

    def __init__(self) -> None:
        self.got: list[Evaluated] = []

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> None:
        self.got.extend(batch)

    async def shutdown(self, deadline_s: float) -> None:
        return None


async def test_shutdown_deadline_writes_what_it_left_unevaluated(telemetry: Telemetry) -> None:
    # A scripted slow evaluator holds the first record past the deadline, the others wait
    # behind it: none is evaluated, and none is lost: each goes to the sinks unevaluated.
    stuck = ScriptedEvaluator("stuck", delay=30)
    collected = CollectingSink()
    stage, _ = _stage(telemetry, [stuck], workers=1, timeout=60, extra_sinks=(collected,))
    await stage.start()
    done: list[tuple[int, bool]] = []
    for i in range(3):
        await _put(stage, _rec(i), on_done=partial(_record_done, done, i))
    await stage.shutdown(0.2)
    # Written, so finished (a Kafka offset is then committed), and counted as such.
    assert stage.abandoned == 0 and sorted(done) == [(0, True), (1, True), (2, True)]
    assert _value(telemetry, "records_not_evaluated_total", reason="shutdown_deadline") == 3
    assert _value(telemetry, "dropped_total", stage="evaluate", reason="shutdown_deadline") == 0
    assert sorted(e.record.request_id for e in collected.got) == ["r0", "r1", "r2"]
    for evaluated in collected.got:
        assert evaluated.record.metadata[NOT_EVALUATED] == "shutdown_deadline"
        assert set(evaluated.results) == _ALL
        assert {r.outcome for r in evaluated.results.values()} == {"error"}


def _trace(i: int) -> SampledTrace:
    spans = [
        Span(f"{i:032x}", "1" * 16, "", "ask", 1, 2, attributes={
            "rag.query": f"问题 {i}？", "rag.response": "答案。", "rag.context": "文档：内容。",
            "service.name": "svc",
        })
    ]  # fmt: skip
    return SampledTrace(spans, "test", _ALL, lambda _: None)


async def test_shutdown_deadline_extracts_traces_it_left_and_writes_them_unevaluated(
    telemetry: Telemetry,
) -> None:
    collected = CollectingSink()
    stage, _ = _stage(telemetry, [ScriptedEvaluator("stuck", delay=30)], workers=1,
                      timeout=60, extra_sinks=(collected,))  # fmt: skip
    await stage.start()
    told: list[object] = []
    done: list[tuple[int, bool]] = []
    for i in range(3):
        trace = _trace(i)
        trace.on_extracted = told.append
        trace.on_done = partial(_record_done, done, i)
        assert await stage.put_many([trace]) == 1
    await stage.shutdown(0.4)
    # Each trace told once what it gave (the one in work already was, by its task).
    assert len(told) == 3
    assert sorted(done) == [(0, True), (1, True), (2, True)] and stage.abandoned == 0
    assert sorted(e.record.query or "" for e in collected.got) == [
        "问题 0？",
        "问题 1？",
        "问题 2？",
    ]
    assert all(e.record.metadata[NOT_EVALUATED] == "shutdown_deadline" for e in collected.got)
    assert _value(telemetry, "records_not_evaluated_total", reason="shutdown_deadline") == 3


async def test_a_trace_not_extracted_within_the_deadline_is_the_only_one_given_up(
    telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from monitor.processors.evaluation._task import extracted as real

    release = threading.Event()

    def slow_on_one(job: Job, settings: object) -> object:
        if job.spans[0].trace_id == f"{1:032x}":
            release.wait()  # a scripted extraction that outlasts the deadline
        return real(job, settings)  # type: ignore[arg-type]

    monkeypatch.setattr("monitor.processors.evaluation._stage.extracted", slow_on_one)
    stage, _ = _stage(telemetry, [ScriptedEvaluator("stuck", delay=30)], workers=1, timeout=60)
    await stage.start()
    done: list[tuple[int, bool]] = []
    record = SampledRecord(_rec(9), "test", _ALL, partial(_record_done, done, 9))
    traces = [_trace(i) for i in range(1, 3)]
    for i, trace in enumerate(traces, start=1):
        trace.on_done = partial(_record_done, done, i)
    assert await stage.put_many([record, *traces]) == 3
    try:
        await stage.shutdown(0.4)
    finally:
        release.set()
    # The record and nothing queued after the slow trace could be written; the slow one
    # and the one behind it in the same extraction are given up, counted.
    assert (9, True) in done and (1, False) in done
    dropped = _value(telemetry, "dropped_total", stage="evaluate", reason="shutdown_deadline")
    assert dropped == stage.abandoned == sum(not ok for _, ok in done)


async def test_route_label_is_capped(telemetry: Telemetry) -> None:
    from monitor.telemetry import create_telemetry

    capped = create_telemetry(max_routes=2)
    stage, _ = _stage(capped, [ScriptedEvaluator("e")])
    await stage.start()
    for i in range(5):
        await _put(stage, _rec(i, route=f"/r{i}"))
    await stage.shutdown(5)
    routes = {
        s.labels["route"]
        for metric in capped.registry.collect()
        if metric.name == "rag_monitor_evaluations"
        for s in metric.samples
    }
    assert routes == {"/r0", "/r1", "other"}


class HeldEvaluator(ScriptedEvaluator):
    """Counts the records it is given and holds them until `gate` is set."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.gate = asyncio.Event()
        self.entered = 0

    async def evaluate(self, record: RagRecord) -> EvalResult:
        self.entered += 1
        await self.gate.wait()
        return await super().evaluate(record)


async def test_put_many_returns_how_many_were_taken_once_stopped(telemetry: Telemetry) -> None:
    stage, _ = _stage(telemetry, [ScriptedEvaluator("e")])
    await stage.start()
    await stage.shutdown(5)
    items = [SampledRecord(_rec(i), "test", _ALL) for i in range(2)]
    assert await stage.put_many(items) == 0


async def test_the_queue_is_bounded_in_bytes_and_pushes_back(telemetry: Telemetry) -> None:
    """Records whose estimated bytes (queued and in work together) pass `queue_bytes`
    wait for room (one still fits alone)."""
    held = HeldEvaluator("e")
    big = "x" * 1000
    items = [SampledRecord(_rec(i, response=big), "test", _ALL) for i in range(6)]
    size = items[0].size
    stage, _ = _stage(telemetry, [held], workers=1, queue_bytes=3 * size + size // 2)
    await stage.start()
    putting = asyncio.create_task(stage.put_many(items))
    # One record in work, two queued (a fourth would pass the bound): put_many waits.
    await wait_until_async(
        lambda: held.entered >= 1 and len(stage._queue) >= 2, 5, "one in work, two queued"
    )
    assert not putting.done() and len(stage._queue) == 2
    held.gate.set()
    async with asyncio.timeout(5):
        assert await putting == 6
    await stage.shutdown(5)
    assert held.calls == 6


async def test_a_trace_in_work_counts_at_what_its_records_cost(telemetry: Telemetry) -> None:
    """A trace whose spans are small but whose record holds hundreds of documents counts
    in `queue_bytes` at its record's estimated size once extracted: while it is in work,
    one item at most waits in the queue."""
    held = HeldEvaluator("e")
    documents = json.dumps([f"d{n}" for n in range(500)])
    spans = [
        Span(
            f"{9:032x}",
            f"{1:016x}",
            "",
            "handle",
            start_unix_nano=1,
            end_unix_nano=2,
            attributes={"rag.query": "q?", "rag.response": "a.", "rag.context": documents},
        )
    ]
    trace = SampledTrace(spans, "test", _ALL, lambda outcome: None, size=len(documents))
    records = [SampledRecord(_rec(i), "test", _ALL) for i in range(3)]
    bound = 100_000  # the spans and the three records fit; the built record does not
    assert len(documents) + sum(r.size for r in records) < bound
    stage, _ = _stage(telemetry, [held], workers=1, queue_bytes=bound)
    await stage.start()
    assert await stage.put_many([trace]) == 1
    await wait_until_async(lambda: held.entered == 1, 5, "the trace's record in work")
    putting = asyncio.create_task(stage.put_many(records))
    # Admitted together when they fit: one queued means the others wait.
    await wait_until_async(lambda: len(stage._queue) == 1, 5, "one record queued")
    assert not putting.done() and len(stage._queue) == 1
    held.gate.set()
    async with asyncio.timeout(5):
        assert await putting == 3
    await stage.shutdown(5)
    assert held.calls == 4


class CpuScorerStub:
    """A CPU scorer (sync `score`) that notes which thread ran it."""

    kind: Literal["local"] = "local"
    requires: frozenset[Part] = frozenset()

    def __init__(self, name: str, *, raises: bool = False, sleep_s: float = 0.0) -> None:
        self.name, self.raises, self.sleep_s = name, raises, sleep_s
        self.threads: list[int] = []

    def score(self, record: RagRecord) -> EvalResult:
        self.threads.append(threading.get_ident())
        time.sleep(self.sleep_s)
        if self.raises:
            raise ValueError("scorer broke")
        return EvalResult(name=self.name, score=1.0, normalized=1.0, passed=True)

    async def evaluate(self, record: RagRecord) -> EvalResult:
        return await asyncio.to_thread(self.score, record)


async def test_cpu_scorers_of_a_record_share_one_worker_thread_hop(telemetry: Telemetry) -> None:
    first, second, broken = CpuScorerStub("a"), CpuScorerStub("b"), CpuScorerStub("c", raises=True)
    stage, summary = _stage(telemetry, [first, second, broken])  # type: ignore[list-item]
    await stage.start()
    for i in range(3):
        await _put(stage, _rec(i))
    await stage.shutdown(5)
    loop_thread = threading.get_ident()
    for i in range(3):
        # Each record: one thread ran all three scorers, and it was not the loop's.
        ran = {first.threads[i], second.threads[i], broken.threads[i]}
        assert len(ran) == 1 and loop_thread not in ran
    assert summary.totals["a"].passed == 3 and summary.totals["b"].passed == 3
    assert summary.totals["c"].errors == 3  # one scorer failing spoils only its own result


async def test_cpu_scorers_past_the_deadline_are_errors(telemetry: Telemetry) -> None:
    stuck = CpuScorerStub("stuck", sleep_s=1.0)
    stage, summary = _stage(telemetry, [stuck], timeout=0.2)  # type: ignore[list-item]
    await stage.start()
    await _put(stage, _rec(1))
    await stage.shutdown(5)
    assert summary.totals["stuck"].errors == 1 and summary.totals["stuck"].passed == 0


async def test_on_done_waits_until_the_results_line_is_written(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    path = tmp_path / "results.jsonl"
    results = ResultsFileSink(path, telemetry)
    stage, _ = _stage(telemetry, [ScriptedEvaluator("e")], extra_sinks=(results,))
    await results.start()  # sinks run from before the stage starts until after it stops
    await stage.start()
    seen: dict[str, bool] = {}

    def on_done(request_id: str, ok: bool) -> None:
        assert ok
        # What a Kafka commit relies on: the line is in the file when the record is done.
        lines = path.read_text().splitlines() if path.exists() else []
        seen[request_id] = any(json.loads(line)["request_id"] == request_id for line in lines)

    for i in range(20):
        await _put(stage, _rec(i), on_done=partial(on_done, f"r{i}"))
    await wait_until_async(lambda: len(seen) == 20, 5, "every record done")
    await stage.shutdown(5)
    await results.shutdown(5)
    assert seen == {f"r{i}": True for i in range(20)}


class HeldWritesSink:
    """A persisting sink whose writes complete only when it shuts down, as a results file
    that has not flushed yet: each future then resolves to `written_on_close`."""

    def __init__(self, written_on_close: bool) -> None:
        self.written_on_close = written_on_close
        self.held: list[asyncio.Future[bool]] = []

    async def start(self) -> None:
        return None

    def emit(self, batch: Sequence[Evaluated]) -> list[asyncio.Future[bool]]:
        loop = asyncio.get_running_loop()
        written: list[asyncio.Future[bool]] = [loop.create_future() for _ in batch]
        self.held.extend(written)
        return written

    async def shutdown(self, deadline_s: float) -> None:
        for written in self.held:
            written.set_result(self.written_on_close)


class StuckOn(ScriptedEvaluator):
    """Scores every record at once except `stuck_id`, which never finishes."""

    def __init__(self, stuck_id: str) -> None:
        super().__init__("stuck")
        self.stuck_id = stuck_id

    async def evaluate(self, record: RagRecord) -> EvalResult:
        if record.request_id == self.stuck_id:
            await asyncio.Event().wait()
        return await super().evaluate(record)


@pytest.mark.parametrize("written_on_close", [True, False])
async def test_shutdown_deadline_keeps_records_whose_results_wait_for_a_write(
    telemetry: Telemetry, written_on_close: bool
) -> None:
    # Records already evaluated, whose results line is still being written, are not
    # abandoned at the deadline: stopping the sink (after the stage, as the service does)
    # writes them, and they finish ok. A write that fails then makes its record abandoned
    # after all, and counted.
    sink = HeldWritesSink(written_on_close)
    stage, _ = _stage(telemetry, [StuckOn("r2")], workers=2, timeout=60, extra_sinks=(sink,))
    await stage.start()
    done: list[tuple[int, bool]] = []
    for i in range(3):
        await _put(stage, _rec(i), on_done=partial(_record_done, done, i))
    await wait_until_async(lambda: len(sink.held) == 2, 30, "two results waiting for their write")
    # The stuck record is written unevaluated: whether any is abandoned is the writes' say.
    abandoned = 0 if written_on_close else 3
    await stage.shutdown(0.1)
    await sink.shutdown(0.1)
    await stage.settle_writes()
    assert stage.abandoned == abandoned
    assert sorted(done) == [(0, written_on_close), (1, written_on_close), (2, written_on_close)]
    dropped = _value(telemetry, "dropped_total", stage="evaluate", reason="shutdown_deadline")
    assert dropped == abandoned


async def test_items_handed_in_between_wake_ups_go_to_a_worker_as_one_batch(
    telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first items after a quiet interval go to a worker at once; those handed in
    before `BATCH_INTERVAL_S` has passed wait and go together, or as soon as they make a
    whole batch: one task per batch, not one per hand-over. (The interval is made long
    here, so that only a whole batch moves them.)"""
    monkeypatch.setattr(queue_module, "BATCH_INTERVAL_S", 3600.0)
    stage, summary = _stage(telemetry, [CpuScorerStub("a")])  # type: ignore[list-item]
    batches: list[int] = []
    run = stage._runner.run

    async def counted(jobs: Sequence[Job]) -> list[Outcome]:
        batches.append(len(jobs))
        return await run(jobs)

    monkeypatch.setattr(stage._runner, "run", counted)
    await stage.start()
    items = [SampledRecord(_rec(i), "test", _ALL) for i in range(17)]
    assert stage.take(items[:1]) == 1
    await wait_until_async(lambda: batches == [1], 5, "the first record at once")
    for item in items[1:16]:
        assert stage.take([item]) == 1
    for _ in range(5):
        await asyncio.sleep(0)
    assert batches == [1]  # fifteen wait for the interval or a whole batch
    assert stage.take(items[16:]) == 1
    await wait_until_async(lambda: batches == [1, 16], 5, "the sixteen as one batch")
    await stage.shutdown(5)
    assert summary.records == 17


async def test_a_judge_gets_the_time_its_own_settings_give_it(telemetry: Telemetry) -> None:
    """`pipeline.evaluation_timeout_s` shorter than what the judge's settings let a call
    take (`judge.timeout_s`, `retries`, `backoff_max_s`): the judge is not cut at it, a
    local evaluator still is."""
    from monitor.config import Judge
    from monitor.judge.client import longest_call_s

    assert longest_call_s(Judge(timeout_s=90, retries=1, backoff_max_s=5)) == 2 * (180 + 5)
    judge = ScriptedEvaluator("judge", kind="judge", delay=0.3, value=0.9)
    local = ScriptedEvaluator("local", delay=0.3, value=0.9)
    summary = SummarySink()
    stage = EvaluationStage(
        [(judge, EvaluatorConfig(name="faithfulness")), (local, EvaluatorConfig(name="relevance"))],
        BudgetGate(Budget()),
        [MetricsSink(telemetry), summary],
        telemetry,
        evaluation_timeout_s=0.05,
        judge_timeout_s=longest_call_s(Judge(timeout_s=30)),
    )
    await stage.start()
    await _put(stage, _rec(1))
    await stage.shutdown(30)
    assert summary.totals["judge"].passed == 1
    assert summary.totals["local"].errors == 1


async def test_a_record_in_a_script_the_detector_was_not_measured_on_gets_no_local_verdict(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """Thai, Arabic and Korean answers get no local_groundedness verdict but a counted skip
    per language and a log line naming the judge that can score them; Chinese, Japanese
    and English answers are scored."""
    local = ScriptedEvaluator("local_groundedness")
    judge = ScriptedEvaluator("groundedness", kind="judge")
    specs = [EvaluatorConfig(name="local_groundedness"), EvaluatorConfig(name="groundedness")]
    stage, _ = _stage(telemetry, [local, judge], specs=specs)
    await stage.start()
    answers = {
        "thai": "ราคาเจ็ดยูโรต่อก้อน",
        "arabic": "السعر سبعة يورو للرغيف",
        "hangul": "빵 한 개의 가격은 칠 유로입니다",
        "han": "黑麦面包每个七欧元。",
        "japanese": "ライ麦パンは一個七ユーロです。",
        "latin": "Rye bread costs seven euros.",
    }
    for i, answer in enumerate(answers.values()):
        await _put(stage, _rec(i, response=answer))
    await stage.shutdown(5)
    assert (local.calls, judge.calls) == (3, 6)
    for language in ("thai", "arabic", "hangul"):
        labels = {"service": "svc", "evaluator": "local_groundedness", "language": language}
        assert _value(telemetry, "evaluations_unsupported_language_total", **labels) == 1
    skipped = {"service": "svc", "evaluator": "local_groundedness"}
    assert (
        _value(telemetry, "evaluations_skipped_total", **skipped, reason="unsupported_language")
        == 3
    )
    said = [r.getMessage() for r in caplog.records if "svc" in r.getMessage()]
    assert any("Thai" in m and "groundedness" in m for m in said)
    assert any("Korean" in m for m in said) and any("Arabic" in m for m in said)


async def test_the_language_line_names_every_embedded_evaluator_that_skips(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """A Russian answer: the one line per service and language names each embedded
    evaluator that gives no verdict on it, not only the first that skipped."""
    names = ["local_groundedness", "local_relevance", "local_safety"]
    evaluators = [ScriptedEvaluator(name) for name in names]
    stage, _ = _stage(telemetry, evaluators, specs=[EvaluatorConfig(name=n) for n in names])
    await stage.start()
    await _put(stage, _rec(1, response="Гарантия на чайник составляет два года."))
    await stage.shutdown(5)
    assert [e.calls for e in evaluators] == [0, 0, 0]
    said = [r.getMessage() for r in caplog.records if "get no verdict" in r.getMessage()]
    (cyrillic,) = said
    assert "cyrillic" in cyrillic
    assert "(local_groundedness, local_relevance, local_safety skipped;" in cyrillic
