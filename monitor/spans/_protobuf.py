"""OTLP protobuf trace payloads → `Span` objects.

`decode_protobuf` returns a `Decoded`: the spans that are usable plus a count and a
message for the ones rejected (ids of the wrong length), which the receivers report as
an OTLP partial success. A body that cannot be parsed at all raises `DecodeError` whose
`reason` is a closed-set metric label.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Collection
from typing import Any, Protocol

from google.protobuf.message import DecodeError as _ProtoDecodeError

from monitor.spans._lite import ColumnsRequest as _ColumnsRequest
from monitor.spans._lite import LiteStatus as _LiteStatus
from monitor.spans._lite import RawRequest as _RawRequest
from monitor.spans._lite import SkeletonRequest as _SkeletonRequest
from monitor.spans._lite import SkeletonSpan as _SkeletonSpan
from monitor.spans._span import (
    _HAS_IS_REMOTE,
    _IS_REMOTE,
    _STATUS_ERROR,
    _ZERO_SPAN,
    _ZERO_TRACE,
    FEEDBACK_KEY,
    Decoded,
    DecodeError,
    Span,
    _attributes,
)


class Triage(Protocol):
    """Which traces a decoder builds spans for. The spans of the others are checked
    (ids), counted (`Decoded.forgotten`, `Decoded.forgotten_roots`) and not built: a
    trace that no evaluator can sample costs no `Span`. The trace stage implements it
    (`monitor.processors.trace.TraceTriage`)."""

    @property
    def keeps_everything(self) -> bool:
        """Every trace is kept (a sampling rate of 1): nothing to triage."""

    @property
    def forced_by_error(self) -> bool:
        """A span with status ERROR makes its trace kept (`sampling.always.error`)."""

    @property
    def forced_by_feedback(self) -> bool:
        """A body that mentions `rag.feedback` is decoded whole
        (`sampling.always.negative_feedback`)."""

    def keeps(self, trace_id: bytes) -> bool:
        """Whether the trace may be sampled (or was forced earlier): its spans are built."""

    def kept(self, trace_ids: Collection[bytes]) -> set[bytes]:
        """Those of `trace_ids` that `keeps`, decided in one call."""

    def force(self, trace_id: bytes) -> None:
        """The trace was forced here: its spans that come later are kept too."""


def decode_protobuf(
    body: bytes,
    *,
    lazy: bool = False,
    probe: tuple[str, ...] = (FEEDBACK_KEY,),
    triage: Triage | None = None,
) -> Decoded:
    """Decode an `ExportTraceServiceRequest`; spans with malformed ids are rejected.

    With `lazy`, only the span skeleton (ids, parent, name, times, flags, status) is
    decoded here and attributes and events stay serialized in each `Span` until read (a
    corrupt value then raises `DecodeError` when read); otherwise every span is decoded
    now and any corruption raises here. `probe`: attribute keys that `Span.attribute`
    will be asked for on every span; one search of the whole body settles, for all its
    spans at once, the ones that occur nowhere in it. `triage`: build spans only for the
    traces it keeps (see `Triage`)."""
    absent = frozenset(key for key in probe if not _occurs(key.encode(), body))
    if triage is not None and (
        triage.keeps_everything or (triage.forced_by_feedback and FEEDBACK_KEY not in absent)
    ):
        triage = None  # every trace kept, or feedback may force any: decode it whole
    try:
        if triage is None:
            decoded = _decode_protobuf(
                _SkeletonRequest.FromString(body), _RawRequest.FromString(body), absent
            )
        else:
            decoded = _triaged_by_columns(body, absent, triage) or _decode_triaged(
                _SkeletonRequest.FromString(body), body, absent, triage, {}
            )
    except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(
            "bad_protobuf", f"body is not an ExportTraceServiceRequest: {exc}"
        ) from None
    if not lazy:
        for span in decoded.spans:
            span.decode()
    return decoded


def _find_with_memmem() -> Callable[[bytes, bytes], bool] | None:
    """The C library's `memmem` as `needle in haystack` for bytes (about twice as fast
    as Python's search on a request body), or None where there is none."""
    memmem = getattr(ctypes.CDLL(None), "memmem", None)
    if memmem is None:
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)

    def occurs(needle: bytes, haystack: bytes) -> bool:
        return memmem(haystack, len(haystack), needle, len(needle)) is not None

    return occurs


_memmem = _find_with_memmem()


def _occurs(needle: bytes, body: bytes) -> bool:
    """`needle in body`, searched once per request for the probed keys."""
    if _memmem is not None and type(body) is bytes and needle:
        return _memmem(needle, body)
    return needle in body


