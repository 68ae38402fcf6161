"""The evaluation stage's task in worker processes (`pipeline.processes`): same results as
in-process, a worker killed mid-batch or hanging past the deadline is replaced and its
records become errors (never pass, never defect), shutdown drains, and the stage pushes
back when every worker is busy. Sampled traces are extracted in the workers as in-process,
in the same task as their scoring; traces a lost worker was on go to another one once."""

from __future__ import annotations

import ast
import asyncio
import os
import signal
import time
from functools import partial
from pathlib import Path

import pytest
from pebble.pool import process as pebble_process

import monitor.pool
from harness.otlp import CONVENTIONS, WATER, capture, otlp_bytes
from harness.pool_scorers import (
    ScriptedScorer,
    fail,
    pool,
    scripted_extraction,
    scripted_scorer,
)
from harness.wait import wait_until, wait_until_async
from monitor.component import SampledRecord
from monitor.config import Budget, EvaluatorConfig, Pipeline, available_cpus
from monitor.evaluators.base import CpuScorer
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.extraction import Cause, TraceRecords, Unreadable, extract_within
from monitor.pool import ProcessPool, TaskFailed, WorkerLost
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation import EvaluationStage
from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import (
    Job,
    Outcome,
    ScorerFactory,
    Settings,
    build_scorer,
)
from monitor.receivers.replay_summary import SummarySink
from monitor.records import RagRecord
from monitor.records.limits import SizeLimits
from monitor.results import EvalResult
from monitor.spans import Span, decode_protobuf
from monitor.telemetry import Telemetry, create_telemetry

SCRIPTED = EvaluatorConfig(name="scripted")


def _rec(i: int, query: str = "q", **kw: object) -> RagRecord:
    base: dict[str, object] = {
        "request_id": f"r{i}",
        "trace_id": f"{i:032x}",
        "query": query,
        "response": "a",
        "retrieved_context": [{"content": "c"}],
    }
    base.update(kw)
    return RagRecord.model_validate(base)


def _restarts_are(telemetry: Telemetry, n: int) -> bool:
    return _metric(telemetry, "worker_restarts_total", reason="died") == n


def _metric(telemetry: Telemetry, name: str, **labels: str) -> float:
    value = telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)
    return 0.0 if value is None else value


Batch = list[tuple[RagRecord, tuple[str, ...]]]
Scored = list[list[tuple[EvalResult, float]]]


class _Pool:
    """A started pool and the evaluation stage's task runner on it."""

    def __init__(self, processes: ProcessPool, runner: TaskRunner) -> None:
        self.processes = processes
        self.runner = runner

    @property
    def pids(self) -> list[int]:
        return self.processes.pids

    @property
    def in_flight(self) -> int:
        return self.processes.in_flight

    async def score(self, batch: Batch) -> Scored:
        """Each record's results in the order of the names asked for."""
        done = await self.runner.run([Job(names, record=record) for record, names in batch])
        rows: Scored = []
        for (_, names), outcome in zip(batch, done, strict=True):
            assert outcome.scored is not None
            (scored,) = outcome.scored
            rows.append([scored[name] for name in names])
        return rows

    async def extract(
        self, traces: list[list[Span]], scorers: tuple[str, ...] = ()
    ) -> list[Outcome]:
        return await self.runner.run([Job(scorers, spans=spans) for spans in traces])

    async def close(self, deadline_s: float) -> None:
        await self.processes.shutdown(deadline_s)


async def _started(
    telemetry: Telemetry,
    *,
    processes: int = 1,
    deadline_s: float = 60.0,
    specs: tuple[EvaluatorConfig, ...] = (SCRIPTED,),
    factory: ScorerFactory | None = None,
) -> _Pool:
    processes_pool = pool(specs, processes, deadline_s, telemetry, factory or scripted_scorer)
    await processes_pool.start()
    # What this process reads of the scorers (which records they can score).
    scorers = {spec.name: (factory or scripted_scorer)(spec) for spec in specs}
    runner = TaskRunner(
        processes_pool,
        scorers,
        Settings(),
        evaluation_timeout_s=deadline_s,
        extraction_timeout_s=0.0,
    )
    return _Pool(processes_pool, runner)


