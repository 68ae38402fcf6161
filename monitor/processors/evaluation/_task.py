"""The evaluation stage's one task per batch: extract the sampled traces, then score every
record with the CPU scorers (the local evaluators) that sample it, in one go.

It runs in a worker process of the pool (`pipeline.processes`), or, without one, in one
worker-thread hop of this process: either way a sampled trace's spans go in once and its
records come back once, scored. Records that arrive as records (Kafka JSON, replay) take
the same task without the extraction step.

A batch goes by three names from submission to outcome: each sampled item taken becomes
a `Job` (a trace to extract, or a record), the jobs of one task a `Batch`, and what
becomes of each job an `Outcome` (extraction and CPU results), which the stage reads.
Each worker builds its CPU scorers from their `EvaluatorConfig`s once, when it starts
(`worker_initializer`); `run` is the task. Which scorers run on a record is decided here
by `planned`, the same rule the stage applies to the judges: a record lacking an
evaluator's input, or held back as suspect, is not scored. Failures stay with their own
trace (`Unreadable`) or record and scorer (an error result).
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from types import FrameType
from typing import Any, TypeVar

from monitor.config import EvaluatorConfig
from monitor.conventions import Vocabulary
from monitor.evaluators.base import CpuScorer
from monitor.evaluators.factory import BuildContext
from monitor.extraction import (
    Convention,
    TraceRecords,
    Unreadable,
    extract_within,
    read_verdicts,
)
from monitor.records import CLIENT_ADDRESS, EXTRACTION_SUSPECT, TOPIC, RagRecord, scripts
from monitor.records.fingerprint import request_fingerprint
from monitor.records.limits import SizeLimits
from monitor.records.where import Where
from monitor.results import EvalResult
from monitor.spans import Span

T = TypeVar("T")
Scored = dict[str, tuple[EvalResult, float]]
"""A record's CPU results of one revision (the evaluators' current ones, or their other ones:
`_other_revision.py`) by evaluator, with the seconds each took."""

_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(EvalResult))

# Builds a CPU scorer in a worker; must be a module-level function (it is pickled by name).
ScorerFactory = Callable[[EvaluatorConfig], CpuScorer]

# What the worker pool's fork server imports before it forks workers: the task's code and
# the scorers' read-only tables, shared by every worker.
PRELOAD = ("monitor.processors.evaluation._preload",)


@dataclass(frozen=True, slots=True)
class Job:
    """One sampled item's part of a batch: a trace's spans to extract (no `record`), with
    the delivery's `metadata` to merge into its records' (`SampledTrace.metadata`), or a
    record; the CPU scorers that sample it, and those of them whose other revision
    scores it too."""

    scorers: tuple[str, ...]
    spans: Sequence[Span] = ()
    record: RagRecord | None = None
    others: tuple[str, ...] = ()
    metadata: Mapping[str, str] | None = None

    def __reduce__(self) -> tuple[type[Job], tuple[Any, ...]]:
        # Its fields, pickled in the ingest process for every sampled trace: a dataclass
        # with slots pickles (and unpickles) by looking its fields up each time.
        return Job, (self.scorers, self.spans, self.record, self.others, self.metadata)


@dataclass(frozen=True, slots=True)
class Batch:
    """What one task runs: its jobs, in order."""

    jobs: Sequence[Job]
    # False: extract only (a trace whose extraction and scoring together lost a worker
    # twice is extracted once more without scoring, to tell which of the two failed).
    score: bool = True


@dataclass(slots=True)
class Outcome:
    """What became of one job: a trace's extraction (None for a record), and each record's
    CPU results once scored (None until then: a timed-out thread hop leaves the rest),
    with, beside them, those of the other revisions the job named (`Job.others`)."""

    extraction: TraceRecords | Unreadable | None
    scored: list[Scored] | None = None
    others: list[Scored] = field(default_factory=list)

    def others_of(self, i: int) -> Scored:
        """The other revisions' results on record `i` (none where the job named none)."""
        return self.others[i] if i < len(self.others) else {}

    def __reduce__(self) -> tuple[Any, ...]:
        # The results cross as tuples of their fields, each with which revision gave it
        # (True: an other revision's), and the records' extraction as its fields: cheaper for
        # the receiving process to unpickle than the dataclasses (one with slots looks its
        # fields up for each).
        rows = None
        if self.scored is not None:
            rows = [
                [
                    (old, tuple(getattr(r, f) for f in _RESULT_FIELDS), t)
                    for old, scored in ((False, self.scored[i]), (True, self.others_of(i)))
                    for r, t in scored.values()
                ]
                for i in range(len(self.scored))
            ]
        extraction: TraceRecords | Unreadable | tuple[Any, ...] | None = self.extraction
        if isinstance(extraction, TraceRecords):
            extraction = (
                extraction.records,
                extraction.cut,
                extraction.refused,
                extraction.causes,
                extraction.verdicts,
            )
        return _outcome, (extraction, rows)


