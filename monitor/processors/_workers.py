"""CPU scoring in worker processes: the local evaluators of a batch of records run in
another process, so evaluation uses every core the sidecar is given and never holds the
ingest process's GIL.

Each worker is a forkserver child that builds its own copies of the CPU scorers from
their `EvaluatorSpec`s (models load once per worker) and scores one batch at a time,
sent over a pipe. The pool gives a batch to an idle worker and waits for the answer in a
thread (reading the pipe releases the GIL). With every worker busy, `score` waits, so the
evaluation stage takes no more records and intake pushes back as for a full queue.

A worker that dies (its pipe closes) or does not answer within the evaluation deadline is
killed and replaced. Every result of its batch is an error — never a pass, never a
defect — and the loss is counted in `worker_restarts_total{reason}`. The batch is not
retried: a record that crashes or hangs a worker would take its replacement down too.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from monitor.evaluators.base import BuildContext, CpuScorer, EvalResult, EvaluatorSpec
from monitor.records import RagRecord
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

# A batch: each record with the names of the CPU scorers to run on it.
Batch = list[tuple[RagRecord, tuple[str, ...]]]
# Per record, per scorer in the order asked: the result and the seconds it took.
Scored = list[list[tuple[EvalResult, float]]]

# Starting a worker imports numpy and loads the word vectors.
_STARTUP_TIMEOUT_S = 120.0
_RESPAWN_DELAY_S = 5.0
REASONS = ("died", "hung")


class WorkerLost(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Builds a CPU scorer in a worker; must be a module-level function (it is pickled by name).
ScorerFactory = Callable[[EvaluatorSpec], CpuScorer]


def build_scorer(spec: EvaluatorSpec) -> CpuScorer:
    """The registry's evaluator for `spec`, which must be a CPU scorer."""
    from monitor.evaluators.registry import build

    evaluator = build(spec, BuildContext())
    if not isinstance(evaluator, CpuScorer):
        raise TypeError(f"{spec.name} is not a CPU scorer")
    return evaluator


