"""Without worker processes (`pipeline.processes: 0`), a batch that never returns (a hang,
scripted here by a scorer that blocks until the test ends) costs its own thread only: past
its deadline its records get error results, and the event loop's default executor, which
`/metrics`, the results file and shutdown run on, stays free however many batches hang."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Literal

from harness.wait import wait_until_async
from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import Job, Settings
from monitor.records import Part, RagRecord
from monitor.results import EvalResult
from tests.evaluation.test_evaluation_stage import _rec


class BlockingScorer:
    """A CPU scorer that blocks until `release` is set."""

    kind: Literal["local", "judge"] = "local"
    requires: frozenset[Part] = frozenset()

    def __init__(self, release: threading.Event) -> None:
        self.name = "local_groundedness"
        self.release = release
        self.entered = 0

    async def evaluate(self, record: RagRecord) -> EvalResult:
        return self.score(record)

    def score(self, record: RagRecord) -> EvalResult:
        self.entered += 1
        self.release.wait()
        return EvalResult(name=self.name, score=1.0, normalized=1.0, passed=True)


async def test_hung_batches_never_take_the_default_executors_threads() -> None:
    release = threading.Event()
    scorer = BlockingScorer(release)
    runner = TaskRunner(
        None,
        {scorer.name: scorer},
        Settings(),
        evaluation_timeout_s=0.2,
        extraction_timeout_s=0.0,
    )
    # More hung batches than the default executor has threads.
    hung = min(32, (os.cpu_count() or 1) + 4) + 2
    try:
        for i in range(hung):
            (outcome,) = await runner.run([Job((scorer.name,), record=_rec(i))])
            assert outcome.scored is not None
            ((result, _),) = [scored[scorer.name] for scored in outcome.scored]
            assert result.error == "timeout: no verdict within 0.2s"
        await wait_until_async(lambda: scorer.entered == hung, 30, "every batch to hang")
        answered = asyncio.ensure_future(asyncio.to_thread(lambda: "free"))
        await wait_until_async(answered.done, 30, "the default executor to run a call")
        assert answered.result() == "free"
    finally:
        release.set()
