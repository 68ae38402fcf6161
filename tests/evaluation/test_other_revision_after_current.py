"""Without worker processes (`pipeline.processes: 0`), a batch's task scores every job with
the evaluators' current revisions before any other revision (`_other_revision.py`):
a thread hop past its deadline keeps what it scored, so the deadline costs the previous
revisions' verdicts (a bounded extra) before the evaluators' own; those it had not given
come back as error results (counted and logged where the stage takes them)."""

from __future__ import annotations

import asyncio
import threading

from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import Batch, Job, Outcome, Settings, run
from monitor.records import RagRecord
from monitor.results import EvalResult
from tests.evaluation.test_evaluation_stage import CpuScorerStub

WAIT_S = 60.0  # a condition's wait, never reached when the code is right


class Gate(CpuScorerStub):
    """Another revision that blocks until `release` is set, noting when it starts."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.entered = threading.Event()
        self.release = threading.Event()

    def score(self, record: RagRecord) -> EvalResult:
        self.entered.set()
        self.release.wait(WAIT_S)
        return EvalResult(name=self.name, score=0.0, normalized=0.0, passed=False)


def _record(n: int) -> RagRecord:
    return RagRecord(request_id=f"r{n}", query="q", response="a", trace_id=f"{n + 1:032x}")


async def test_every_job_is_scored_by_the_current_revisions_before_any_other_one() -> None:
    current, old = CpuScorerStub("e"), Gate("e")
    jobs = [Job(("e",), record=_record(n), others=("e",)) for n in range(3)]
    outcomes: list[Outcome] = []
    task = asyncio.create_task(
        asyncio.to_thread(run, Batch(jobs), {"e": current}, Settings(), outcomes, {"e": old})
    )
    try:
        assert await asyncio.to_thread(old.entered.wait, WAIT_S), "the other revision ran"
        # The thread is held inside the first previous verdict: every job's own are in.
        assert len(outcomes) == len(jobs)
        assert all(o.scored is not None and o.scored[0]["e"][0].passed for o in outcomes)
        assert all(o.others_of(0) == {} for o in outcomes)
    finally:
        old.release.set()
        await task
    assert all(not o.others_of(0)["e"][0].passed for o in outcomes)


def test_a_deadline_passed_between_the_revisions_keeps_the_current_results() -> None:
    runner = TaskRunner(
        None,
        {"e": CpuScorerStub("e")},
        Settings(),
        evaluation_timeout_s=1.0,
        extraction_timeout_s=0.0,
        others={"e": CpuScorerStub("e")},
    )
    jobs = [Job(("e",), record=_record(n), others=("e",)) for n in range(3)]
    own = {"e": (EvalResult("e", score=1.0, normalized=1.0, passed=True), 0.1)}
    old = {"e": (EvalResult("e", score=0.0, normalized=0.0, passed=False), 0.1)}
    # Where the thread was at the deadline: every job scored, the first one's previous
    # revision too, the second's under way, the third's not started.
    done = [Outcome(None, [own], [old]), Outcome(None, [own]), Outcome(None, [own])]
    kept = runner._kept(jobs, done, "timeout: no verdict within 1s")
    assert [o.scored for o in kept] == [[own]] * 3
    assert kept[0].others_of(0) == old
    for outcome in kept[1:]:
        ((result, _),) = outcome.others_of(0).values()
        assert result.outcome == "error" and result.error == "timeout: no verdict within 1s"
    # The outcomes the thread may still write to are not the ones handed on.
    assert kept[1] is not done[1] and done[1].others == []