def _outcome(
    extraction: TraceRecords | Unreadable | tuple[Any, ...] | None,
    rows: list[list[tuple[bool, tuple[Any, ...], float]]] | None,
) -> Outcome:
    if isinstance(extraction, tuple):
        extraction = TraceRecords(*extraction)
    if rows is None:
        return Outcome(extraction)
    scored: list[Scored] = []
    others: list[Scored] = []
    for row in rows:
        own: Scored = {}
        old: Scored = {}
        for is_other, fields, t in row:
            result = EvalResult(*fields)
            (old if is_other else own)[result.name] = (result, t)
        scored.append(own)
        others.append(old)
    return Outcome(extraction, scored, others)


@dataclass(frozen=True, slots=True)
class Settings:
    """What every task of a stage shares: how to extract and bound a trace's records,
    whether records held back as suspect are scored anyway, and whether extracted records
    get their question's topic (`metadata.topic`, `monitor.detector.topics`: for the alert
    rules' attribution, computed here where the detector runs), and the revision each
    evaluator's results carry."""

    route_attribute: str = "http.route"
    limits: SizeLimits = field(default_factory=SizeLimits)
    evaluate_suspect: bool = False
    conventions: tuple[Convention, ...] = ()  # the user's (`extraction.conventions`)
    topics: bool = False
    # Each evaluator's revision (`monitor.evaluators.revision`), which its current results
    # carry: set here, so that the ingest process need not copy them to set it.
    revisions: Mapping[str, str] = field(default_factory=dict)
    # An app's own verdicts in its traces (`external_verdicts`): read or not, the user's
    # vocabularies, and the score a verdict whose label says nothing passes at.
    verdicts: bool = True
    vocabularies: tuple[Vocabulary, ...] = ()
    verdict_threshold: float = 0.5
    # Seconds one trace's extraction may take (`pipeline.extraction_timeout_s`): past them
    # it is set aside (`EXTRACT_TIMEOUT`) and the batch goes on. Enforced where the task
    # runs in a process's main thread (a worker process); None: not bounded here.
    extraction_budget_s: float | None = None


EXTRACT_TIMEOUT = "extract_timeout"
"""The `Unreadable` reason of a trace whose extraction passed its budget."""


class OverBudget(BaseException):
    """Raised into a trace's extraction by the alarm that bounds it: a BaseException, so
    that no `except Exception` of the extraction takes it for an input's failure."""


def _over_budget(_signum: int, _frame: FrameType | None) -> None:
    raise OverBudget


@contextmanager
def extraction_budget(seconds: float | None) -> Iterator[None]:
    """Bound what runs inside by `seconds` of wall time (OverBudget past them). Python code
    and the regular expression engine both stop at the alarm; a C call that checks no
    signals stops at the pool's deadline instead. Only a process's main thread can take
    a signal: elsewhere (a worker thread of the ingest process) nothing is bounded."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _over_budget)
    # A timer someone else armed (a test runner's timeout) goes on once this one is done.
    other, interval = signal.getitimer(signal.ITIMER_REAL)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if other:
            left = max(other - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


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
    runnable = [name for name in names if not (scorers[name].requires & missing)]
    if any(name in scripts.READS for name in runnable):
        # An embedded evaluator gives no verdict on a language it cannot read (the
        # evaluation stage counts and logs the skip).
        found = scripts.record_script(record)
        runnable = [n for n in runnable if n not in scripts.READS or found in scripts.READS[n]]
    return runnable


def run(
    batch: Batch,
    scorers: Mapping[str, CpuScorer],
    settings: Settings,
    outcomes: list[Outcome],
    others: Mapping[str, CpuScorer] | None = None,
) -> list[Outcome]:
    """The batch, appending each job's outcome to `outcomes` as it goes: every trace
    extracted first, then every record scored (`others`: the other revisions of CPU
    scorers, by evaluator, for the jobs that name them)."""
    for job in batch.jobs:
        extraction = None
        if job.record is None:
            extraction = _extract(job, settings)
        outcomes.append(Outcome(extraction))
    if not batch.score:
        return outcomes
    suspect = settings.evaluate_suspect
    records = [records_of(job, outcome) for job, outcome in zip(batch.jobs, outcomes, strict=True)]
    # Every job's current results first: a timed-out thread hop takes a job with `scored`
    # as done, so a deadline passed costs the other revisions' verdicts (a bounded
    # extra, `_other_revision.py`) before any of the evaluators' own.
    for job, outcome, own in zip(batch.jobs, outcomes, records, strict=True):
        outcome.scored = [
            _score(
                record,
                planned(record, job.scorers, scorers, suspect),
                scorers,
                settings.revisions,
            )
            for record in own
        ]
    for job, outcome, own in zip(batch.jobs, outcomes, records, strict=True):
        if job.others:
            if others is None:
                raise ValueError("a job names other revisions and none were given")
            outcome.others = [
                _score(record, planned(record, job.others, others, suspect), others)
                for record in own
            ]
    return outcomes


def _extract(job: Job, settings: Settings) -> TraceRecords | Unreadable:
    """A trace's records, ready for the ingest process; within its budget, or set aside
    (`EXTRACT_TIMEOUT`) so that its batch-mates go on."""
    budget = settings.extraction_budget_s
    try:
        with extraction_budget(budget):
            return extracted(job, settings)
    except OverBudget:
        return Unreadable(EXTRACT_TIMEOUT, f"extraction passed its budget of {budget:g}s")


def extracted(job: Job, settings: Settings) -> TraceRecords | Unreadable:
    """A trace job's records as the task gives them, without a budget."""
    address = job.metadata.get(CLIENT_ADDRESS) if job.metadata else None
    extraction = extract_within(
        job.spans, settings.route_attribute, settings.limits, settings.conventions, address
    )
    if isinstance(extraction, TraceRecords):
        if settings.topics:
            extraction = _with_topics(extraction)
        if job.metadata:  # here, not in the ingest process, which pays per record
            extraction = _with_metadata(extraction, job.metadata)
        if settings.verdicts:
            extraction = _with_verdicts(extraction, job.spans, settings)
        for record in extraction.records:
            # Here rather than in the ingest process, which reads them for the alert
            # rules: the record carries them there (`RagRecord.memo`).
            request_fingerprint(record)
            Where.of(record)
    return extraction