async def test_results_are_the_same_as_in_process() -> None:
    names = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")
    specs = [EvaluatorConfig(name=n) for n in names]
    records = [
        _rec(
            i,
            query="How tall is the tower?",
            response=answer,
            retrieved_context=[{"content": "The tower is 330 metres tall and opened in 1889."}],
        )
        for i, answer in enumerate(
            ["It is 330 metres tall.", "It is 900 metres tall and made of gold.", "I hate you."]
        )
    ]
    telemetry = create_telemetry()
    pool = await _started(telemetry, processes=2, specs=tuple(specs), factory=build_scorer)
    try:
        scored = await pool.score([(r, names) for r in records])
    finally:
        await pool.close(5.0)
    local = {n: build(EvaluatorConfig(name=n), BuildContext()) for n in names}
    for record, row in zip(records, scored, strict=True):
        for name, (result, _) in zip(names, row, strict=True):
            scorer = local[name]
            assert isinstance(scorer, CpuScorer)
            assert result == scorer.score(record), (record.request_id, name)
    assert _metric(telemetry, "worker_processes") == 0


async def test_a_worker_killed_mid_batch_is_replaced_and_its_records_scored_again_once(
    tmp_path: Path,
) -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry)
    try:
        (first,) = pool.pids
        inside = tmp_path / "inside"
        batch: list[tuple[RagRecord, tuple[str, ...]]] = [
            (_rec(1, f"hang:{inside}"), ("scripted",)),
            (_rec(2), ("scripted",)),
        ]
        scoring = asyncio.create_task(pool.score(batch))
        await wait_until_async(inside.exists, 60, "the worker to be inside the batch")
        assert _metric(telemetry, "worker_processes_busy") == 1
        inside.unlink()
        os.kill(first, signal.SIGKILL)
        # Each record goes again, alone, to the replacement: the hanging one hangs it too.
        await wait_until_async(inside.exists, 60, "the replacement to be inside record 1")
        (second,) = pool.pids
        assert second != first
        os.kill(second, signal.SIGKILL)
        scored = await asyncio.wait_for(scoring, 60)
        assert [result.outcome for row in scored for result, _ in row] == ["error", "pass"]
        assert "died" in (scored[0][0][0].error or "")
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 2
        await wait_until_async(lambda: len(pool.pids) == 1, 60, "a replacement worker")
        assert pool.pids != [second]
        (row,) = await pool.score([(_rec(3), ("scripted",))])
        assert [result.outcome for result, _ in row] == ["pass"]
        assert _metric(telemetry, "worker_processes_busy") == 0
    finally:
        await pool.close(5.0)


async def test_a_record_that_crashes_workers_costs_its_batch_mates_nothing() -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry, processes=2)
    try:
        batch: list[tuple[RagRecord, tuple[str, ...]]] = [
            (_rec(i, "crash" if i == 1 else "q"), ("scripted",)) for i in range(4)
        ]
        scored = await asyncio.wait_for(pool.score(batch), 120)
        outcomes = [result.outcome for row in scored for result, _ in row]
        assert outcomes == ["pass", "error", "pass", "pass"]
        assert "died" in (scored[1][0][0].error or "")
        # The batch, then record 1 alone: no third worker is lost.
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 2
        (row,) = await pool.score([(_rec(9, "crash"), ("scripted",))])
        assert [result.outcome for result, _ in row] == ["error"]  # alone: not retried
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 3
    finally:
        await pool.close(5.0)


