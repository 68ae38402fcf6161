"""Which spans of a delivery the trace stage builds and assembles: those of the traces some
evaluator may sample.

Whether a trace can be sampled is known from its trace id alone (`Sampler.may_sample`:
the sampling position against the highest rate of any rule), except for what forces
sampling: an ERROR status (`sampling.always.error`) and negative feedback
(`sampling.always.negative_feedback`). An OTLP protobuf request arrives with its spans
still serialized (`Delivery.unbuilt`: its ids read by the receiver); the filter
has the spans of the traces that may be sampled, or are forced, built, and the others
only counted: at `sampling.rate: 0.01` ninety-nine traces in a hundred cost no `Span`, no
assembly, no sampling view. GenAI log events (`Delivery.log_events`) are filtered the
same way. What this costs the forcing rules is in the trace stage's README.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.processors.sampler import Sampler
from monitor.spans import FEEDBACK_KEY, Built, RequestSpans, Span


class SpanFilter:
    """The trace stage's choice of the spans worth a `Span`; `keep_all` turns it off
    (`/debug/records` lists unsampled traces, which it would never build). Remembers the
    traces forced so far (up to `max_remembered`), so that their later spans are kept."""

    def __init__(self, sampler: Sampler, *, max_remembered: int, keep_all: bool) -> None:
        self._sampler = sampler
        self._max = max_remembered
        self._keep_all = keep_all
        self._forced: dict[bytes, None] = {}  # oldest first
        self._event_services: set[str] = set()

    def _everything(self) -> bool:
        return self._keep_all or self._sampler.samples_every_key

    def request(self, request: RequestSpans) -> Built:
        """The spans of an OTLP request built: those of every trace that may be sampled
        or is forced; the others counted. A request that mentions `rag.feedback` while
        negative feedback forces sampling is built whole (one search of its body)."""
        sampler = self._sampler
        if self._everything() or (
            sampler.always_negative_feedback and request.mentions(FEEDBACK_KEY)
        ):
            return request.build()
        trace_ids = request.trace_ids
        if sampler.always_error:
            for trace_id in request.error_ids & trace_ids:
                self._force(trace_id)
        keep = sampler.may_sample_ids(trace_ids)
        if self._forced:
            keep.update(trace_id for trace_id in trace_ids if trace_id in self._forced)
        return request.build(keep)

    def events(self, events: Sequence[Span]) -> Built:
        """GenAI log events (event spans) of the traces kept; the others counted. The
        first event of each service is kept whatever its trace: it tells trace assembly
        that the service sends log events, so that its sampled traces wait for theirs."""
        if self._everything():
            return Built(list(events))
        kept: list[Span] = []
        for span in events:
            if span.service not in self._event_services and len(self._event_services) < self._max:
                self._event_services.add(span.service)
                kept.append(span)
            else:
                trace_id = bytes.fromhex(span.trace_id)
                if trace_id in self._forced or self._sampler.may_sample(span.trace_id):
                    kept.append(span)
        return Built(kept, len(events) - len(kept))

    def _force(self, trace_id: bytes) -> None:
        forced = self._forced
        forced[trace_id] = None
        while len(forced) > self._max:
            del forced[next(iter(forced))]
