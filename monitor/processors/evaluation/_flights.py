"""A batch's task run, and what it gave as each item's records in flight: the evaluation
stage's step between taking a batch off its queue and evaluating its records
(`_stage.py`). The CPU scorers a budget holds back are not sent; the task extracts each
trace and scores its records (`_runner.py`); each trace's records get its delivery's
metadata, its `on_extracted` is told what became of it, and its place in the queue's
byte bound is re-costed at its records' estimated size. The verdicts the app wrote into
the trace that pass the screen (`_external.py`) are each record's first results."""

from __future__ import annotations

import logging

from monitor.component import SampledRecord, SampledTrace
from monitor.extraction import TraceRecords, Unreadable
from monitor.processors.evaluation._evaluators import BatchEvaluator, InFlight
from monitor.processors.evaluation._external import ExternalScreen
from monitor.processors.evaluation._queue import Item, WorkQueue
from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import Job, Outcome
from monitor.records import RagRecord
from monitor.records.limits import record_bytes
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)


class BatchTasks:
    def __init__(
        self,
        runner: TaskRunner,
        evaluators: BatchEvaluator,
        queue: WorkQueue,
        telemetry: Telemetry,
        external: ExternalScreen | None = None,
    ) -> None:
        self._runner = runner
        self._evaluators = evaluators
        self._queue = queue
        self._t = telemetry
        self._external = external

    async def run(self, items: list[Item]) -> list[tuple[Item, list[InFlight]]]:
        """The batch's task run, and each item's records with what their CPU scorers gave;
        each trace's `on_extracted` told what became of it."""
        first_cpu = self._evaluators.first_cpu
        sent: list[Job] = []
        refused: list[frozenset[str]] = []
        for item in items:
            refused.append(self._evaluators.admit_cpu(item.sampled))
            scorers = tuple(n for n in first_cpu if n in item.sampled and n not in refused[-1])
            others = self._evaluators.other_scorers(scorers, _sampling_key(item))
            if isinstance(item, SampledTrace):
                job = Job(scorers, spans=item.spans, others=others, metadata=item.metadata)
                sent.append(job)
            elif scorers:
                sent.append(Job(scorers, record=item.record, others=others))
        outcomes = iter(await self._runner.run(sent))
        out: list[tuple[Item, list[InFlight]]] = []
        for item, held in zip(items, refused, strict=True):
            if isinstance(item, SampledRecord):
                runs = any(n in item.sampled and n not in held for n in first_cpu)
                outcome = next(outcomes) if runs else Outcome(None, [{}])
                flight = self._flight(item.record, item.sampled, outcome, 0, held)
                out.append((item, [flight]))
                continue
            outcome = next(outcomes)
            if outcome.extraction is None or outcome.scored is None:
                # The runner's outcome of a trace always has both; raised, the stage's
                # failure path (a try alone, then `internal_error`) counts and logs it.
                raise ValueError(f"{describe(item)} came back unextracted or unscored")
            records = self._extracted(item, outcome.extraction)
            self._queue.recost(item, sum(map(record_bytes, records)))
            # strict: a trace's records and their results must pair one to one.
            flights = [
                self._flight(record, item.sampled, outcome, i, held)
                for i, (record, _) in enumerate(zip(records, outcome.scored, strict=True))
            ]
            if isinstance(outcome.extraction, TraceRecords):
                self._verdicts(item, outcome.extraction, flights)
            out.append((item, flights))
        return out

    def _extracted(
        self, item: SampledTrace, extraction: TraceRecords | Unreadable
    ) -> list[RagRecord]:
        """The trace's records (the task merged its metadata in); its `on_extracted` told."""
        work = self._queue.in_work.get(id(item))
        if work is None or not work.told:  # a batch tried again tells it once
            if work is not None:
                work.told = True
            try:
                item.on_extracted(extraction)
            except Exception:
                log.exception("telling the trace stage what %s gave", describe(item))
        return extraction.records if isinstance(extraction, TraceRecords) else []

    def _verdicts(
        self, item: SampledTrace, extraction: TraceRecords, flights: list[InFlight]
    ) -> None:
        """The app's own verdicts of the trace that pass the screen, as its records' first
        results; those its reading refused, counted."""
        verdicts = extraction.verdicts
        if verdicts is None or self._external is None:
            return
        trace_id = item.spans[0].trace_id if item.spans else ""
        if verdicts.refused:
            service = flights[0].service if flights else _trace_service(item, self._t)
            self._external.refused(service, verdicts.refused, trace_id=trace_id)
        for i, (flight, found) in enumerate(zip(flights, verdicts.by_record, strict=False)):
            if found:
                senders = verdicts.senders[i] if i < len(verdicts.senders) else {}
                flight.results.update(self._external.take(senders, flight.service, found, trace_id))

    def _flight(
        self,
        record: RagRecord,
        sampled: frozenset[str],
        outcome: Outcome,
        i: int,
        refused: frozenset[str] = frozenset(),
    ) -> InFlight:
        """Record `i` of `outcome`, with what its CPU scorers (and their other
        revisions) gave."""
        service = self._t.service_cap(record.service)
        scored = outcome.scored[i] if outcome.scored else {}
        return InFlight(
            record,
            sampled,
            service,
            record.missing(),
            scored,
            {},
            refused,
            others_scored=outcome.others_of(i),
        )


def _sampling_key(item: Item) -> str:
    """What the item's records are sampled by: the trace's id (its records' sampling key)."""
    if isinstance(item, SampledRecord):
        return item.record.sampling_key
    return item.spans[0].trace_id if item.spans else ""


def _trace_service(item: SampledTrace, telemetry: Telemetry) -> str:
    """The service label of a trace that gave no record: its root's, else its first span's."""
    root = next((span for span in item.spans if span.is_root), None)
    first = root or (item.spans[0] if item.spans else None)
    return telemetry.service_cap(first.service if first else "unknown")


def describe(item: Item) -> str:
    if isinstance(item, SampledRecord):
        return f"record {item.record.request_id} (service {item.record.service})"
    first = item.spans[0] if item.spans else None
    return f"trace {first.trace_id if first else ''} (service {first.service if first else ''})"