async def test_batches_queued_behind_a_killed_worker_go_to_another_worker(
    tmp_path: Path,
) -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry)
    try:
        (first,) = pool.pids
        inside = tmp_path / "inside"
        # One worker, two batches in flight: it scores the first, the second waits behind.
        scoring = asyncio.create_task(pool.score([(_rec(1, f"hang:{inside}"), ("scripted",))]))
        await wait_until_async(inside.exists, 60, "the worker to be inside the first batch")
        queued = asyncio.create_task(
            pool.score([(_rec(2), ("scripted",)), (_rec(3), ("scripted",))])
        )
        await wait_until_async(lambda: pool.in_flight == 2, 60, "the second batch to be sent")
        os.kill(first, signal.SIGKILL)
        (row,) = await asyncio.wait_for(scoring, 60)
        assert [result.outcome for result, _ in row] == ["error"]
        behind = await asyncio.wait_for(queued, 60)
        assert [result.outcome for row in behind for result, _ in row] == ["pass", "pass"]
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 1
        assert pool.pids != [first]
    finally:
        await pool.close(5.0)


async def test_closing_answers_batches_in_flight_with_errors(tmp_path: Path) -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry)
    inside = tmp_path / "inside"
    scoring = asyncio.create_task(pool.score([(_rec(1, f"hang:{inside}"), ("scripted",))]))
    await wait_until_async(inside.exists, 60, "the worker to be inside the batch")
    await pool.close(0.0)
    (row,) = await asyncio.wait_for(scoring, 60)
    assert [result.outcome for result, _ in row] == ["error"]
    assert _metric(telemetry, "worker_restarts_total", reason="died") == 0
    assert _metric(telemetry, "worker_processes") == 0
    assert pool.pids == []


async def test_a_worker_that_hangs_past_the_deadline_is_replaced(tmp_path: Path) -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry, deadline_s=2.0)
    try:
        (first,) = pool.pids
        (row,) = await pool.score([(_rec(1, f"hang:{tmp_path / 'in'}"), ("scripted",))])
        ((result, _),) = row
        assert result.outcome == "error" and "hung" in (result.error or "")
        assert _metric(telemetry, "worker_restarts_total", reason="hung") == 1
        await wait_until_async(lambda: len(pool.pids) == 1, 60, "a replacement worker")
        assert pool.pids != [first]
        (row,) = await pool.score([(_rec(2), ("scripted",))])
        assert [r.outcome for r, _ in row] == ["pass"]
    finally:
        await pool.close(5.0)


async def test_a_worker_that_dies_idle_is_counted_and_replaced() -> None:
    """With no task anywhere, a worker's death stops pebble's pool: it is counted once,
    the pool is started again, and the next task is answered."""
    telemetry = create_telemetry()
    pool = await _started(telemetry)
    try:
        (first,) = pool.pids
        os.kill(first, signal.SIGKILL)
        await wait_until_async(partial(_restarts_are, telemetry, 1), 60, "the death counted")
        await wait_until_async(lambda: len(pool.pids) == 1, 60, "a replacement worker")
        assert pool.pids != [first]
        (row,) = await pool.score([(_rec(1), ("scripted",))])
        assert [result.outcome for result, _ in row] == ["pass"]
        assert _restarts_are(telemetry, 1)
    finally:
        await pool.close(5.0)


def _sampled_traces() -> list[list[Span]]:
    """Traces as the OTLP receivers decode them (attributes still serialized): one per
    instrumentation convention, then one that is not a RAG trace, then one whose
    attributes are not valid protobuf."""
    traces = [
        decode_protobuf(otlp_bytes(capture(emit, WATER)[1]), lazy=True).spans
        for emit in CONVENTIONS.values()
    ]
    traces.append([_span("GET /health", "cd")])
    traces.append([Span("ef" * 16, "2" * 16, "", "broken", 1, 2, raw=b"\x4a\xff\xff\xff\x0f")])
    return traces


def _span(name: str, trace: str = "ab") -> Span:
    return Span(trace * 16, "1" * 16, "", name, 1, 2, attributes={"http.route": "/health"})


def _in_process(traces: list[list[Span]]) -> list[TraceRecords | Unreadable]:
    return [extract_within(spans, "http.route", SizeLimits()) for spans in traces]


