"""Where a batch's task runs (`_task.py`) and what a failure leaves of it.

With worker processes (`pipeline.processes`), each trace's extraction in the worker has a
budget of its own, `pipeline.extraction_timeout_s` (`_task.extraction_budget`): a trace
past it is set aside alone (`Unreadable("extract_timeout")`, counted and logged by the
trace stage with its service and trace id) and the worker goes on with its batch-mates.
The task goes to the pool under one deadline, a backstop for what no alarm interrupts:
`pipeline.evaluation_timeout_s`, plus `pipeline.extraction_timeout_s` for each trace it
extracts (a worker past it is killed and replaced by the pool). A task whose worker is lost
goes again one job per task, to other workers, once: the trace or record that crashed or
hung the worker then costs only itself. A job lost a second time: a record's scorers give
error results (never a pass, never a defect); a trace is extracted once more without
scoring, so that its records get error results if the scoring was what failed, and it
counts as `extract_failed` if the extraction was.

Without worker processes, the task runs in a thread of its own under the same deadline
(`monitor.shared.own_thread`: never the loop's default executor, which a hung task would
otherwise starve); past it, what was done is kept and the rest fails the same way. A
thread takes no signal, so there a trace's extraction has no budget of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from functools import partial

from monitor.evaluators.base import CpuScorer
from monitor.extraction import TraceRecords, Unreadable
from monitor.pool import ProcessPool, TaskFailed, WorkerLost
from monitor.processors.evaluation._task import (
    Batch,
    Job,
    Outcome,
    Scored,
    Settings,
    planned,
    records_of,
    run,
    run_in_worker,
)
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.shared.own_thread import in_own_thread

log = logging.getLogger(__name__)


class TaskRunner:
    def __init__(
        self,
        pool: ProcessPool | None,
        scorers: Mapping[str, CpuScorer],
        settings: Settings,
        *,
        evaluation_timeout_s: float,
        extraction_timeout_s: float,
        others: Mapping[str, CpuScorer] | None = None,
    ) -> None:
        """`others`: the other revisions of CPU scorers (`_other_revision.py`), by
        evaluator, for the jobs that name them (`Job.others`)."""
        self._pool = pool
        # In this process: the scorers themselves (no pool), or what `planned` reads of
        # them (their models load in the workers).
        self._scorers = scorers
        self._others = dict(others or {})
        self._settings = settings
        self._evaluation_timeout = evaluation_timeout_s
        self._extraction_timeout = extraction_timeout_s

    async def run(self, jobs: Sequence[Job]) -> list[Outcome]:
        """Each job's outcome, in order, scored (`Outcome.scored` set)."""
        if not jobs:
            return []
        if self._pool is not None:
            return await self._in_pool(self._pool, jobs)
        return await self._in_thread(jobs)

    def _deadline(self, jobs: Sequence[Job]) -> float:
        # Each trace's extraction has a budget of its own (`Settings.extraction_budget_s`,
        # enforced in the worker): the batch's deadline leaves room for every one of them.
        traces = sum(job.record is None for job in jobs)
        return self._evaluation_timeout + self._extraction_timeout * traces

    # -- in the pool ----------------------------------------------------------------------

    async def _submit(self, pool: ProcessPool, batch: Batch) -> list[Outcome] | WorkerLost | str:
        try:
            return await pool.submit(run_in_worker, batch, timeout_s=self._deadline(batch.jobs))
        except WorkerLost as lost:
            return lost
        except TaskFailed as exc:
            return str(exc)

    async def _in_pool(self, pool: ProcessPool, jobs: Sequence[Job]) -> list[Outcome]:
        answer = await self._submit(pool, Batch(jobs))
        if isinstance(answer, list):
            return answer
        if isinstance(answer, str):
            return [self._failed(job, answer) for job in jobs]
        if len(jobs) == 1 or answer.stopping:
            return [await self._lost_twice(pool, job, answer) for job in jobs]
        # Which job took the worker down is unknown: each goes to another worker alone,
        # once, so one trace's or record's crash or hang costs its batch-mates nothing.
        log.warning("%s on a batch of %d: trying each alone", answer.error, len(jobs))
        return list(await asyncio.gather(*(self._alone(pool, job) for job in jobs)))

    async def _alone(self, pool: ProcessPool, job: Job) -> Outcome:
        answer = await self._submit(pool, Batch([job]))
        if isinstance(answer, list):
            return answer[0]
        if isinstance(answer, str):
            return self._failed(job, answer)
        return await self._lost_twice(pool, job, answer)

    async def _lost_twice(self, pool: ProcessPool, job: Job, lost: WorkerLost) -> Outcome:
        """A job whose worker was lost a second time (or the pool is stopping): error
        results; a trace is first extracted without scoring, to keep its records."""
        if job.record is None and not lost.stopping:
            answer = await self._submit(pool, Batch([job], score=False))
            if isinstance(answer, list):
                return self._failed_scoring(job, answer[0].extraction, lost.error)
        return self._failed(job, lost.error)

    # -- in a thread --------------------------------------------------------------------

    async def _in_thread(self, jobs: Sequence[Job]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        deadline = self._deadline(jobs)
        try:
            async with asyncio.timeout(deadline):
                batch = partial(
                    run, Batch(jobs), self._scorers, self._settings, outcomes, self._others
                )
                await in_own_thread(batch, "evaluation-batch")
        except TimeoutError:
            # The thread goes on alone (`in_own_thread`); what it had done by now is kept,
            # the rest has failed.
            log.warning("an evaluation batch in a thread gave no verdict within %gs", deadline)
            return self._kept(jobs, list(outcomes), f"timeout: no verdict within {deadline:g}s")
        return outcomes

    def _kept(self, jobs: Sequence[Job], done: Sequence[Outcome], error: str) -> list[Outcome]:
        """What a thread hop past its deadline leaves of `jobs`: the outcomes `done` so far
        whose records it scored, with error results for the other revisions it had not
        scored yet (they come after every job's current ones); error results for the
        rest."""
        kept = []
        for i, job in enumerate(jobs):
            outcome = done[i] if i < len(done) else None
            scored = outcome.scored if outcome is not None else None
            if outcome is None or scored is None:
                extraction = outcome.extraction if outcome is not None else None
                kept.append(self._failed_scoring(job, extraction, error))
            elif job.others and len(outcome.others) < len(scored):
                # A copy: the thread, running on, may still set the original's.
                records = records_of(job, outcome)
                others = [
                    self._failed_record(r, job.others, self._others, error) for r in records
                ]
                kept.append(Outcome(outcome.extraction, scored, others))
            else:
                kept.append(outcome)
        return kept

    # -- outcomes -------------------------------------------------------------------------

    def _failed(self, job: Job, error: str) -> Outcome:
        if job.record is None:
            return Outcome(Unreadable("extract_failed", f"{error} while extracting"), [])
        return self._failed_records(job, None, [job.record], error)

    def _failed_scoring(
        self, job: Job, extraction: TraceRecords | Unreadable | None, error: str
    ) -> Outcome:
        if extraction is None:
            return self._failed(job, error)
        if isinstance(extraction, Unreadable):
            return Outcome(extraction, [])
        return self._failed_records(job, extraction, extraction.records, error)

    def _failed_records(
        self,
        job: Job,
        extraction: TraceRecords | None,
        records: Sequence[RagRecord],
        error: str,
    ) -> Outcome:
        """Error results of the job's CPU scorers (and other revisions) on `records`."""
        return Outcome(
            extraction,
            [self._failed_record(r, job.scorers, self._scorers, error) for r in records],
            [self._failed_record(r, job.others, self._others, error) for r in records],
        )

    def _failed_record(
        self,
        record: RagRecord,
        names: Sequence[str],
        scorers: Mapping[str, CpuScorer],
        error: str,
    ) -> Scored:
        chosen = planned(record, names, scorers, self._settings.evaluate_suspect)
        return {name: (EvalResult.failed(name, error), 0.0) for name in chosen}
