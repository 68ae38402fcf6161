"""OTLP out: each evaluation as a `gen_ai.evaluation.result` event in the evaluated trace.

For every evaluated record that carries a trace id and span id, the sink creates one span
(`rag-monitor evaluate`) whose parent is the record's span (same trace id, remote parent),
so a trace viewer shows the verdicts next to the request they judge. A record with no
trace context (a replayed file, a Kafka JSON record without ids) gets a root span in a
trace of its own, found by its `rag.request_id` attribute. Each evaluator's
result is one event on that span with the GenAI semantic-convention attributes:

- `gen_ai.evaluation.name` — the evaluator (`local_groundedness`, `faithfulness`, ...);
- `gen_ai.evaluation.score.value` — the score on the evaluator's native scale;
- `gen_ai.evaluation.score.label` — the verdict label (`pass` / `fail` when it has none);
- `gen_ai.evaluation.explanation` — the evaluator's reasoning;
- `error.type` — set instead of a score when the evaluation failed.

Spans are built on the event loop (cheap) after `emit` queued the record (bounded; a full
queue is counted), and exported in batches with `opentelemetry-exporter-otlp` in a worker
thread, so the loop never waits on the network. The exporter retries transient failures
within its own `timeout_s`; a batch it still could not export is tried again under the
retry policy (`monitor/retry.py`, `_EXPORT_RETRY`: an endpoint down for longer than one
exporter timeout, such as a collector restarting). Drops are counted in
`rag_monitor_dropped_total{stage="otlp_events",reason}` (`queue_full`, `export_failed`,
`shutdown`) and logged at most once per reason per `_LOG_INTERVAL_S`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.util.types import AttributeValue

from monitor._version import __version__
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.retry import Retry, RetryPolicy
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

EVENT_NAME = "gen_ai.evaluation.result"
SPAN_NAME = "rag-monitor evaluate"
_STAGE = "otlp_events"
_LOG_INTERVAL_S = 30.0
_MAX_BATCH = 512
_MAX_EXPLANATION = 2000
# Three exports of a batch in all, the waits between them drawn below 2 s, then 4 s; no
# retry starts 30 s after the first export did (the queue waits behind the batch).
_EXPORT_RETRY = RetryPolicy(base_s=2.0, max_s=30.0, max_attempts=3, deadline_s=30.0)
OtlpProtocol = Literal["grpc", "http/protobuf"]


class _Collect(SpanProcessor):
    """Hands every ended span to the sink's current batch (no queue, no thread)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def create_exporter(endpoint: str, protocol: OtlpProtocol, timeout_s: float = 10.0) -> SpanExporter:
    """The OTLP span exporter for `exporters.otlp.endpoint` / `protocol`; it retries
    transient failures itself until `timeout_s`."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        return Grpc(
            endpoint=endpoint, insecure=not endpoint.startswith("https://"), timeout=timeout_s
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    if not url.rstrip("/").endswith("/v1/traces"):
        url = url.rstrip("/") + "/v1/traces"
    return Http(endpoint=url, timeout=timeout_s)


def event_attributes(result: EvalResult) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {"gen_ai.evaluation.name": result.name}
    if result.outcome == "error":
        attrs["error.type"] = (result.error or "error").split(":", 1)[0][:100]
    else:
        if result.score is not None:
            attrs["gen_ai.evaluation.score.value"] = float(result.score)
        attrs["gen_ai.evaluation.score.label"] = result.label or result.outcome
    explanation = result.error if result.outcome == "error" else result.explanation
    if explanation:
        attrs["gen_ai.evaluation.explanation"] = explanation[:_MAX_EXPLANATION]
    return attrs


class OtlpEventsSink:
    """A `ResultSink` exporting evaluation events to an OTLP endpoint (see module docstring).

    `rng` and `sleep` drive the retries' backoff (tests inject them)."""

    def __init__(
        self,
        exporter: SpanExporter,
        telemetry: Telemetry,
        *,
        queue_size: int = 10_000,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._exporter = exporter
        self._t = telemetry
        self._collect = _Collect()
        self._provider = TracerProvider(
            resource=Resource.create(
                {"service.name": "rag-monitor", "service.version": __version__}
            )
        )
        self._provider.add_span_processor(self._collect)
        self._tracer = self._provider.get_tracer("rag-monitor", __version__)
        self._queue: asyncio.Queue[tuple[RagRecord, dict[str, EvalResult]] | None] = asyncio.Queue(
            queue_size
        )
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self._exporting = 0  # spans of the batch being exported
        self._quiet = RateLimitedLog(log, _LOG_INTERVAL_S)
        self._closed = False
        self.exported = 0

    @property
    def exporting(self) -> int:
        """Spans of the batch being exported now (0 between exports)."""
        return self._exporting

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._worker(), name="otlp-events")

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        try:
            self._queue.put_nowait((record, results))
        except asyncio.QueueFull:
            self._drop("queue_full", 1, "queue full; dropping evaluation events")

    async def shutdown(self, deadline_s: float) -> None:
        """Export what is queued until `deadline_s`, then give up on the rest (counted) and
        shut the exporter down. Safe without `start` and safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            try:
                async with asyncio.timeout(deadline_s):
                    await self._queue.put(None)
                    # Shielded: at the deadline the batch in export is counted before the
                    # worker is cancelled.
                    await asyncio.shield(self._task)
            except TimeoutError:
                in_export = self._exporting  # read before the cancelled export forgets it
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
                left = in_export + sum(1 for item in self._drain() if item is not None)
                self._drop("shutdown", left, "shutdown deadline passed; %d records left", left)
            self._task = None
        await asyncio.to_thread(self._exporter.shutdown)
        self._provider.shutdown()

    async def _worker(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first]
            while not self._queue.empty() and len(batch) < _MAX_BATCH:
                batch.append(self._queue.get_nowait())
            items = [item for item in batch if item is not None]
            if items:
                await self._export(items)
            if None in batch:
                return

    def _drain(self) -> list[tuple[RagRecord, dict[str, EvalResult]] | None]:
        items = []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items

    async def _export(self, items: Sequence[tuple[RagRecord, dict[str, EvalResult]]]) -> None:
        for record, results in items:
            self._span(record, results)
        spans, self._collect.spans = self._collect.spans, []
        self._exporting = len(spans)
        retry = Retry(_EXPORT_RETRY, self._rng)
        try:
            while True:
                try:
                    outcome = await asyncio.to_thread(self._exporter.export, spans)
                except Exception as exc:
                    outcome = SpanExportResult.FAILURE
                    self._quiet.warning("raised", "otlp events: export raised %s", exc)
                if outcome is SpanExportResult.SUCCESS:
                    self.exported += len(spans)
                    return
                delay = retry.next_delay()
                if delay is None:
                    self._drop(
                        "export_failed",
                        len(spans),
                        "could not export %d spans in %d attempts",
                        len(spans),
                        retry.failures,
                    )
                    return
                await self._sleep(delay)
        finally:
            self._exporting = 0

    def _span(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        parent = _parent(record)
        context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        span = self._tracer.start_span(
            SPAN_NAME,
            context=context,
            kind=SpanKind.INTERNAL,
            attributes={"rag.request_id": record.request_id, "rag.service": record.service},
        )
        for result in results.values():
            span.add_event(EVENT_NAME, attributes=event_attributes(result))
        span.end()

    def _drop(self, reason: str, n: int, message: str, *args: object) -> None:
        if n:
            self._t.dropped.labels(_STAGE, reason).inc(n)
            self._quiet.warning(reason, "otlp events: " + message, *args)


def _parent(record: RagRecord) -> SpanContext | None:
    if not record.trace_id or not record.span_id:
        return None
    if len(record.trace_id) != 32 or len(record.span_id) != 16:
        return None
    context = SpanContext(
        trace_id=int(record.trace_id, 16),
        span_id=int(record.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return context if context.is_valid else None
