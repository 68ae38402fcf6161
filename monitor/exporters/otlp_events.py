"""OTLP out: each evaluation as a `gen_ai.evaluation.result` event in the evaluated trace.

Each evaluator's result is one event with the GenAI semantic-convention attributes:

- `gen_ai.evaluation.name` — the evaluator (`local_groundedness`, `faithfulness`, ...);
- `gen_ai.evaluation.score.value` — the score on the evaluator's native scale;
- `gen_ai.evaluation.score.label` — the verdict label (`pass` / `fail` when it has none);
- `gen_ai.evaluation.explanation` — the evaluator's reasoning, only when the sink was
  asked for it (`include_explanations`, redacted: it carries the record's text), or what
  went wrong with a failed evaluation;
- `error.type` — set instead of a score when the evaluation failed;
- `gen_ai.evaluation.evaluator.id` and `gen_ai.evaluation.evaluator.version` — which
  evaluator gave the verdict and its revision (`monitor.evaluators.revision`: the monitor's
  version and detector, a judge's model, prompt and parameters), and
  `gen_ai.evaluation.evaluator.type` — `llm_judge` or `deterministic`; the provenance
  attributes proposed for `gen_ai.evaluation.*` (semantic-conventions-genai pull request
  359), so that two verdicts are compared only when the same revision gave them;
- `rag_monitor.version` — the monitor's version: the mark that keeps these events from
  being read back as the app's own verdicts (`monitor/conventions/_verdicts.py`), should
  they reach the monitor again through the app's collector.

The events travel as one of two signals (`exporters.otlp.signal`):

- `spans` (the default; trace viewers show span events): for every evaluated record the
  sink creates one span (`rag-monitor evaluate`) whose parent is the record's span (same
  trace id, remote parent), with the record's events on it. A record with no trace
  context (a replayed file, a Kafka JSON record without ids) gets a root span in a trace
  of its own, found by its `rag.request_id` attribute.
- `logs` (events as the GenAI conventions define them): each event is one OTLP log record
  with event name `gen_ai.evaluation.result` whose trace and span ids are the record's own
  span's — no span is made. It carries the event's attributes and the record's
  `rag.request_id` and `rag.service`; a record with no trace context gives log records
  without ids.

`emit` builds the spans or log records on the event loop (cheap; the record itself is not
kept) and queues them (`SendingQueue`, `monitor/exporters/_sending.py`: bounded in records
and bytes, a full queue counted); the queue's worker exports up to `_MAX_BATCH` records'
worth at a time with `opentelemetry-exporter-otlp` in a thread of its own, so the loop never
waits on the network. Those exports block on the collector and cannot be interrupted:
each runs in a daemon thread that nothing joins (`_detached.py`), so at the shutdown
deadline an export still waiting on a collector that never answers is abandoned (its
records counted) and the process exits on time; the exporter's own shutdown gets what
is left of the deadline, likewise. The exporter retries transient failures within its own `timeout_s`;
a batch it still could not export is tried again under the retry policy
(`monitor/shared/retry.py`, `_EXPORT_RETRY`: an endpoint down for longer than one exporter
timeout, such as a collector restarting). Drops are counted per record in
`rag_monitor_dropped_total{stage="otlp_events",reason}` (`queue_full`, `shutting_down`,
`export_failed`, `shutdown`) and logged at most once per reason per 30 s.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Literal, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LogRecordProcessor,
    ReadableLogRecord,
    ReadWriteLogRecord,
)
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.util.types import AttributeValue

from monitor.component import Evaluated
from monitor.conventions import OWN_MARK
from monitor.exporters._detached import detached
from monitor.exporters._sending import RetryableError, SendingQueue
from monitor.exporters.extracted import Redact, shown_results
from monitor.judge.definitions import JUDGE_EVALUATORS
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.shared.retry import RetryPolicy
from monitor.shared.version import __version__
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

EVENT_NAME = "gen_ai.evaluation.result"
SPAN_NAME = "rag-monitor evaluate"
_STAGE = "otlp_events"
_MAX_BATCH = 512
_MAX_EXPLANATION = 2000
_QUEUE_BYTES = 64 << 20
# Bytes a record's events are taken to hold besides their text (ids, numbers, keys).
_OVERHEAD_BYTES = 256
# Three exports of a batch in all, the waits between them drawn below 2 s, then 4 s; no
# retry starts 30 s after the first export did (the queue waits behind the batch).
_EXPORT_RETRY = RetryPolicy(base_s=2.0, max_s=30.0, max_attempts=3, deadline_s=30.0)
OtlpProtocol = Literal["grpc", "http/protobuf"]
OtlpSignal = Literal["spans", "logs"]
EventsExporter = SpanExporter | LogRecordExporter


def create_exporter(
    endpoint: str, protocol: OtlpProtocol, timeout_s: float = 10.0, signal: OtlpSignal = "spans"
) -> EventsExporter:
    """The OTLP exporter for `exporters.otlp.endpoint` / `protocol` / `signal`; it retries
    transient failures itself until `timeout_s`. Over HTTP, an endpoint without the
    signal's path (`/v1/traces`, `/v1/logs`) gets it."""
    if protocol == "grpc":
        insecure = not endpoint.startswith("https://")
        if signal == "logs":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
                OTLPLogExporter as GrpcLogs,
            )

            return GrpcLogs(endpoint=endpoint, insecure=insecure, timeout=timeout_s)
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        return Grpc(endpoint=endpoint, insecure=insecure, timeout=timeout_s)
    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    path = "/v1/logs" if signal == "logs" else "/v1/traces"
    if not url.rstrip("/").endswith(path):
        url = url.rstrip("/") + path
    if signal == "logs":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (
            OTLPLogExporter as HttpLogs,
        )

        return HttpLogs(endpoint=url, timeout=timeout_s)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http(endpoint=url, timeout=timeout_s)


