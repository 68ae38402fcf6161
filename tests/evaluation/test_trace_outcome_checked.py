"""A trace's outcome whose results do not pair one to one with its records (a defect of the
task or the runner, scripted here) is never half-used: the stage checks it with code that
`python -O` keeps (not an `assert`), and the trace goes down the stage's failure path,
finished not ok and counted (`dropped_total{stage="evaluate",reason="internal_error"}`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from monitor.component import SampledTrace
from monitor.extraction import TraceRecords
from monitor.processors.evaluation._task import Job, Outcome
from monitor.results import EvalResult
from monitor.telemetry import Telemetry
from tests.evaluation.test_evaluation_stage import _ALL, CpuScorerStub, _rec, _stage, _value


async def test_a_trace_scored_on_more_records_than_it_has_is_failed_and_counted(
    telemetry: Telemetry,
) -> None:
    scorer = CpuScorerStub("e")
    stage, summary = _stage(telemetry, [scorer], workers=1)  # type: ignore[list-item]
    scored = {"e": (EvalResult("e", score=1.0, normalized=1.0, passed=True), 0.0)}

    async def scripted(jobs: Sequence[Job]) -> list[Outcome]:
        return [Outcome(TraceRecords([_rec(1)], [], []), [scored, scored]) for _ in jobs]

    stage._runner.run = scripted  # type: ignore[method-assign]
    await stage.start()
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    trace = SampledTrace([], "test", _ALL, lambda outcome: None, on_done=done.set_result)
    assert await stage.put_many([trace]) == 1
    assert await asyncio.wait_for(done, 30) is False
    await stage.shutdown(5)
    assert summary.records == 0
    assert _value(telemetry, "dropped_total", stage="evaluate", reason="internal_error") == 1
