"""What the sampler reads of a trace before any record is built from it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.extraction import feedback_of, route_of, trace_shape
from monitor.spans import Span


@dataclass(slots=True)  # not frozen: one per trace, and a frozen init costs 3x
class SamplingView:
    """What `Sampler.decide` reads of the records a trace would yield (`Sampleable`)."""

    trace_id: str
    service: str
    route: str
    feedback: str | None
    error: bool

    @property
    def sampling_key(self) -> str:
        return self.trace_id  # as for the records, which all carry the trace id


def sampling_view(
    spans: Sequence[Span], *, route_attribute: str | None = "http.route"
) -> SamplingView:
    """The sampler's input for the records `extract_records` would build, without
    building them: trace id, service and route exactly as the records get them, the
    feedback the records carry, and `error` if any span failed (a record's `error` covers
    the spans it was built from, so the view is never less of a priority than a record).
    Reads the route key and `rag.feedback` per span and decodes no other attribute.
    `route_attribute=None` leaves the route empty, for a sampler whose overrides name no
    route (the route cannot change its decision then). `spans` must not be empty."""
    ordered, _, root = trace_shape(spans)
    return SamplingView(
        root.trace_id,
        root.service,
        "" if route_attribute is None else route_of(root, ordered, route_attribute),
        feedback_of(ordered),
        any(s.error for s in ordered),
    )