def event_attributes(result: EvalResult) -> dict[str, AttributeValue]:
    # The monitor's mark: an app's verdicts are read from its traces, these never are.
    attrs: dict[str, AttributeValue] = {
        "gen_ai.evaluation.name": result.name,
        OWN_MARK: __version__,
    }
    if result.outcome == "error":
        attrs["error.type"] = (result.error or "error").split(":", 1)[0][:100]
    else:
        if result.score is not None:
            attrs["gen_ai.evaluation.score.value"] = float(result.score)
        attrs["gen_ai.evaluation.score.label"] = result.label or result.outcome
    explanation = result.error if result.outcome == "error" else result.explanation
    if explanation:
        attrs["gen_ai.evaluation.explanation"] = explanation[:_MAX_EXPLANATION]
    if result.revision is not None:
        attrs["gen_ai.evaluation.evaluator.id"] = result.name
        attrs["gen_ai.evaluation.evaluator.version"] = result.revision
        attrs["gen_ai.evaluation.evaluator.type"] = (
            "llm_judge" if result.name in JUDGE_EVALUATORS else "deterministic"
        )
    return attrs


# One record's events as they are exported: a span, or log records.
_Exported = tuple[Any, ...]


class _Signal(Protocol):
    def build(self, record: RagRecord, results: dict[str, EvalResult]) -> _Exported: ...

    def export(self, batch: Sequence[Any]) -> bool: ...

    def shutdown(self) -> None: ...


def _resource() -> Resource:
    return Resource.create({"service.name": "rag-monitor", "service.version": __version__})


class _CollectSpans(SpanProcessor):
    """Keeps every ended span for the sink to take (no queue, no thread)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class _Spans:
    """The `spans` signal: one span per record, its results as span events."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self._collect = _CollectSpans()
        self._provider = TracerProvider(resource=_resource())
        self._provider.add_span_processor(self._collect)
        self._tracer = self._provider.get_tracer("rag-monitor", __version__)

    def build(self, record: RagRecord, results: dict[str, EvalResult]) -> _Exported:
        span = self._tracer.start_span(
            SPAN_NAME,
            context=_context(record),
            kind=SpanKind.INTERNAL,
            attributes={
                "rag.request_id": record.request_id,
                "rag.service": record.service,
                "rag.context_source": record.context_source,
            },
        )
        for result in results.values():
            span.add_event(EVENT_NAME, attributes=event_attributes(result))
        span.end()
        built, self._collect.spans = tuple(self._collect.spans), []
        return built

    def export(self, batch: Sequence[Any]) -> bool:
        return self._exporter.export(batch) is SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._exporter.shutdown()
        self._provider.shutdown()


