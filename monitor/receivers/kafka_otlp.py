"""OTLP spans from Kafka: the OTLP receiver's trace assembly and extraction, plus offsets.

Spans go through the same `TraceAssembler` and `extract_records` as the OTLP receivers
(`monitor.receivers.otlp`), run synchronously in the Kafka consumer thread. What is
Kafka-specific is the bookkeeping for at-least-once: spans of one trace may arrive in
several messages, so each message owes one unit per distinct trace it added spans to, and
a trace, once released and extracted, pays every contributing message when all of its
records are finished (`TraceHandle`). A trace that yields no record pays at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from monitor.receivers.kafka_offsets import PartitionTracker
from monitor.receivers.otlp.assembler import FinishedTrace, TraceAssembler
from monitor.receivers.otlp.decode import Span
from monitor.receivers.otlp.extract import extract_records
from monitor.records import RagRecord
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
SOURCE = "kafka"
ASSEMBLE_STAGE = "assemble"

Contributor = tuple[PartitionTracker, int]


@dataclass(eq=False, slots=True)
class TraceHandle:
    """A released trace whose records are in the pipeline."""

    contributors: list[Contributor]
    remaining: int


@dataclass(slots=True)
class Released:
    """What releasing traces produced: records to hand off, and messages paid at once."""

    records: list[tuple[RagRecord, TraceHandle]] = field(default_factory=list)
    paid: list[Contributor] = field(default_factory=list)


class KafkaTraces:
    """Trace assembly for one Kafka receiver. Used only by the consumer thread."""

    def __init__(
        self,
        *,
        idle_timeout_s: float,
        max_open_traces: int,
        route_attribute: str,
        telemetry: Telemetry,
        warn: Callable[[str, int, str], None],
    ) -> None:
        self._t = telemetry
        self._warn = warn
        self._route_attribute = route_attribute
        self._assembler = TraceAssembler(
            idle_timeout_s=idle_timeout_s, max_open_traces=max_open_traces, on_drop=self._dropped
        )
        self._contributors: dict[str, list[Contributor]] = {}
        self._meta: dict[str, dict[str, str]] = {}
        self.expire_every_s = min(1.0, idle_timeout_s / 4)

    @property
    def open_traces(self) -> int:
        return self._assembler.open_traces

    def add(
        self, spans: list[Span], tracker: PartitionTracker, offset: int, meta: dict[str, str]
    ) -> tuple[int, list[FinishedTrace]]:
        """Buffer a message's spans. Returns the units the message owes (the distinct traces
        it joined) and the traces this released; register the units with the tracker
        before calling `release`. Records of a trace carry the Kafka metadata (key,
        headers, position) of the first message that held spans of it."""
        self._t.spans_received.labels(SOURCE).inc(len(spans))
        trace_ids = {span.trace_id for span in spans}
        finished = self._assembler.add(spans, SOURCE)
        released = {trace.trace_id for trace in finished}
        units = 0
        for trace_id in trace_ids:
            # Spans of an already released trace are dropped as late: they owe nothing.
            if trace_id in released or self._assembler.is_open(trace_id):
                self._contributors.setdefault(trace_id, []).append((tracker, offset))
                self._meta.setdefault(trace_id, meta)
                units += 1
        return units, finished

    def expire(self) -> list[FinishedTrace]:
        return self._assembler.expire()

    def drain(self) -> list[FinishedTrace]:
        return self._assembler.drain()

    def release(self, finished: list[FinishedTrace]) -> Released:
        out = Released()
        for trace in finished:
            contributors = self._contributors.pop(trace.trace_id, [])
            meta = self._meta.pop(trace.trace_id, {})
            try:
                records = extract_records(trace.spans, route_attribute=self._route_attribute)
            except Exception as exc:
                self._t.records_rejected.labels(SOURCE, "extract_failed").inc()
                self._warn(
                    "extract_failed",
                    logging.WARNING,
                    f"kafka: trace {trace.trace_id}: cannot build a record: {exc}",
                )
                records = []
            if not records:
                if trace.spans:
                    self._t.dropped.labels(ASSEMBLE_STAGE, "not_rag").inc()
                out.paid.extend(contributors)
                continue
            handle = TraceHandle(contributors, len(records))
            out.records.extend(
                (record.model_copy(update={"metadata": {**record.metadata, **meta}}), handle)
                for record in records
            )
        return out

    def _dropped(self, reason: str, count: int) -> None:
        self._t.dropped.labels(ASSEMBLE_STAGE, reason).inc(count)
        self._warn(
            "assemble:" + reason,
            logging.WARNING,
            f"kafka: trace assembly dropped {count} spans: {reason}",
        )
