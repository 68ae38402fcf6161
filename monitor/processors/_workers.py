"""CPU work in worker processes: the local evaluators of a batch of records, and the
extraction of sampled traces into records, run in other processes, so evaluation uses
every core the sidecar is given and never holds the ingest process's GIL.

Each worker is a forkserver child that builds its own copies of the CPU scorers from
their `EvaluatorConfig`s (models load once per worker) and answers the batches it is sent
— records to score, or the trace stage's sampled traces to extract (`extract`, callable
from the trace stage's thread) — one after another, over a socket pair. The event loop drives the parent's end of every
socket itself: it writes a pickled batch without blocking and reads answers as they
arrive, so a batch costs the ingest process no thread hand-off.

Up to `DEPTH` batches are in flight per worker: while a worker scores one, the next
already waits in its socket, so it does not idle while the main process pickles the next
batch and unpickles the last answer. That bounds the records in flight to `DEPTH`
batches per worker; with every slot taken, `score` waits, so the evaluation stage takes
no more records and intake pushes back as for a full queue.

A worker that dies (its socket closes) or does not answer a batch within the evaluation
deadline (counted from when it could start that batch) is killed and replaced, and the
loss is counted in `worker_restarts_total{reason}`. The records of the batch it was
scoring are scored again, each alone in a batch of its own, by other workers, once: the
record that crashed or hung the worker then costs only itself, and a record lost a second
time gets error results — never a pass, never a defect. Traces it was extracting
go to another worker once (records not built yet are not lost to an OOM kill); lost a
second time, they are counted as unreadable (`extract_failed`). The batches queued behind
it, which the worker had not started, are sent to another worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import multiprocessing
import pickle
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any, BinaryIO, cast

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer, EvalResult
from monitor.evaluators.factory import BuildContext
from monitor.processors.trace import Extraction, Unreadable, extract_traces
from monitor.records import RagRecord
from monitor.spans import Span
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

# A batch: each record with the names of the CPU scorers to run on it.
Batch = list[tuple[RagRecord, tuple[str, ...]]]
# Per record, per scorer in the order asked: the result and the seconds it took.
Scored = list[list[tuple[EvalResult, float]]]
# The same on the wire: a result as the tuple of its fields (unpickling a tuple and
# building the dataclass costs the ingest process a third of unpickling the dataclass).
_WireScored = list[list[tuple[tuple[Any, ...], float]]]
_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(EvalResult))


@dataclass(frozen=True, slots=True)
class _Extract:
    """A batch of sampled traces for a worker to extract (`extract_traces`)."""

    traces: Sequence[Sequence[Span]]
    route_attribute: str


# Batches in flight per worker: the one it scores and the one waiting behind it.
DEPTH = 2
# Sampled traces extracted per batch: a hand-on larger than this goes to several workers.
EXTRACT_BATCH = 64
# Starting a worker imports numpy and loads the word vectors.
_STARTUP_TIMEOUT_S = 120.0
_RESPAWN_DELAY_S = 5.0
REASONS = ("died", "hung")
# A frame on a worker's socket: the payload's length, then the payload (a pickle).
_HEADER = struct.Struct("!Q")
_PICKLE = pickle.HIGHEST_PROTOCOL


# Builds a CPU scorer in a worker; must be a module-level function (it is pickled by name).
ScorerFactory = Callable[[EvaluatorConfig], CpuScorer]


def build_scorer(spec: EvaluatorConfig) -> CpuScorer:
    """The registry's evaluator for `spec`, which must be a CPU scorer."""
    from monitor.evaluators.registry import build

    evaluator = build(spec, BuildContext())
    if not isinstance(evaluator, CpuScorer):
        raise TypeError(f"{spec.name} is not a CPU scorer")
    return evaluator


# -- the worker process -------------------------------------------------------------------