class _CollectLogs(LogRecordProcessor):
    """Keeps every emitted log record for the sink to take (no queue, no thread)."""

    def __init__(self) -> None:
        self.records: list[ReadableLogRecord] = []

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        assert log_record.resource is not None  # the logger sets it
        self.records.append(
            ReadableLogRecord(
                log_record=log_record.log_record,
                resource=log_record.resource,
                instrumentation_scope=log_record.instrumentation_scope,
                limits=log_record.limits,
            )
        )

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _Logs:
    """The `logs` signal: one log record per result, in the record's span."""

    def __init__(self, exporter: LogRecordExporter) -> None:
        self._exporter = exporter
        self._collect = _CollectLogs()
        self._provider = LoggerProvider(resource=_resource())
        self._provider.add_log_record_processor(self._collect)
        self._logger = self._provider.get_logger("rag-monitor", __version__)

    def build(self, record: RagRecord, results: dict[str, EvalResult]) -> _Exported:
        context = _context(record)
        now = time.time_ns()
        for result in results.values():
            attributes = event_attributes(result)
            attributes["rag.request_id"] = record.request_id
            attributes["rag.service"] = record.service
            attributes["rag.context_source"] = record.context_source
            self._logger.emit(
                timestamp=now, context=context, event_name=EVENT_NAME, attributes=attributes
            )
        built, self._collect.records = tuple(self._collect.records), []
        return built

    def export(self, batch: Sequence[Any]) -> bool:
        return self._exporter.export(batch) is LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call]  # unannotated in the SDK
        self._provider.shutdown()


class OtlpEventsSink:
    """A `ResultSink` exporting evaluation events to an OTLP endpoint (see module
    docstring): as spans with a `SpanExporter`, as log records with a `LogRecordExporter`.

    `queue_size` (records) and `queue_bytes` bound what waits for export; `rng` and
    `sleep` drive the retries' backoff (tests inject them)."""

    def __init__(
        self,
        exporter: EventsExporter,
        telemetry: Telemetry,
        *,
        include_explanations: bool = False,
        redact: Redact | None = None,
        queue_size: int = 10_000,
        queue_bytes: int = _QUEUE_BYTES,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._include_explanations = include_explanations
        self._redact = redact
        self._signal: _Signal = (
            _Logs(exporter) if isinstance(exporter, LogRecordExporter) else _Spans(exporter)
        )
        self._queue: SendingQueue[_Exported] = SendingQueue(
            self._export,
            telemetry,
            _STAGE,
            name="otlp events",
            retry=_EXPORT_RETRY,
            max_items=queue_size,
            max_bytes=queue_bytes,
            max_batch=_MAX_BATCH,
            reasons={"failed": "export_failed"},
            on_sent=self._exported,
            rng=rng,
            sleep=sleep,
        )
        self._closed = False
        self.exported = 0  # records whose events were exported

    @property
    def exporting(self) -> int:
        """Records of the batch being exported now (0 between exports)."""
        return self._queue.in_flight

    async def start(self) -> None:
        if not self._closed:
            await self._queue.start()

    def emit(self, batch: Sequence[Evaluated]) -> None:
        """Every record's events are built before any is queued: a record it fails on
        leaves the batch unsent, and the stage's retry, record by record, sends none twice."""
        built = []
        for evaluated in batch:
            record = evaluated.record
            shown = shown_results(
                evaluated.results, explanations=self._include_explanations, redact=self._redact
            )
            built.append((self._signal.build(record, shown), _nbytes(record, shown)))
        for events, size in built:
            self._queue.put(events, size)

    async def shutdown(self, deadline_s: float) -> None:
        """Export what is queued until `deadline_s`, then give up on the rest (counted) and
        shut the exporter down. Safe without `start` and safe to call twice."""
        if self._closed:
            return
        self._closed = True
        started = time.monotonic()
        await self._queue.shutdown(deadline_s)
        left = max(0.0, deadline_s - (time.monotonic() - started))
        try:
            async with asyncio.timeout(left):
                await detached(self._signal.shutdown, "otlp-events-shutdown")
        except TimeoutError:
            log.warning(
                "the OTLP exporter did not shut down within the deadline (its collector does "
                "not answer); it is left behind"
            )

    async def _export(self, batch: list[_Exported]) -> None:
        exported = [item for built in batch for item in built]
        if not await detached(partial(self._signal.export, exported), "otlp-events-export"):
            raise RetryableError(f"the exporter could not export {len(batch)} records' events")

    def _exported(self, batch: list[_Exported]) -> None:
        self.exported += len(batch)


def _nbytes(record: RagRecord, results: dict[str, EvalResult]) -> int:
    """About what a record's events hold: their text and a fixed share for the rest."""
    text = len(record.request_id) + len(record.service)
    for result in results.values():
        explanation = result.error if result.outcome == "error" else result.explanation
        text += len(result.name) + min(len(explanation or ""), _MAX_EXPLANATION)
        text += len(result.label or "") + _OVERHEAD_BYTES
    return text + _OVERHEAD_BYTES


def _context(record: RagRecord) -> Context | None:
    """The record's span as the parent context, when the record names one."""
    if not record.trace_id or not record.span_id:
        return None
    if len(record.trace_id) != 32 or len(record.span_id) != 16:
        return None
    span = SpanContext(
        trace_id=int(record.trace_id, 16),
        span_id=int(record.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(span)) if span.is_valid else None