async def test_sampled_traces_are_extracted_in_a_worker_as_in_process() -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry, processes=2)
    traces = _sampled_traces()
    try:
        extracted = await pool.extract(traces)
        scored = await pool.extract(traces, ("scripted",))
    finally:
        await pool.close(5.0)
    # Extracted elsewhere: nothing of the received spans was decoded in this process.
    assert not any(span.decoded for spans in traces[:-2] for span in spans)
    expected = _in_process(traces)
    assert [done.extraction for done in extracted] == expected
    assert [done.extraction for done in scored] == expected
    records = [e for e in expected[:-2] if isinstance(e, TraceRecords)]
    assert [len(e.records) for e in records] == [1] * len(CONVENTIONS)
    # A health check: no record, and why (counted by that reason, never warned about).
    assert expected[-2] == TraceRecords(
        [], [], [], [Cause("health_check", None, "span 'GET /health' serves /health")]
    )
    assert isinstance(expected[-1], Unreadable) and expected[-1].reason == "bad_protobuf"
    # Scored in the same task: one result per record, none without a scorer asked for.
    rows = [done.scored for done in [*extracted, *scored]]
    assert all(row is not None for row in rows)
    assert all(row == [{}] * len(row or []) for row in rows[: len(extracted)])
    outcomes = [[s["scripted"][0].outcome for s in row or []] for row in rows[len(extracted) : -1]]
    assert outcomes == [["pass"]] * len(CONVENTIONS) + [[]]


async def test_traces_a_killed_worker_was_on_go_to_another_worker_once(tmp_path: Path) -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry, factory=scripted_extraction)
    try:
        once, always = tmp_path / "once", tmp_path / "always"
        water = _sampled_traces()[0]
        retried = asyncio.create_task(pool.extract([[_span(f"hang-once:{once}")], water]))
        await wait_until_async(once.exists, 60, "the worker to be inside the extraction")
        os.kill(pool.pids[0], signal.SIGKILL)
        extracted = await asyncio.wait_for(retried, 60)
        assert [d.extraction for d in extracted] == _in_process(
            [[_span(f"hang-once:{once}")], water]
        )
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 1

        # A trace alone that takes down its worker is extracted once more without scoring,
        # to tell whether its extraction or its scoring failed: when that takes the worker
        # down too, the trace is given up and says why; the pool goes on.
        lost = asyncio.create_task(pool.extract([[_span(f"hang:{always}")]], ("scripted",)))
        for attempt in (1, 2):
            await wait_until_async(always.exists, 60, "a worker to be inside the extraction")
            always.unlink()
            os.kill(pool.pids[0], signal.SIGKILL)
            await wait_until_async(
                partial(_restarts_are, telemetry, 1 + attempt), 60, "the worker to be replaced"
            )
        (done,) = await asyncio.wait_for(lost, 60)
        assert done == Outcome(
            Unreadable("extract_failed", "evaluation worker process died while extracting"), []
        )
        await wait_until_async(lambda: len(pool.pids) == 1, 60, "a replacement worker")
        assert [d.extraction for d in await pool.extract([water])] == _in_process([water])
    finally:
        await pool.close(5.0)


async def test_a_trace_whose_scoring_takes_down_workers_gives_its_records_error_results() -> None:
    """Alone in its task, it takes down one worker; extracted again without scoring, it
    gives its record, whose CPU scorers give errors (never a pass, never a defect)."""
    telemetry = create_telemetry()
    pool = await _started(telemetry)
    try:
        crashing = [
            Span("ab" * 16, "1" * 16, "", "ask", 1, 2, attributes={
                "rag.query": "crash", "rag.response": "an answer", "rag.context": "a document",
            })
        ]  # fmt: skip
        (done,) = await asyncio.wait_for(pool.extract([crashing], ("scripted",)), 120)
        assert isinstance(done.extraction, TraceRecords) and len(done.extraction.records) == 1
        assert done.scored is not None
        ((result, _),) = done.scored[0].values()
        assert result.outcome == "error" and "died" in (result.error or "")
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 1
    finally:
        await pool.close(5.0)