def records_of(job: Job, outcome: Outcome) -> list[RagRecord]:
    """The records a job's scorers run on: its record, or its trace's extracted ones."""
    if job.record is not None:
        return [job.record]
    if isinstance(outcome.extraction, TraceRecords):
        return outcome.extraction.records
    return []


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
    return dataclasses.replace(extraction, records=records)


def _with_verdicts(
    extraction: TraceRecords, spans: Sequence[Span], settings: Settings
) -> TraceRecords:
    """The extraction with the verdicts the app wrote into its trace, joined to its
    records (`monitor.extraction.read_verdicts`); none read when it carries none."""
    verdicts = read_verdicts(
        spans, extraction.records, settings.vocabularies, settings.verdict_threshold
    )
    if not verdicts.refused and not any(verdicts.by_record):
        return extraction
    return dataclasses.replace(extraction, verdicts=verdicts)


def _with_metadata(extraction: TraceRecords, metadata: Mapping[str, str]) -> TraceRecords:
    """The extraction with the delivery's `metadata` merged over each record's."""
    records = [
        record.model_copy(update={"metadata": {**record.metadata, **metadata}})
        for record in extraction.records
    ]
    return dataclasses.replace(extraction, records=records)


def _score(
    record: RagRecord,
    names: list[str],
    scorers: Mapping[str, CpuScorer],
    revisions: Mapping[str, str] | None = None,
) -> Scored:
    """`revisions`: those the results carry (none for other revisions' results)."""
    scored: Scored = {}
    for name in names:
        started = time.perf_counter()
        try:
            result = scorers[name].score(record)
        except Exception as exc:
            result = EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
        took = time.perf_counter() - started
        revision = revisions.get(name) if revisions else None
        if revision is not None and result.revision != revision:
            result = dataclasses.replace(result, revision=revision)
        scored[name] = (result, took)
    return scored


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
    # The other revisions of CPU scorers (`_other_revision.py`).
    others: tuple[EvaluatorConfig, ...] = ()


_scorers: dict[str, CpuScorer] = {}
_others: dict[str, CpuScorer] = {}  # the other revisions, by evaluator
_settings = Settings()


def set_up_worker(setup: WorkerSetup) -> None:
    """The worker's initializer: build and warm up its CPU scorers."""
    global _settings
    _settings = setup.settings
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_InThisThread())
    try:
        for specs, scorers in ((setup.specs, _scorers), (setup.others, _others)):
            for spec in specs:
                evaluator = setup.factory(spec)
                warm_up = getattr(evaluator, "warm_up", None)
                if warm_up is not None:
                    loop.run_until_complete(warm_up())
                scorers[spec.name] = evaluator
    finally:
        loop.close()


class _InThisThread(ThreadPoolExecutor):
    """Runs each call at once, in the calling thread: a worker's warm-up has nothing to
    run beside it, and a thread of its own would keep its stack and its malloc arena."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def run_in_worker(batch: Batch) -> list[Outcome]:
    """The batch as the pool runs it, with the worker's scorers and settings."""
    return run(batch, _scorers, _settings, [], _others)


def worker_initializer(
    specs: Sequence[EvaluatorConfig],
    settings: Settings,
    factory: ScorerFactory = build_scorer,
    others: Sequence[EvaluatorConfig] = (),
) -> Callable[[], None]:
    """What a pool's workers run to be able to run tasks for `specs` (and the other
    revisions `others`) under `settings`: picklable, as the pool sends it to them."""
    return partial(set_up_worker, WorkerSetup(tuple(specs), factory, settings, tuple(others)))
