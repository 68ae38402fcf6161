"""`Span`: one span as the trace stage reads it, and its attribute values.

A span decoded from protobuf keeps its serialized bytes and turns attributes and events
into Python values only when first read (`monitor.spans._lite` declares the reduced
views the C parser reads). `Decoded` is what every decoder returns: the usable spans, a
count and a message for the rejected ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from sys import getsizeof
from typing import Any

from google.protobuf.message import DecodeError as _ProtoDecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from monitor.shared.nesting import MAX_DEPTH, MAX_ITEMS
from monitor.spans._lite import LiteSpan as _LiteSpan

_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_STATUS_ERROR = 2
_EMPTY_IDS = ("", "0" * 16, "0" * 32)
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
# Python's own cost of a span beyond its payload (the object, its id strings, its dicts),
# so that memory bounds in bytes hold for spans with tiny payloads too.
SPAN_OVERHEAD_BYTES = 400
# The attribute a user's feedback travels in; read on every span to decide sampling, so
# decoders settle its absence for a whole request at once.
FEEDBACK_KEY = "rag.feedback"


class DecodeError(ValueError):
    """A payload that is not a valid OTLP trace export request."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_unix_nano: int
    attributes: dict[str, Any]


_MISSING: Any = object()


class Span:
    """One span, reduced to what trace assembly and record extraction read.

    Spans decoded from protobuf keep their serialized bytes (`raw`) and turn attributes
    and events into Python values only when first read, so traces that are never
    evaluated never pay for it. A span whose bytes turn out to be corrupt raises
    `DecodeError("bad_protobuf", ...)` at that point; a value that cannot be read (not a
    valid value, nested deeper than `monitor.shared.nesting.MAX_DEPTH`) is left out and its
    reason kept in `unread`. `attribute(key)` reads one attribute without decoding the
    others.
    """

    __slots__ = (
        "_absent",
        "_attributes",
        "_events",
        "_raw",
        "end_unix_nano",
        "error",
        "name",
        "parent_is_remote",
        "parent_span_id",
        "resource",
        "service",
        "size",
        "span_id",
        "start_unix_nano",
        "trace_id",
        "unread",
    )

    def __init__(
        self,
        trace_id: str,  # 32 lowercase hex characters
        span_id: str,  # 16 lowercase hex characters
        parent_span_id: str,  # "" for a root span
        name: str,
        start_unix_nano: int,
        end_unix_nano: int,
        attributes: dict[str, Any] | None = None,
        events: list[SpanEvent] | None = None,
        error: bool = False,
        service: str = "unknown",
        parent_is_remote: bool = False,
        resource: dict[str, Any] | None = None,
        raw: bytes | None = None,
        absent: frozenset[str] = frozenset(),
        unread: tuple[str, ...] = (),
    ) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.name = name
        self.start_unix_nano = start_unix_nano
        self.end_unix_nano = end_unix_nano
        self.error = error
        self.service = service
        self.parent_is_remote = parent_is_remote
        self.resource: dict[str, Any] = {} if resource is None else resource
        self._raw = raw
        self._absent = absent  # keys the decoder found nowhere in the request
        # Why each attribute value left out was not read (`monitor.shared.nesting.REASONS`):
        # nested too deeply, or (protobuf) not a valid value. A bad value costs itself.
        self.unread = unread
        if raw is None:
            self._attributes: dict[str, Any] | None = {} if attributes is None else attributes
            self._events: list[SpanEvent] | None = [] if events is None else events
            payload = _estimate(self._attributes) + sum(
                len(e.name) + _estimate(e.attributes) for e in self._events
            )
        else:
            self._attributes = attributes
            self._events = events
            payload = len(raw)
        # Approximate bytes held, for the memory bounds of trace assembly and queues.
        self.size = SPAN_OVERHEAD_BYTES + len(name) + payload

    @property
    def is_root(self) -> bool:
        """A local root: no parent, or a parent in another process."""
        return not self.parent_span_id or self.parent_is_remote

    @property
    def decoded(self) -> bool:
        """Whether attributes and events are Python values yet (not still serialized)."""
        return self._raw is None

    @property
    def attributes(self) -> dict[str, Any]:
        if self._attributes is None:
            self.decode()
        assert self._attributes is not None
        return self._attributes

    @property
    def events(self) -> list[SpanEvent]:
        if self._events is None:
            self.decode()
        assert self._events is not None
        return self._events

    def attribute(self, key: str, default: Any = None) -> Any:
        """One attribute's value (`default` when absent), decoding no other attribute."""
        raw = self._raw
        if raw is None:
            return self.attributes.get(key, default)
        if key in self._absent or key.encode() not in raw:  # keys are stored verbatim
            return default
        entries = self._parse().attributes
        if key not in entries:
            return default
        value = _raw_value(entries[key])
        return default if isinstance(value, _Unread) else value

    def _parse(self) -> Any:
        try:
            return _LiteSpan.FromString(self._raw)
        except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
            raise self._corrupt(exc) from None

    def _corrupt(self, exc: Exception) -> DecodeError:
        return DecodeError(
            "bad_protobuf", f"span {self.span_id}: attributes or events are corrupt: {exc}"
        )

    def decode(self) -> None:
        """Decode the attributes and events now (no-op when already done)."""
        if self._raw is None:
            return
        message = self._parse()
        unread: list[str] = []
        attributes = _attributes(message.attributes, unread)
        raw_events = message.events
        events = (
            [
                SpanEvent(e.name, e.time_unix_nano, _attributes(e.attributes, unread))
                for e in raw_events
            ]
            if raw_events
            else []
        )
        self._attributes, self._events, self._raw = attributes, events, None
        self.unread += tuple(unread)

    def __reduce__(self) -> tuple[type[Span], tuple[Any, ...]]:
        """Pickled as it stands: still-serialized attributes travel as their bytes (a
        sampled trace goes to an evaluation worker process to be extracted there)."""
        state = self._state(self._attributes, self._events)
        return Span, (*state, self._raw, self._absent, self.unread)

    def _fields(self) -> tuple[Any, ...]:
        return self._state(self.attributes, self.events)

    def _state(self, attributes: Any, events: Any) -> tuple[Any, ...]:
        """The constructor's arguments up to `raw`, with `attributes` and `events` given."""
        return (
            self.trace_id,
            self.span_id,
            self.parent_span_id,
            self.name,
            self.start_unix_nano,
            self.end_unix_nano,
            attributes,
            events,
            self.error,
            self.service,
            self.parent_is_remote,
            self.resource,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Span):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Span(trace_id={self.trace_id!r}, span_id={self.span_id!r}, "
            f"parent_span_id={self.parent_span_id!r}, name={self.name!r})"
        )