class _LateAcknowledgements:
    """A scripted lag of pebble's message thread (a loaded machine): while `armed`, the
    next worker's acknowledgement of a task is read only once pebble's pool manager has
    handled that worker's death. `seen` lists the workers whose acknowledgement was read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, armed: bool) -> None:
        self.armed = armed
        self.lagged: list[int] = []
        self.seen: list[int] = []
        self._expired: list[int] = []  # workers whose death pebble has handled
        receive = pebble_process.WorkerManager.receive
        handle = pebble_process.PoolManager.handle_worker_expiration

        def late(manager: pebble_process.WorkerManager, timeout: float) -> object:
            message = receive(manager, timeout)
            if isinstance(message, pebble_process.Acknowledgement):
                if self.armed:
                    self.armed = False
                    wait_until(lambda: message.worker in self._expired, 60, "its death handled")
                    self.lagged.append(message.worker)
                self.seen.append(message.worker)
            return message

        def handled(manager: pebble_process.PoolManager, expiration: tuple[int, int]) -> None:
            try:
                handle(manager, expiration)
            finally:
                self._expired.append(expiration[0])

        monkeypatch.setattr(pebble_process.WorkerManager, "receive", late)
        monkeypatch.setattr(pebble_process.PoolManager, "handle_worker_expiration", handled)


async def test_a_worker_lost_on_a_task_before_pebble_reads_its_acknowledgement_counts_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker takes the task and dies before pebble reads its acknowledgement: pebble
    sees a death with no task running and answers every task with `BrokenProcessPool`.
    The task it took is still the one lost: one death counted, the task not sent to
    another worker behind the submitter's back, its records error results."""
    late = _LateAcknowledgements(monkeypatch, armed=True)
    await test_a_trace_whose_scoring_takes_down_workers_gives_its_records_error_results()
    assert len(late.lagged) == 1


class _PebbleClock:
    """The clock pebble times its tasks' deadlines by, moved by the test; it sleeps as
    ever between its looks."""

    sleep = staticmethod(time.sleep)

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(pebble_process, "time", self)

    def time(self) -> float:
        return self.now