def _send_frame(sock: socket.socket, message: object) -> None:
    payload = pickle.dumps(message, _PICKLE)
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_frame(stream: BinaryIO) -> object:
    """The next message; EOFError when the parent closed its end."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError
    return pickle.loads(payload)


def _build_scorers(
    specs: Sequence[EvaluatorConfig], factory: ScorerFactory
) -> dict[str, CpuScorer]:
    scorers: dict[str, CpuScorer] = {}
    for spec in specs:
        evaluator = factory(spec)
        scorers[spec.name] = evaluator
        warm_up = getattr(evaluator, "warm_up", None)
        if warm_up is not None:
            asyncio.run(warm_up())
    return scorers


def _score_batch(scorers: dict[str, CpuScorer], batch: Batch) -> _WireScored:
    scored: _WireScored = []
    for record, names in batch:
        row = []
        for name in names:
            started = time.perf_counter()
            try:
                result = scorers[name].score(record)
            except Exception as exc:
                result = EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
            fields = tuple(getattr(result, field) for field in _RESULT_FIELDS)
            row.append((fields, time.perf_counter() - started))
        scored.append(row)
    return scored


def _serve(sock: socket.socket, specs: Sequence[EvaluatorConfig], factory: ScorerFactory) -> None:
    """A worker process: build the scorers, say ("ready", "") or ("failed", why), then
    answer batches in order until told to stop (None) or until the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    stream = sock.makefile("rb")
    try:
        try:
            scorers = _build_scorers(specs, factory)
        except Exception as exc:
            _send_frame(sock, ("failed", f"{type(exc).__name__}: {exc}"))
            return
        _send_frame(sock, ("ready", ""))
        while True:
            message = _recv_frame(stream)
            if message is None:
                return
            if isinstance(message, _Extract):
                _send_frame(sock, extract_traces(message.traces, message.route_attribute))
            else:
                _send_frame(sock, _score_batch(scorers, cast(Batch, message)))
    except (EOFError, OSError):
        return  # the parent closed the socket or exited


# -- the parent's side ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lost:
    """A batch of several records whose worker was lost: scored again record by record."""

    error: str


@dataclass(eq=False)
class _Job:
    payload: bytes  # the frame, pickled once: sent again as is if its worker never starts it
    items: int  # records to score or traces to extract, for the log of a lost worker
    # The answer as the caller takes it, from the worker's.
    convert: Callable[[Any], object]
    # The answer when the worker is lost while on this batch (None: send it again).
    on_loss: Callable[[str], object | None]
    # The answer; None when the worker was lost before it started the batch.
    answer: asyncio.Future[object | None]

    def answered(self, wire: object) -> None:
        if not self.answer.done():  # a cancelled caller dropped it
            self.answer.set_result(self.convert(wire))


def _scored(wire: _WireScored) -> Scored:
    return [[(EvalResult(*fields), seconds) for fields, seconds in row] for row in wire]


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    jobs: deque[_Job] = field(default_factory=deque)  # sent, in the order answered
    deadline: asyncio.TimerHandle | None = None  # for the answer to jobs[0]
    lost: bool = False
    reading: asyncio.Task[None] | None = None


def _frame(message: object) -> bytes:
    payload = pickle.dumps(message, _PICKLE)
    return _HEADER.pack(len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader) -> object:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