_STATUS_UNSET_OR_OK = (b"", b"\x18\x01")
_SIXTEEN = frozenset((16,))
_EIGHT = frozenset((8,))
_NONE_OR_EIGHT = frozenset((0, 8))
_STATUS_ERROR_BYTES = b"\x18\x02"


def _is_error(status: bytes) -> bool:
    """A serialized `Status` other than the unset and OK ones: is its code ERROR?"""
    if status == _STATUS_ERROR_BYTES:
        return True
    code: int = _LiteStatus.FromString(status).code  # a status with a message
    return code == _STATUS_ERROR


_REMOTE_PARENT = _HAS_IS_REMOTE | _IS_REMOTE


def _bad_ids(trace_id: bytes, span_id: bytes, parent: bytes) -> bool:
    return (
        len(trace_id) != 16
        or len(span_id) != 8
        or (bool(parent) and len(parent) != 8)
        or trace_id == _ZERO_TRACE
        or span_id == _ZERO_SPAN
    )


def _bad_ids_message(r: int, s: int, i: int) -> str:
    return (
        f"resource_spans[{r}].scope_spans[{s}].spans[{i}]: trace_id must be 16 "
        "non-zero bytes, span_id 8 non-zero bytes, parent_span_id empty or 8 bytes"
    )


def _span(
    span: Any, raw: bytes, service: str, resource: dict[str, Any], absent: frozenset[str]
) -> Span:
    """A `Span` from its skeleton and its serialized bytes."""
    parent = span.parent_span_id
    flags = span.flags
    status = span.status
    return Span(
        span.trace_id.hex(),
        span.span_id.hex(),
        parent.hex() if parent else "",
        span.name,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        None,
        None,
        status not in _STATUS_UNSET_OR_OK and _is_error(status),
        service,
        bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE),
        resource,
        raw,
        absent,
    )


def _decode_protobuf(request: Any, raw_request: Any, absent: frozenset[str]) -> Decoded:
    spans: list[Span] = []
    append = spans.append
    rejected = 0
    message = ""
    for r, (resource_spans, raw_resource) in enumerate(
        zip(request.resource_spans, raw_request.resource_spans, strict=True)
    ):
        resource = _attributes(resource_spans.resource.attributes)
        service = str(resource.get("service.name") or "unknown")
        for s, (scope_spans, raw_scope) in enumerate(
            zip(resource_spans.scope_spans, raw_resource.scope_spans, strict=True)
        ):
            for i, (span, raw) in enumerate(zip(scope_spans.spans, raw_scope.spans, strict=True)):
                if _bad_ids(span.trace_id, span.span_id, span.parent_span_id):
                    rejected += 1
                    message = message or _bad_ids_message(r, s, i)
                    continue
                append(_span(span, raw, service, resource, absent))
    return Decoded(spans, rejected, message)


def _decode_triaged(
    request: Any,
    body: bytes,
    absent: frozenset[str],
    triage: Triage,
    decisions: dict[bytes, bool],
) -> Decoded:
    """`_decode_protobuf` for the traces `triage` keeps (decided once per trace id, in
    `decisions`); the others' spans are counted. A trace forced by an error span after
    some of its spans in this body were counted is decoded again with the decisions
    settled."""
    on_error = triage.forced_by_error
    keeps = triage.keeps
    rejected = forgotten = 0
    message = ""
    roots: dict[str, int] = {}
    kept: list[tuple[int, int, int, Any, str, dict[str, Any]]] = []
    recount = False
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _attributes(resource_spans.resource.attributes)
        service = str(resource.get("service.name") or "unknown")
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                if (
                    len(trace_id) != 16
                    or len(span_id) != 8
                    or (parent and len(parent) != 8)
                    or trace_id == _ZERO_TRACE
                    or span_id == _ZERO_SPAN
                ):
                    rejected += 1
                    message = message or _bad_ids_message(r, s, i)
                    continue
                keep = decisions.get(trace_id)
                if not keep:
                    seen = keep is not None  # an earlier span of it here was forgotten
                    if not seen:
                        keep = decisions[trace_id] = keeps(trace_id)
                    if not keep:
                        status = span.status
                        if on_error and status not in _STATUS_UNSET_OR_OK and _is_error(status):
                            triage.force(trace_id)
                            decisions[trace_id] = True
                            recount = recount or seen
                        else:
                            forgotten += 1
                            if _is_root(span):
                                roots[service] = roots.get(service, 0) + 1
                            continue
                kept.append((r, s, i, span, service, resource))
    if recount:
        return _decode_triaged(request, body, absent, triage, decisions)
    return Decoded(_built(kept, body, absent), rejected, message, forgotten, roots)