async def test_a_worker_lost_unseen_beside_a_running_task_is_answered_and_counted_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As above with another task running on another worker: pebble then takes the death
    for an idle one's (it replaces the worker and answers nothing), and the lost task for
    one that runs until its deadline. The pool answers it as the worker's replacement
    reports, counts the death once, and not again as a hang at the deadline."""
    late = _LateAcknowledgements(monkeypatch, armed=False)
    clock = _PebbleClock(monkeypatch)
    telemetry = create_telemetry()
    pool = await _started(telemetry, processes=2)
    try:
        inside = tmp_path / "inside"
        running = asyncio.create_task(pool.score([(_rec(1, f"hang:{inside}"), ("scripted",))]))
        await wait_until_async(lambda: inside.exists() and late.seen, 60, "a task running")
        late.armed = True
        # A worker ends at once, as a crash in the task would end it.
        lost = asyncio.create_task(pool.processes.submit(os._exit, 137, timeout_s=1.0))
        await wait_until_async(partial(_restarts_are, telemetry, 1), 60, "the death counted")
        # The pool counts the death from its own watch; the lagged acknowledgement is read
        # on pebble's message thread once that thread sees the death handled, in either order.
        await wait_until_async(lambda: len(late.lagged) == 1, 60, "the acknowledgement read late")
        with pytest.raises(WorkerLost, match="died"):
            await asyncio.wait_for(lost, 60)  # not at its deadline: that has not come
        pebble_pool = pool.processes._pebble
        assert pebble_pool is not None
        tasks = pebble_pool._pool_manager.task_manager.tasks
        clock.now += 2.0  # the lost task's deadline, not the running one's
        await wait_until_async(lambda: len(tasks) == 1, 60, "pebble to answer the lost task")
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 1
        assert _metric(telemetry, "worker_restarts_total", reason="hung") == 0
        assert not running.done()
        await wait_until_async(lambda: len(pool.pids) == 2, 60, "a replacement worker")
        (row,) = await pool.score([(_rec(2), ("scripted",))])
        assert [result.outcome for result, _ in row] == ["pass"]
    finally:
        await pool.close(0.0)
    (row,) = await running
    assert [result.outcome for result, _ in row] == ["error"]


async def _stage_with_pool(
    telemetry: Telemetry, summary: SummarySink, processes: int, queue_size: int = 1000
) -> EvaluationStage:
    stage = EvaluationStage(
        [(ScriptedScorer("scripted"), EvaluatorConfig(name="local_groundedness"))],
        BudgetGate(Budget()),
        [summary],
        telemetry,
        queue_size=queue_size,
        workers=4,
        cpu_pool=pool([SCRIPTED], processes, 60.0, telemetry),
    )
    await stage.start()
    return stage


async def test_shutdown_drains_in_flight_records_and_stops_the_workers() -> None:
    telemetry = create_telemetry()
    summary = SummarySink()
    stage = await _stage_with_pool(telemetry, summary, processes=2)
    done: list[bool] = []
    items = [
        SampledRecord(_rec(i, "sleep:0.01"), "test", frozenset({"scripted"}), done.append)
        for i in range(60)
    ]
    assert await stage.put_many(items) == 60
    await stage.shutdown(deadline_s=120)
    assert stage.abandoned == 0
    assert done == [True] * 60
    assert summary.records == 60
    assert summary.totals["scripted"].count == 60
    assert _metric(telemetry, "worker_processes") == 0


async def test_busy_workers_push_back_on_the_queue(tmp_path: Path) -> None:
    telemetry = create_telemetry()
    summary = SummarySink()
    stage = await _stage_with_pool(telemetry, summary, processes=1, queue_size=2)
    inside = tmp_path / "inside"
    try:
        # One record holds the only worker, the other stage workers wait for it with the
        # batches they took, the queue then fills and put_many waits.
        first = SampledRecord(_rec(0, f"hang:{inside}"), "test", frozenset({"scripted"}))
        assert await stage.put_many([first]) == 1
        await wait_until_async(inside.exists, 60, "the worker to be busy")
        waiting = [SampledRecord(_rec(i), "test", frozenset({"scripted"})) for i in range(1, 60)]
        putting = asyncio.create_task(stage.put_many(waiting))
        await wait_until_async(
            lambda: _metric(telemetry, "queue_depth", stage="evaluate") == 2,
            60,
            "the queue to fill",
        )
        assert not putting.done()
        putting.cancel()
    finally:
        await stage.shutdown(deadline_s=1)


def test_the_default_is_the_cpus_this_process_may_use() -> None:
    assert 1 <= available_cpus() <= len(os.sched_getaffinity(0))
    assert Pipeline().processes == available_cpus()
    with pytest.raises(ValueError):
        Pipeline(processes=-1)


async def test_a_task_that_raises_is_reported_to_its_submitter_and_the_worker_goes_on() -> None:
    telemetry = create_telemetry()
    pool = await _started(telemetry)
    try:
        (worker,) = pool.pids
        with pytest.raises(TaskFailed, match="ValueError: no"):
            await pool.processes.submit(fail, "no")
        (row,) = await pool.score([(_rec(1), ("scripted",))])
        assert [result.outcome for result, _ in row] == ["pass"]
        assert pool.pids == [worker]
        assert _metric(telemetry, "worker_restarts_total", reason="died") == 0
    finally:
        await pool.close(5.0)


def test_the_pool_imports_no_pipeline_stage() -> None:
    allowed = ("monitor.pool", "monitor.shared.processes", "monitor.telemetry")
    for path in Path(monitor.pool.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("monitor"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"