def _serve(conn: Connection, specs: Sequence[EvaluatorSpec], factory: ScorerFactory) -> None:
    """A worker process: build the scorers, say ready, score batches until told to stop
    (None) or until the parent is gone (the pipe closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    scorers: dict[str, CpuScorer] = {}
    for spec in specs:
        evaluator = factory(spec)
        scorers[spec.name] = evaluator
        warm_up = getattr(evaluator, "warm_up", None)
        if warm_up is not None:
            asyncio.run(warm_up())
    conn.send("ready")
    while True:
        try:
            batch: Batch | None = conn.recv()
        except EOFError:
            return
        if batch is None:
            return
        scored: Scored = []
        for record, names in batch:
            row = []
            for name in names:
                started = time.perf_counter()
                try:
                    result = scorers[name].score(record)
                except Exception as exc:
                    result = EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
                row.append((result, time.perf_counter() - started))
            scored.append(row)
        conn.send(scored)


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection


class CpuPool:
    """A fixed number of evaluation worker processes, one batch in flight per worker."""

    def __init__(
        self,
        specs: Sequence[EvaluatorSpec],
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
        self._idle: asyncio.Queue[_Worker] | None = None
        self._workers: set[_Worker] = set()
        self._closing = False
        self._respawns: set[asyncio.Task[None]] = set()
        self._running = telemetry.gauge("worker_processes", "Evaluation worker processes running.")
        self._busy = telemetry.gauge(
            "worker_processes_busy", "Evaluation worker processes scoring a batch."
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
    def pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    async def start(self) -> None:
        self._ctx.set_forkserver_preload(["monitor.evaluators.registry"])
        self._idle = asyncio.Queue()
        workers = await asyncio.gather(*(asyncio.to_thread(self._spawn) for _ in range(self._size)))
        for worker in workers:
            self._idle.put_nowait(worker)
        log.info("evaluation: %d worker processes", self._size)

    async def score(self, batch: Batch) -> Scored:
        """Score `batch` in a worker; a lost worker's records get error results."""
        assert self._idle is not None, "start() first"
        worker = await self._idle.get()
        self._busy.inc()
        try:
            reply: Scored = await asyncio.to_thread(self._roundtrip, worker, batch)
        except WorkerLost as lost:
            self._lose(worker, lost.reason, len(batch))
            error = f"evaluation worker process {lost.reason}" + (
                f" (no answer within {self._timeout:g}s)" if lost.reason == "hung" else ""
            )
            return [[(EvalResult.failed(name, error), 0.0) for name in names] for _, names in batch]
        except asyncio.CancelledError:
            # Shutdown past its deadline: the thread still owns this worker; stop it so
            # the thread returns, and let close() account for the rest.
            self._kill(worker)
            raise
        finally:
            self._busy.dec()
        self._idle.put_nowait(worker)
        return reply

    async def close(self, grace_s: float) -> None:
        """Stop every worker: ask, wait up to `grace_s`, then terminate and kill."""
        self._closing = True
        for task in self._respawns:
            task.cancel()
        await asyncio.gather(*self._respawns, return_exceptions=True)
        workers = list(self._workers)
        await asyncio.gather(*(asyncio.to_thread(self._stop, w, grace_s) for w in workers))

    # -- worker lifecycle ------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_serve,
            args=(child, self._specs, self._factory),
            name="rag-monitor-evaluate",
            daemon=True,
        )
        process.start()
        child.close()
        worker = _Worker(process, parent)
        try:
            ready = parent.poll(_STARTUP_TIMEOUT_S) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._stop(worker, 0.0)
            raise RuntimeError(
                f"an evaluation worker process did not start within {_STARTUP_TIMEOUT_S:g}s "
                f"(exit code {process.exitcode})"
            )
        self._workers.add(worker)
        self._running.set(len(self._workers))
        return worker

    def _roundtrip(self, worker: _Worker, batch: Batch) -> Scored:
        try:
            worker.conn.send(batch)
            if not worker.conn.poll(self._timeout):
                raise WorkerLost("hung")
            reply: Scored = worker.conn.recv()
        except (EOFError, OSError) as exc:  # BrokenPipeError is an OSError
            raise WorkerLost("died") from exc
        return reply

    def _lose(self, worker: _Worker, reason: str, records: int) -> None:
        pid = worker.process.pid
        self._kill(worker)
        self._restarts.labels(reason).inc()
        log.warning(
            "evaluation worker process %s %s (exit code %s); its %d records get an error "
            "result; starting a replacement",
            pid,
            reason,
            worker.process.exitcode,
            records,
        )
        task = asyncio.create_task(self._replace(), name="evaluate-respawn")
        self._respawns.add(task)
        task.add_done_callback(self._respawns.discard)

    async def _replace(self) -> None:
        assert self._idle is not None
        while not self._closing:
            try:
                fresh = await asyncio.to_thread(self._spawn)
            except Exception as exc:
                log.error("could not start an evaluation worker process: %s; retrying", exc)
                await asyncio.sleep(_RESPAWN_DELAY_S)
                continue
            if self._closing:
                await asyncio.to_thread(self._stop, fresh, 0.0)
                return
            self._idle.put_nowait(fresh)
            return

    def _kill(self, worker: _Worker) -> None:
        worker.process.kill()
        worker.process.join()
        self._forget(worker)

    def _stop(self, worker: _Worker, grace_s: float) -> None:
        if grace_s > 0:
            try:
                worker.conn.send(None)
            except OSError:
                pass
            worker.process.join(grace_s)
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join(1.0)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        self._forget(worker)

    def _forget(self, worker: _Worker) -> None:
        worker.conn.close()
        self._workers.discard(worker)
        self._running.set(len(self._workers))