def _triaged_by_columns(body: bytes, absent: frozenset[str], triage: Triage) -> Decoded | None:
    """`_decode_triaged` for the usual request — every id well-formed and, when an error
    forces sampling, no span with status ERROR — from each scope's columns
    (`ColumnsRequest`: no Python object per span, the triage asked once per trace id) and
    the spans' serialized bytes (`RawRequest`, which also gives their number); only the
    spans kept are parsed, one at a time. None for any other request (and for a body
    these views cannot parse), which takes the span-by-span path.

    The trace id column lines up with the spans when it holds one id per span. It could
    also when one span omits its trace id and another repeats that field (protobuf
    keeps the last); such a request would have the first span counted as forgotten
    rather than rejected. A kept span's id is checked against its own parse."""
    try:
        columns = _ColumnsRequest.FromString(body).resource_spans
        raw_resources = _RawRequest.FromString(body).resource_spans
    except (_ProtoDecodeError, RuntimeError, ValueError):
        return None
    check_status = triage.forced_by_error
    decided: set[bytes] = set()
    kept_ids: set[bytes] = set()
    forgotten = 0
    roots: dict[str, int] = {}
    kept: list[Span] = []
    skeleton: Any = None  # parsed only to find roots under remote parents
    for r, (resource_columns, raw_resource) in enumerate(zip(columns, raw_resources, strict=True)):
        resource = _attributes(resource_columns.resource.attributes)
        service = str(resource.get("service.name") or "unknown")
        for s, (scope_columns, raw_scope) in enumerate(
            zip(resource_columns.scope_spans, raw_resource.scope_spans, strict=True)
        ):
            raw_spans = raw_scope.spans
            count = len(raw_spans)
            column = scope_columns.spans
            trace_ids = column.trace_id[:]  # a list (slicing copies faster than list())
            span_ids = column.span_id[:]
            parents = column.parent_span_id[:]  # only the spans that have one
            here = set(trace_ids)  # a trace's spans share its id: checked once each
            if (
                len(trace_ids) != count
                or len(span_ids) != count
                or not _SIXTEEN.issuperset(map(len, here))
                or not _EIGHT.issuperset(map(len, span_ids))
                or not _NONE_OR_EIGHT.issuperset(map(len, set(parents)))
                or _ZERO_TRACE in here
                or _ZERO_SPAN in span_ids
                or (check_status and _any_error(column.status))
            ):
                return None
            new = here - decided
            decided |= new
            kept_ids |= triage.kept(new)
            keep = here & kept_ids
            if any(f & _REMOTE_PARENT == _REMOTE_PARENT for f in set(column.flags)):
                if skeleton is None:
                    skeleton = _SkeletonRequest.FromString(body)
                spans = skeleton.resource_spans[r].scope_spans[s].spans
                root_count = sum(1 for span in spans if _is_root(span))
            else:
                root_count = count - len(parents) + parents.count(b"")
            if keep:
                for i, trace_id in enumerate(trace_ids):
                    if trace_id in keep:
                        raw = raw_spans[i]
                        span = _SkeletonSpan.FromString(raw)
                        if span.trace_id != trace_id:
                            return None
                        kept.append(_span(span, raw, service, resource, absent))
                        root_count -= _is_root(span)
            forgotten += count
            if root_count:
                roots[service] = roots.get(service, 0) + root_count
    return Decoded(kept, 0, "", forgotten - len(kept), roots)


def _is_root(span: Any) -> bool:
    """A skeleton span with no parent, or a parent flagged remote."""
    return not span.parent_span_id or span.flags & _REMOTE_PARENT == _REMOTE_PARENT


def _any_error(statuses: Any) -> bool:
    """Whether any of these serialized statuses has code ERROR."""
    return any(_is_error(status) for status in statuses if status not in _STATUS_UNSET_OR_OK)


def _built(
    kept: list[tuple[int, int, int, Any, str, dict[str, Any]]], body: bytes, absent: frozenset[str]
) -> list[Span]:
    """The `Span`s of the spans kept, with their serialized bytes."""
    spans: list[Span] = []
    if kept:
        raw_resources = _RawRequest.FromString(body).resource_spans
        for r, s, i, span, service, resource in kept:
            raw = raw_resources[r].scope_spans[s].spans[i]
            spans.append(_span(span, raw, service, resource, absent))
    return spans
