"""The evaluation stage's one task per batch: extract the sampled traces, then score every
record with the CPU scorers (the local evaluators) that sample it, in one go.

It runs in a worker process of the pool (`pipeline.processes`), or, without one, in one
worker-thread hop of this process: either way a sampled trace's spans go in once and its
records come back once, scored. Records that arrive as records (Kafka JSON, replay) take
the same task without the extraction step.

Each worker builds its CPU scorers from their `EvaluatorConfig`s once, when it starts
(`worker_initializer`); `run` is the task. Which scorers run on a record is decided here
by `planned`, the same rule the stage applies to the judges: a record lacking an
evaluator's input, or held back as suspect, is not scored. Failures stay with their own
trace (`Unreadable`) or record and scorer (an error result).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer
from monitor.evaluators.factory import BuildContext
from monitor.extraction import Convention, TraceRecords, Unreadable, extract_within
from monitor.pool import Initializer
from monitor.record_limits import SizeLimits
from monitor.records import EXTRACTION_SUSPECT, TOPIC, RagRecord
from monitor.results import EvalResult
from monitor.spans import Span

# A result as the tuple of its fields, and the seconds it took: cheaper for the receiving
# process to unpickle than the dataclass.
WireResult = tuple[tuple[Any, ...], float]
_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(EvalResult))

# Builds a CPU scorer in a worker; must be a module-level function (it is pickled by name).
ScorerFactory = Callable[[EvaluatorConfig], CpuScorer]

# What the worker pool's fork server imports before it forks workers: the task's code and
# the scorers' read-only tables, shared by every worker.
PRELOAD = ("monitor.processors.evaluation._preload",)


@dataclass(frozen=True, slots=True)
class TraceJob:
    """A sampled trace to extract, and the CPU scorers that sample it."""

    spans: Sequence[Span]
    scorers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RecordJob:
    """A record to score with the CPU scorers named (those that sample it)."""

    record: RagRecord
    scorers: tuple[str, ...]


Job = TraceJob | RecordJob


@dataclass(frozen=True, slots=True)
class Task:
    jobs: Sequence[Job]
    # False: extract only (a trace whose extraction and scoring together lost a worker
    # twice is extracted once more without scoring, to tell which of the two failed).
    score: bool = True


@dataclass(slots=True)
class Answer:
    """What came back for a task, filled in as it runs (a timed-out thread hop leaves
    the rest empty). Per job in order: a record job's results (on the wire form); a
    trace job's extraction, and its records' results once scored."""

    extractions: list[TraceRecords | Unreadable | None] = field(default_factory=list)
    scored: list[list[list[WireResult]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Settings:
    """What every task of a stage shares: how to extract and bound a trace's records,
    whether records held back as suspect are scored anyway, and whether extracted records
    get their question's topic (`metadata.topic`, `monitor.detector.topics`: for the alert
    rules' attribution, computed here where the detector runs)."""

    route_attribute: str = "http.route"
    limits: SizeLimits = field(default_factory=SizeLimits)
    evaluate_suspect: bool = False
    conventions: tuple[Convention, ...] = ()  # the user's (`extraction.conventions`)
    topics: bool = False


def held_back(record: RagRecord, evaluate_suspect: bool) -> bool:
    """A record whose extraction looks wrong is not evaluated (unless configured)."""
    return not evaluate_suspect and EXTRACTION_SUSPECT in record.metadata


def planned(
    record: RagRecord,
    names: Sequence[str],
    scorers: Mapping[str, CpuScorer],
    evaluate_suspect: bool,
) -> list[str]:
    """Which of the CPU scorers `names` run on `record`: none when it is held back, and
    none that needs a part the record lacks."""
    if not names or held_back(record, evaluate_suspect):
        return []
    missing = record.missing()
    return [name for name in names if not (scorers[name].requires & missing)]


def run(task: Task, scorers: Mapping[str, CpuScorer], settings: Settings, answer: Answer) -> Answer:
    """The task, filling `answer` as it goes: every trace extracted first, then every
    record scored."""
    for job in task.jobs:
        extraction = (
            extract_within(
                job.spans, settings.route_attribute, settings.limits, settings.conventions
            )
            if isinstance(job, TraceJob)
            else None
        )
        if settings.topics and isinstance(extraction, TraceRecords):
            extraction = _with_topics(extraction)
        answer.extractions.append(extraction)
    if not task.score:
        return answer
    for job, extraction in zip(task.jobs, answer.extractions, strict=True):
        if isinstance(job, RecordJob):
            records = [job.record]
        elif isinstance(extraction, TraceRecords):
            records = extraction.records
        else:
            records = []
        answer.scored.append(
            [
                _score(
                    record,
                    planned(record, job.scorers, scorers, settings.evaluate_suspect),
                    scorers,
                )
                for record in records
            ]
        )
    return answer


def _with_topics(extraction: TraceRecords) -> TraceRecords:
    """The extraction with each record's question topic in its metadata (`topic`); a
    record without a question, or whose question has no topic, is left as it is."""
    from monitor.detector.topics import question_topic  # the detector: workers only

    records = []
    for record in extraction.records:
        topic = question_topic(record.query) if record.query else ""
        if topic:
            record = record.model_copy(update={"metadata": {**record.metadata, TOPIC: topic}})
        records.append(record)
    return TraceRecords(records, extraction.cut, extraction.refused)


def _score(
    record: RagRecord, names: list[str], scorers: Mapping[str, CpuScorer]
) -> list[WireResult]:
    row: list[WireResult] = []
    for name in names:
        started = time.perf_counter()
        try:
            result = scorers[name].score(record)
        except Exception as exc:
            result = EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
        row.append(
            (tuple(getattr(result, f) for f in _RESULT_FIELDS), time.perf_counter() - started)
        )
    return row


def results(row: list[WireResult]) -> dict[str, tuple[EvalResult, float]]:
    """A record's results from the wire form, by evaluator."""
    out: dict[str, tuple[EvalResult, float]] = {}
    for fields, seconds in row:
        result = EvalResult(*fields)
        out[result.name] = (result, seconds)
    return out


# -- in the worker process ------------------------------------------------------------------


def build_scorer(spec: EvaluatorConfig) -> CpuScorer:
    """The registry's evaluator for `spec`, which must be a CPU scorer."""
    from monitor.evaluators.registry import build

    evaluator = build(spec, BuildContext())
    if not isinstance(evaluator, CpuScorer):
        raise TypeError(f"{spec.name} is not a CPU scorer")
    return evaluator


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    specs: tuple[EvaluatorConfig, ...]
    factory: ScorerFactory
    settings: Settings


_scorers: dict[str, CpuScorer] = {}
_settings = Settings()


def set_up_worker(setup: WorkerSetup) -> None:
    """The worker's initializer: build and warm up its CPU scorers."""
    global _settings
    _settings = setup.settings
    for spec in setup.specs:
        evaluator = setup.factory(spec)
        warm_up = getattr(evaluator, "warm_up", None)
        if warm_up is not None:
            asyncio.run(warm_up())
        _scorers[spec.name] = evaluator


def run_in_worker(task: Task) -> Answer:
    """The task as the pool runs it, with the worker's scorers and settings."""
    return run(task, _scorers, _settings, Answer())


def worker_initializer(
    specs: Sequence[EvaluatorConfig], settings: Settings, factory: ScorerFactory = build_scorer
) -> Initializer:
    """What a pool's workers run to be able to run tasks for `specs` under `settings`."""
    return Initializer(set_up_worker, WorkerSetup(tuple(specs), factory, settings))
