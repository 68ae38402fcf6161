"""The evaluation stage's task on the process pool: scoring a batch of records with the
CPU scorers (the local evaluators) in a worker process.

Each worker builds its own CPU scorers from their `EvaluatorConfig`s once, when it starts
(`scorer_initializer`), and keeps them in this module's `_scorers`; `score_batch` is the
task. A batch whose worker is lost is scored again one record per batch, by other
workers, once: the record that crashed or hung the worker then costs only itself, and a
record lost a second time gets error results — never a pass, never a defect.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer
from monitor.evaluators.factory import BuildContext
from monitor.pool import Initializer, ProcessPool, TaskFailed, WorkerLost
from monitor.records import RagRecord
from monitor.results import EvalResult

log = logging.getLogger(__name__)

# A batch: each record with the names of the CPU scorers to run on it.
Batch = list[tuple[RagRecord, tuple[str, ...]]]
# Per record, per scorer in the order asked: the result and the seconds it took.
Scored = list[list[tuple[EvalResult, float]]]
# The same on the wire: a result as the tuple of its fields (unpickling a tuple and
# building the dataclass costs the ingest process a third of unpickling the dataclass).
_WireScored = list[list[tuple[tuple[Any, ...], float]]]
_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(EvalResult))

# Builds a CPU scorer in a worker; must be a module-level function (it is pickled by name).
ScorerFactory = Callable[[EvaluatorConfig], CpuScorer]

# What the worker pool's fork server imports before it forks workers: the tasks' code and
# the scorers' read-only tables, shared by every worker.
PRELOAD = ("monitor.processors._worker_preload",)


def build_scorer(spec: EvaluatorConfig) -> CpuScorer:
    """The registry's evaluator for `spec`, which must be a CPU scorer."""
    from monitor.evaluators.registry import build

    evaluator = build(spec, BuildContext())
    if not isinstance(evaluator, CpuScorer):
        raise TypeError(f"{spec.name} is not a CPU scorer")
    return evaluator


# -- in the worker process ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScorerSpecs:
    specs: tuple[EvaluatorConfig, ...]
    factory: ScorerFactory


_scorers: dict[str, CpuScorer] = {}


def build_scorers(setup: ScorerSpecs) -> None:
    """The worker's initializer: build and warm up its CPU scorers."""
    for spec in setup.specs:
        evaluator = setup.factory(spec)
        warm_up = getattr(evaluator, "warm_up", None)
        if warm_up is not None:
            asyncio.run(warm_up())
        _scorers[spec.name] = evaluator


def score_batch(batch: Batch) -> _WireScored:
    """The task: every record of `batch` with the scorers named for it."""
    scored: _WireScored = []
    for record, names in batch:
        row = []
        for name in names:
            started = time.perf_counter()
            try:
                result = _scorers[name].score(record)
            except Exception as exc:
                result = EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
            fields = tuple(getattr(result, field) for field in _RESULT_FIELDS)
            row.append((fields, time.perf_counter() - started))
        scored.append(row)
    return scored


# -- in the evaluation stage's process ------------------------------------------------------


def scorer_initializer(
    specs: Sequence[EvaluatorConfig], factory: ScorerFactory = build_scorer
) -> Initializer:
    """What a pool's workers run to be able to `score` `specs`."""
    return Initializer(build_scorers, ScorerSpecs(tuple(specs), factory))


def _failed(batch: Batch, error: str) -> Scored:
    return [[(EvalResult.failed(n, error), 0.0) for n in names] for _, names in batch]


async def _score_once(pool: ProcessPool, batch: Batch) -> Scored | WorkerLost:
    try:
        wire = await pool.submit(score_batch, batch, items=len(batch))
    except WorkerLost as lost:
        return lost
    except TaskFailed as exc:
        return _failed(batch, str(exc))
    return [[(EvalResult(*fields), seconds) for fields, seconds in row] for row in wire]


async def score(pool: ProcessPool, batch: Batch) -> Scored:
    """Score `batch` in a worker; a lost worker's records get error results. Waits
    while every slot of the pool is taken."""
    answer = await _score_once(pool, batch)
    if not isinstance(answer, WorkerLost):
        return answer
    if len(batch) == 1 or answer.stopping:
        return _failed(batch, answer.error)
    # Which record took the worker down is unknown: each goes to another worker alone,
    # once, so one record's crash or hang costs its batch-mates nothing.
    log.warning("%s while scoring %d records: scoring each again alone", answer.error, len(batch))
    rows = await asyncio.gather(*(_score_once(pool, [item]) for item in batch))
    return [
        (_failed([item], row.error) if isinstance(row, WorkerLost) else row)[0]
        for item, row in zip(batch, rows, strict=True)
    ]