class CpuPool:
    """A fixed number of evaluation worker processes, `DEPTH` batches in flight per worker."""

    def __init__(
        self,
        specs: Sequence[EvaluatorConfig],
        processes: int,
        timeout_s: float,
        telemetry: Telemetry,
        *,
        factory: ScorerFactory = build_scorer,
    ) -> None:
        self._specs = list(specs)
        self._factory = factory
        self._size = processes
        self._timeout = timeout_s
        # Not fork: the main process runs threads (gRPC, Kafka, the trace stage).
        self._ctx = multiprocessing.get_context("forkserver")
        self._workers: set[_Worker] = set()
        self._room: asyncio.Event | None = None  # a slot freed or a worker added
        self._first_waiting = 0  # `_free_worker` callers that go first (extractions)
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None  # set by `start`
        self._tasks: set[asyncio.Task[None]] = set()  # replacements being started
        self._running = telemetry.gauge("worker_processes", "Evaluation worker processes running.")
        self._busy = telemetry.gauge(
            "worker_processes_busy",
            "Evaluation worker processes working on a batch (scoring or extracting).",
        )
        self._restarts = telemetry.counter(
            "worker_restarts",
            "Evaluation worker processes replaced, by reason (died, hung).",
            ("reason",),
        )
        for reason in REASONS:
            self._restarts.labels(reason)

    @property
    def size(self) -> int:
        return self._size

    @property
    def slots(self) -> int:
        """Batches the pool takes at once (`DEPTH` per worker)."""
        return self._size * DEPTH

    @property
    def in_flight(self) -> int:
        """Batches sent to the workers and not answered yet."""
        return sum(len(w.jobs) for w in self._workers)

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    async def start(self) -> None:
        self._ctx.set_forkserver_preload(["monitor.evaluators.registry"])
        self._loop = asyncio.get_running_loop()
        self._room = asyncio.Event()
        started = await asyncio.gather(
            *(self._spawn() for _ in range(self._size)), return_exceptions=True
        )
        workers = [w for w in started if isinstance(w, _Worker)]
        failed = [e for e in started if isinstance(e, BaseException)]
        for worker in workers:
            self._add(worker)
        if failed:
            await self.close(0.0)
            raise failed[0]
        log.info("evaluation: %d worker processes, %d batches in flight each", self._size, DEPTH)

    async def score(self, batch: Batch) -> Scored:
        """Score `batch` in a worker; a lost worker's records get error results. Waits
        while every worker has `DEPTH` batches in flight."""

        def failed(error: str, records: Batch = batch) -> Scored:
            return [[(EvalResult.failed(n, error), 0.0) for n in names] for _, names in records]

        def lost(error: str) -> Scored | _Lost:
            return failed(error) if len(batch) == 1 or self._closing else _Lost(error)

        answer = await self._run(_frame(batch), len(batch), _scored, lost)
        if not isinstance(answer, _Lost):
            return cast(Scored, answer)
        # Which record took the worker down is unknown: each goes to another worker alone,
        # once, so one record's crash or hang costs its batch-mates nothing.
        log.warning(
            "%s while scoring %d records: scoring each again alone", answer.error, len(batch)
        )
        rows = await asyncio.gather(
            *(
                self._run(_frame([item]), 1, _scored, functools.partial(failed, records=[item]))
                for item in batch
            )
        )
        return [cast(Scored, row)[0] for row in rows]

    def extract(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> Future[list[Extraction]]:
        """The trace stage's `Extractor`: `extract_traces` in a worker, from any thread
        but the event loop's. Traces whose worker is lost are extracted by another one,
        once; lost again, they are `extract_failed`."""
        assert self._loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(
            self._extract_all(traces, route_attribute), self._loop
        )

    async def _extract_all(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> list[Extraction]:
        """In batches of `EXTRACT_BATCH`, so that a large hand-on is spread over the
        workers."""
        batches = [traces[i : i + EXTRACT_BATCH] for i in range(0, len(traces), EXTRACT_BATCH)]
        if len(batches) == 1:
            return await self._extract(batches[0], route_attribute)
        done = await asyncio.gather(*(self._extract(b, route_attribute) for b in batches))
        return [extraction for batch in done for extraction in batch]

    async def _extract(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> list[Extraction]:
        losses = 0

        def lost(error: str) -> list[Extraction] | None:
            nonlocal losses
            losses += 1
            if losses == 1:
                return None
            return [Unreadable("extract_failed", f"{error} while extracting")] * len(traces)

        payload = _frame(_Extract(traces, route_attribute))
        extracted = await self._run(payload, len(traces), _same, lost, first=True)
        return cast(list[Extraction], extracted)

    async def _run(
        self,
        payload: bytes,
        items: int,
        convert: Callable[[Any], object],
        on_loss: Callable[[str], object | None],
        *,
        first: bool = False,
    ) -> object:
        while True:
            worker = await self._free_worker(first)
            future: asyncio.Future[object | None] = asyncio.get_running_loop().create_future()
            job = _Job(payload, items, convert, on_loss, future)
            self._submit(worker, job)
            # Cancelled (shutdown past its deadline): the worker still answers the batch,
            # and the answer is dropped.
            answer = await job.answer
            if answer is not None:
                return answer

    async def close(self, grace_s: float) -> None:
        """Stop every worker: ask (after the batches it has), wait up to `grace_s`, then
        terminate and kill. Batches still unanswered get error results."""
        self._closing = True
        if self._room is not None:
            self._room.set()  # `score` calls waiting for a slot give up
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        workers = list(self._workers)
        for worker in workers:
            worker.writer.write(_frame(None))
        readers = [w.reading for w in workers if w.reading is not None]
        if readers and grace_s > 0:
            await asyncio.wait(readers, timeout=grace_s)
        for worker in workers:
            self._lose(worker, "stopped")
        await asyncio.gather(*(asyncio.to_thread(_stop_process, w.process) for w in workers))
        await asyncio.gather(*readers, return_exceptions=True)

    # -- dispatch (event loop) ---------------------------------------------------------------

    async def _free_worker(self, first: bool = False) -> _Worker:
        """The worker with the fewest batches in flight, once one has fewer than DEPTH.
        `first` callers (extractions) go ahead of the others: a whole hand-on of the
        trace stage waits for them, and a scoring caller whose answer frees a slot would
        otherwise take it back at once, for as long as the evaluation queue has records."""
        assert self._room is not None, "start() first"
        if first:
            self._first_waiting += 1
        try:
            while True:
                if self._closing:
                    raise RuntimeError("the evaluation worker pool is closed")
                if first or not self._first_waiting:
                    free = [w for w in self._workers if len(w.jobs) < DEPTH]
                    if free:
                        return min(free, key=lambda w: len(w.jobs))
                self._room.clear()
                await self._room.wait()
        finally:
            if first:
                self._first_waiting -= 1
                self._room.set()  # the callers it held back look again

    def _submit(self, worker: _Worker, job: _Job) -> None:
        worker.jobs.append(job)
        worker.writer.write(job.payload)  # buffered by the transport if the socket is full
        if len(worker.jobs) == 1:
            self._arm(worker)
        self._count_busy()

    def _arm(self, worker: _Worker) -> None:
        """Start the deadline of the batch the worker is now scoring."""
        loop = asyncio.get_running_loop()
        worker.deadline = loop.call_later(self._timeout, self._lose, worker, "hung")

    async def _read(self, worker: _Worker) -> None:
        """Answers of one worker, in the order its batches were sent."""
        try:
            while True:
                scored = await _read_frame(worker.reader)
                if worker.lost:
                    return
                if not worker.jobs:
                    log.error("evaluation worker process %s answered no batch", worker.process.pid)
                    self._lose(worker, "died")
                    return
                self._answered(worker, scored)
        except (asyncio.IncompleteReadError, ConnectionError):
            self._lose(worker, "died")
        except Exception:
            log.exception("unreadable answer from evaluation worker process %s", worker.process.pid)
            self._lose(worker, "died")

    def _answered(self, worker: _Worker, scored: object) -> None:
        job = worker.jobs.popleft()
        if worker.deadline is not None:
            worker.deadline.cancel()
            worker.deadline = None
        if worker.jobs:
            self._arm(worker)
        job.answered(scored)
        self._count_busy()
        assert self._room is not None
        self._room.set()

    # -- worker lifecycle --------------------------------------------------------------------

    async def _spawn(self) -> _Worker:
        parent, child = socket.socketpair()
        process = self._ctx.Process(
            target=_serve,
            args=(child, self._specs, self._factory),
            name="rag-monitor-evaluate",
            daemon=True,
        )
        try:
            await asyncio.to_thread(process.start)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        reader, writer = await asyncio.open_connection(sock=parent)
        problem = ""
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                status, detail = cast(tuple[str, str], await _read_frame(reader))
            if status != "ready":
                problem = f"failed to build its evaluators: {detail}"
        except TimeoutError:
            problem = f"did not start within {_STARTUP_TIMEOUT_S:g}s"
        except (asyncio.IncompleteReadError, ConnectionError):
            problem = "exited before it was ready"
        except BaseException:  # cancelled: the pool closes while this worker starts
            writer.close()
            process.kill()
            raise
        if problem:
            writer.close()
            await asyncio.to_thread(_stop_process, process)
            raise RuntimeError(
                f"an evaluation worker process {problem} (exit code {process.exitcode})"
            )
        worker = _Worker(process, reader, writer)
        worker.reading = asyncio.create_task(self._read(worker), name="evaluate-worker-answers")
        return worker

    def _add(self, worker: _Worker) -> None:
        self._workers.add(worker)
        self._running.set(len(self._workers))
        assert self._room is not None
        self._room.set()

    def _lose(self, worker: _Worker, reason: str) -> None:
        """Take `worker` out of service (`reason`: died, hung, or stopped by `close`):
        error results for the batch it was scoring, its other batches to other workers."""
        if worker.lost:
            return
        worker.lost = True
        if self._closing:
            reason = "stopped"  # it exits because `close` asked it to
        if worker.deadline is not None:
            worker.deadline.cancel()
        self._workers.discard(worker)
        self._running.set(len(self._workers))
        worker.process.kill()  # no-op once it has exited; `close` asked it to stop first
        worker.writer.close()
        jobs = list(worker.jobs)
        worker.jobs.clear()
        self._count_busy()
        error = f"evaluation worker process {reason}" + (
            f" (no answer within {self._timeout:g}s)" if reason == "hung" else ""
        )
        # Only the first batch can have been started: the worker reads the next one after
        # it has sent the answer to this one.
        for i, job in enumerate(jobs):
            if job.answer.done():
                continue
            if i == 0 or self._closing:
                job.answer.set_result(job.on_loss(error))
            else:
                job.answer.set_result(None)  # sent again
        assert self._room is not None
        self._room.set()
        if reason not in REASONS:
            return
        self._restarts.labels(reason).inc()
        lost = jobs[0].items if jobs else 0
        task = asyncio.create_task(
            self._replace(worker, reason, lost, len(jobs[1:])), name="evaluate-respawn"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, old: _Worker, reason: str, lost: int, resent: int) -> None:
        await asyncio.to_thread(_stop_process, old.process)
        log.warning(
            "evaluation worker process %s %s (exit code %s): the batch it was on (%d records, "
            "or traces to extract) got error results or goes again, %d batches it had not "
            "started went to other workers; starting a replacement",
            old.process.pid,
            reason,
            old.process.exitcode,
            lost,
            resent,
        )
        while not self._closing:
            try:
                fresh = await self._spawn()
            except Exception as exc:
                log.error("could not start an evaluation worker process: %s; retrying", exc)
                await asyncio.sleep(_RESPAWN_DELAY_S)
                continue
            if self._closing:
                fresh.writer.close()
                await asyncio.to_thread(_stop_process, fresh.process)
                return
            self._add(fresh)
            return

    def _count_busy(self) -> None:
        self._busy.set(sum(1 for w in self._workers if w.jobs))


def _same(answer: object) -> object:
    return answer


def _stop_process(process: BaseProcess) -> None:
    """Wait a moment for a worker that was asked to stop, then terminate, then kill."""
    process.join(1.0)
    if process.is_alive():
        process.terminate()
        process.join(1.0)
    if process.is_alive():
        process.kill()
        process.join()
