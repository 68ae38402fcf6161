"""Triage at decoding: spans of traces no evaluator will sample are counted, never built.

At `sampling.rate: 0.01` ninety-nine traces in a hundred are only counted. Whether a trace
can be sampled is known from its trace id alone (`Sampler.may_sample`: the sampling
position against the highest rate of any rule), except for what forces sampling: an
ERROR status (`sampling.always.error`) and negative feedback
(`sampling.always.negative_feedback`). The OTLP receivers decode with this triage
(`monitor.spans.Triage`): a trace that cannot be sampled and is not forced in the request
at hand has its spans checked and counted, and no `Span` made, no assembly, no sampling
view. What that costs the forcing rules is in the trace stage's README.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from prometheus_client import Counter

from monitor.processors.sampler import Sampler
from monitor.spans import Decoded, Span
from monitor.telemetry import Telemetry


class TraceTriage:
    """The trace stage's `monitor.spans.Triage`: the sampler's decision from the trace id,
    a bounded memory of the traces forced so far, and the counts of what was forgotten
    (as the stage counts a trace that no evaluator samples)."""

    def __init__(
        self,
        sampler: Sampler,
        telemetry: Telemetry,
        *,
        assembled: Counter,
        unsampled: Counter,
        max_remembered: int,
    ) -> None:
        self._sampler = sampler
        self._t = telemetry
        self._assembled = assembled
        self._unsampled = unsampled
        self._max = max_remembered
        self._lock = threading.Lock()  # receivers decode in their own threads
        self._forced: dict[bytes, None] = {}  # oldest first
        self._event_services: set[str] = set()

    @property
    def keeps_everything(self) -> bool:
        return self._sampler.samples_every_key

    @property
    def forced_by_error(self) -> bool:
        return self._sampler.always_error

    @property
    def forced_by_feedback(self) -> bool:
        return self._sampler.always_negative_feedback

    def keeps(self, trace_id: bytes) -> bool:
        return trace_id in self._forced or self._sampler.may_sample(trace_id.hex())

    def kept(self, trace_ids: Collection[bytes]) -> set[bytes]:
        forced = self._forced
        kept = self._sampler.may_sample_ids(trace_ids)
        if forced:
            kept.update(trace_id for trace_id in trace_ids if trace_id in forced)
        return kept

    def force(self, trace_id: bytes) -> None:
        with self._lock:
            self._forced[trace_id] = None
            while len(self._forced) > self._max:
                del self._forced[next(iter(self._forced))]

    def keep_events(self, decoded: Decoded) -> Decoded:
        """GenAI log events (event spans) of the traces kept; the others are counted as
        forgotten. The first event of each service is kept whatever its trace: it tells
        trace assembly that the service sends log events, so that its sampled traces
        wait for theirs."""
        if self.keeps_everything:
            return decoded
        kept: list[Span] = []
        for span in decoded.spans:
            if span.service not in self._event_services and len(self._event_services) < self._max:
                self._event_services.add(span.service)
                kept.append(span)
            elif self.keeps(bytes.fromhex(span.trace_id)):
                kept.append(span)
        forgotten = len(decoded.spans) - len(kept)
        return Decoded(kept, decoded.rejected, decoded.message, decoded.forgotten + forgotten)

    def forgot(self, receiver: str, decoded: Decoded) -> None:
        """Count what `decoded` left unread, once the rest was taken: its spans as
        received, and each trace whose root it held as released (`root_ended`) and
        sampled by no evaluator."""
        if decoded.forgotten:
            self._t.child(self._t.spans_received, receiver).inc(decoded.forgotten)
        traces = sum(decoded.forgotten_roots.values())
        if traces:
            self._assembled.labels("root_ended").inc(traces)
            for service, n in decoded.forgotten_roots.items():
                self._t.child(self._unsampled, self._t.service_cap(service)).inc(n)
