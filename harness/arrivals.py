"""In which order GenAI log events and spans reached the trace stage. No metric tells them
apart (`spans_received_total` counts the event spans that OTLP log records become with
the spans), so `Arrivals` stands where the receivers hand their deliveries to the stage,
hands each one on, and counts what the stage took: event spans
(`monitor.spans.LOG_EVENT_KEY`) apart from spans, and how many of one kind had come when
the first of the other came. `Watched` is `harness.pipeline.Served` with it in between."""

from __future__ import annotations

from collections.abc import Sequence

from harness.pipeline import RecordingStage, Served, trace_stage
from monitor.component import Accepted, Delivery, Refused, TraceConsumer
from monitor.config import Config
from monitor.conventions import LOG_EVENTS
from monitor.receivers.otlp import OtlpReceivers
from monitor.spans import LOG_EVENT_KEY, Span
from monitor.telemetry import Telemetry


def is_log_event(span: Span) -> bool:
    """A span made from an OTLP log record (the name first: it costs no decoding)."""
    return span.name in LOG_EVENTS and span.attribute(LOG_EVENT_KEY) is not None


class Arrivals:
    """The trace stage as the receivers see it (`TraceConsumer`), counting what it took.
    The stage and its receivers run on the event loop, so the counts follow the order the
    stage took deliveries in."""

    def __init__(self, stage: TraceConsumer) -> None:
        self._stage = stage
        self.events = 0
        self.spans = 0
        # How many of one kind the stage had taken when it took the first of the other
        # (None until it did).
        self.events_before_first_span: int | None = None
        self.spans_before_first_event: int | None = None

    def _count(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            if delivery.unbuilt is not None and len(delivery.unbuilt):
                # A trace request read on the loop, its spans built by the stage: no log
                # event travels this way.
                if self.events_before_first_span is None:
                    self.events_before_first_span = self.events
                self.spans += len(delivery.unbuilt)
        for span in (span for delivery in deliveries for span in delivery.spans):
            if is_log_event(span):
                if self.spans_before_first_event is None:
                    self.spans_before_first_event = self.spans
                self.events += 1
            else:
                if self.events_before_first_span is None:
                    self.events_before_first_span = self.events
                self.spans += 1

    def refuses(self) -> bool:
        return self._stage.refuses()

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted | Refused:
        answer = self._stage.consume(deliveries)
        if answer:
            self._count(deliveries)
        return answer

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        taken = await self._stage.put(deliveries)
        if taken:
            self._count(deliveries)
        return taken


class Watched(Served):
    """OTLP receivers and the trace stage behind them, with `arrivals` in between."""

    def __init__(self, config: Config, stage: RecordingStage, telemetry: Telemetry) -> None:
        self.trace = trace_stage(config, stage, telemetry)
        self.arrivals = Arrivals(self.trace)
        self.receivers = OtlpReceivers(config, self.arrivals, telemetry)
