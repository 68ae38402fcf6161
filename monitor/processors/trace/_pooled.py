"""The trace stage's extraction task on the process pool: an `Extractor` that turns
sampled traces into records in the worker processes, so that the ingest process does
not spend its CPU on extraction.

Traces go in batches of `EXTRACT_BATCH`, so that a large hand-on is spread over the
workers, ahead of other callers waiting for a slot (a whole hand-on of the trace stage
waits for them). Traces whose worker is lost go to another worker once (records not
built yet are not lost to an OOM kill); lost a second time, they are unreadable
(`extract_failed`). Once the pool is shut down, the future fails and the trace stage
extracts in its own thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from monitor.pool import ProcessPool, TaskFailed, WorkerLost
from monitor.processors.trace import Extraction, Unreadable, extract_traces
from monitor.spans import Span

# Sampled traces extracted per task: a hand-on larger than this goes to several workers.
EXTRACT_BATCH = 64


@dataclass(frozen=True, slots=True)
class _Traces:
    traces: Sequence[Sequence[Span]]
    route_attribute: str


def extract_batch(batch: _Traces) -> list[Extraction]:
    """The task, in a worker process."""
    return extract_traces(batch.traces, batch.route_attribute)


class PooledExtractor:
    """`Extractor` on a started `ProcessPool`."""

    def __init__(self, pool: ProcessPool) -> None:
        self._pool = pool

    def extract(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> Future[list[Extraction]]:
        """The extractions of `traces`, in order; from any thread but the pool's loop's."""
        return asyncio.run_coroutine_threadsafe(
            self._extract_all(traces, route_attribute), self._pool.loop
        )

    async def _extract_all(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> list[Extraction]:
        batches = [traces[i : i + EXTRACT_BATCH] for i in range(0, len(traces), EXTRACT_BATCH)]
        if len(batches) == 1:
            return await self._extract(batches[0], route_attribute)
        done = await asyncio.gather(*(self._extract(b, route_attribute) for b in batches))
        return [extraction for batch in done for extraction in batch]

    async def _extract(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> list[Extraction]:
        task = _Traces(traces, route_attribute)
        for attempt in (1, 2):
            try:
                return await self._pool.submit(extract_batch, task, items=len(traces), ahead=True)
            except WorkerLost as lost:
                if lost.stopping:
                    raise
                if attempt == 2:
                    return [Unreadable("extract_failed", f"{lost.error} while extracting")] * len(
                        traces
                    )
            except TaskFailed as exc:
                return [Unreadable("extract_failed", f"{exc} while extracting")] * len(traces)
        raise AssertionError("unreachable")
