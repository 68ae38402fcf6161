"""A trace's spans as a tree: by time, by id, the root, ancestry, and the trace-wide
values every record of the trace carries (route, version, feedback)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import Any

from monitor.spans import FEEDBACK_KEY, Span

_ABSENT: Any = object()
BY_TIME = attrgetter("start_unix_nano", "end_unix_nano")


def trace_shape(spans: Sequence[Span]) -> tuple[list[Span], dict[str, Span], Span]:
    """Spans by time, by id, and the root: the earliest span without a parent in the trace."""
    ordered = sorted(spans, key=BY_TIME)
    by_id = {s.span_id: s for s in ordered}
    for span in ordered:
        if span.is_root or span.parent_span_id not in by_id:
            return ordered, by_id, span
    raise ValueError("no root span: the parent links form a cycle")


def route_of(root: Span, spans: list[Span], key: str) -> str:
    """The route attribute of the root, else of the earliest span that has it, else the
    root's resource attribute."""
    value = root.attribute(key, _ABSENT)
    if value is _ABSENT:
        for span in spans:
            value = span.attribute(key, _ABSENT)
            if value is not _ABSENT:
                break
        else:
            value = root.resource.get(key)
    return "" if value is None else str(value)


def version_of(root: Span) -> str | None:
    """The resource attribute `service.version` of the root's resource (None when absent
    or empty)."""
    value = root.resource.get("service.version")
    return None if value is None or value == "" else str(value)


def feedback_of(spans: list[Span]) -> str | None:
    """`rag.feedback` of the earliest span where it is "positive" or "negative"."""
    for span in spans:
        value = span.attribute(FEEDBACK_KEY)
        if value in ("positive", "negative"):
            return str(value)
    return None


# Parent links a walk up the tree follows at most (a cycle or a hostile depth ends there).
MAX_HOPS = 1000


def ancestors(span: Span, by_id: dict[str, Span]) -> Iterator[Span]:
    """The spans above `span`, nearest first, `MAX_HOPS` at most (those `is_ancestor`
    finds)."""
    hops = 0
    while span.parent_span_id in by_id and hops < MAX_HOPS:
        span = by_id[span.parent_span_id]
        yield span
        hops += 1


def depth_of(span: Span, by_id: dict[str, Span]) -> int:
    return sum(1 for _ in ancestors(span, by_id))


def is_ancestor(candidate: Span, span: Span, by_id: dict[str, Span]) -> bool:
    return any(above is candidate for above in ancestors(span, by_id))