def _estimate(value: Any) -> int:
    """Bytes Python holds for a decoded attribute value: each object and what it refers
    to, so that the memory bounds hold for a value of many small objects (a list of
    numbers takes several times its wire size) as for one long string."""
    if isinstance(value, dict):
        return getsizeof(value) + sum(getsizeof(k) + _estimate(v) for k, v in value.items())
    if isinstance(value, list):
        return getsizeof(value) + sum(_estimate(v) for v in value)
    return getsizeof(value)


@dataclass(slots=True)
class Decoded:
    spans: list[Span]
    rejected: int = 0
    message: str = ""


@dataclass(frozen=True, slots=True)
class _Unread:
    """An attribute value left out, and why (`monitor.shared.nesting.REASONS`)."""

    reason: str


_TOO_DEEP = _Unread("too_deep")
_CORRUPT = _Unread("corrupt")
_TOO_LARGE = _Unread("too_large")
_UNREAD = {u.reason: u for u in (_TOO_DEEP, _CORRUPT, _TOO_LARGE)}


def _any_value(value: AnyValue, depth: int = 1) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value" or kind == "kvlist_value":
        if depth > MAX_DEPTH:
            return _TOO_DEEP
        if kind == "array_value":
            items = [_any_value(v, depth + 1) for v in value.array_value.values]
            bad = next((v for v in items if isinstance(v, _Unread)), None)
            return items if bad is None else bad
        pairs = {kv.key: _any_value(kv.value, depth + 1) for kv in value.kvlist_value.values}
        bad = next((v for v in pairs.values() if isinstance(v, _Unread)), None)
        return pairs if bad is None else bad
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return None


def _raw_value(raw: bytes) -> Any:
    """A serialized `AnyValue` → Python value (an `_Unread` if it cannot be read); strings
    under 16 KiB take a fast path."""
    size = len(raw)
    if size > 1 and raw[0] == 0x0A:  # field 1 (string_value), length-delimited
        b1 = raw[1]
        if b1 < 0x80:
            if b1 + 2 == size:
                return raw[2:].decode("utf-8", "replace")
        elif size > 2 and raw[2] < 0x80 and ((b1 & 0x7F) | raw[2] << 7) + 3 == size:
            return raw[3:].decode("utf-8", "replace")
    if not raw:
        return None
    # Each value takes at least two bytes: only a large value can hold too many.
    if size > 2 * MAX_ITEMS and _holds_more_than(raw, MAX_ITEMS):
        return _TOO_LARGE
    try:
        parsed = AnyValue.FromString(raw)
    except (_ProtoDecodeError, RuntimeError, ValueError) as exc:
        # The value is bad, not the span. upb's own depth limit (100 messages: about 33
        # nested kvlists) comes before `MAX_DEPTH`.
        return _TOO_DEEP if "MaxDepth" in str(exc) else _CORRUPT
    return _any_value(parsed)


def _attributes(entries: Any, unread: list[str] | None = None) -> dict[str, Any]:
    """Serialized attributes → Python values; a value that cannot be read is left out and
    its reason appended to `unread`."""
    out: dict[str, Any] = {}
    for key, raw in entries.items():
        # Inline fast path for short strings, the bulk of span attributes.
        if len(raw) > 1 and raw[0] == 0x0A and raw[1] < 0x80 and raw[1] + 2 == len(raw):
            out[key] = raw[2:].decode("utf-8", "replace")
            continue
        value = _raw_value(raw)
        if not isinstance(value, _Unread):
            out[key] = value
        elif unread is not None:
            unread.append(value.reason)
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """`(field number, start, end)` of each length-delimited field of the message in
    `data[start:end]`; other fields are skipped. Raises IndexError or ValueError on bytes
    that are not a message."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        wire = key & 7
        if wire == 2:
            size, pos = _varint(data, pos)
            yield key >> 3, pos, pos + size
            pos += size
        elif wire == 0:
            pos = _varint(data, pos)[1]
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")


def _holds_more_than(raw: bytes, limit: int) -> bool:
    """Whether a serialized `AnyValue` holds more than `limit` values (those nested in
    arrays and kvlists included), read from the wire without parsing it, and never past
    the `limit`-th value: so that a value of millions of numbers costs no more to refuse
    than one of `limit`. Malformed bytes are left to the parser to refuse."""
    count = 0
    pending = [(0, len(raw))]  # AnyValue messages to look into
    try:
        while pending:
            start, end = pending.pop()
            for field, inner, inner_end in _fields(raw, start, end):
                if field not in (5, 6):
                    continue
                for item, item_start, item_end in _fields(raw, inner, inner_end):
                    if item != 1:
                        continue
                    count += 1
                    if count > limit:
                        return True
                    if field == 5:  # ArrayValue.values: AnyValue
                        pending.append((item_start, item_end))
                    else:  # KeyValueList.values: KeyValue {key = 1, value = 2}
                        pending += [
                            (s, e) for f, s, e in _fields(raw, item_start, item_end) if f == 2
                        ]
    except (IndexError, ValueError):
        return False
    return False
