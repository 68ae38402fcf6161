"""Request/response plumbing shared by the OTLP/HTTP and OTLP/gRPC receivers."""

from __future__ import annotations

import hmac
import json
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.component import Delivery, SpanTriage, TraceConsumer
from monitor.spans import (
    Decoded,
    DecodeError,
    decode_json,
    decode_logs_json,
    decode_logs_protobuf,
    decode_protobuf,
)

_CHUNK = 64 * 1024

T = TypeVar("T")


class Offload(Protocol):
    """Runs a CPU-bound call (decompression, decoding) off the event loop."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...


# A protobuf body up to this size, decoded with a triage that skips the traces no
# evaluator samples, is decoded on the event loop: under a millisecond of work (about
# 0.7 ns per byte), less than handing it to the decode thread and back costs the process
# (two thread wake-ups and GIL hand-offs per request, on CPUs the evaluation workers keep
# busy). Anything larger or slower to decode — gzip, JSON, log events, every trace kept —
# goes to the decode thread.
INLINE_DECODE_BYTES = 1 << 20


def decodes_on_the_loop(
    size: int, *, gzip: bool, as_json: bool, logs: bool, triage: SpanTriage | None
) -> bool:
    """Whether a request's body is decoded on the event loop (`INLINE_DECODE_BYTES`)."""
    return (
        size <= INLINE_DECODE_BYTES
        and not (gzip or as_json or logs)
        and triage is not None
        and not triage.keeps_everything
    )


async def on_the_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """The `Offload` that runs the call here, for what `decodes_on_the_loop`."""
    return fn(*args, **kwargs)


class TooLarge(ValueError):
    """A body over `receivers.otlp.max_request_bytes` (after decompression)."""


def gunzip_capped(data: bytes, limit: int) -> bytes:
    """Decompress gzip without ever holding more than `limit + 64 KiB` of output, so a
    small bomb cannot expand into gigabytes. Every member of a multi-member body is read
    (RFC 1952); bytes after the last member that are not a member are an error.
    Raises `TooLarge` or `DecodeError`."""
    if not data:
        raise DecodeError("bad_gzip", "gzip body is empty")
    out = bytearray()
    pending = data
    try:
        while pending:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            while pending:
                out += inflater.decompress(pending, _CHUNK)
                if len(out) > limit:
                    raise TooLarge(f"decompressed body exceeds {limit} bytes")
                pending = inflater.unconsumed_tail
                if inflater.eof:
                    break
            out += inflater.flush()
            if not inflater.eof:
                raise DecodeError("bad_gzip", "gzip body is truncated")
            pending = inflater.unused_data
    except zlib.error as exc:
        raise DecodeError("bad_gzip", f"gzip body is corrupt: {exc}") from None
    if len(out) > limit:
        raise TooLarge(f"decompressed body exceeds {limit} bytes")
    return bytes(out)


def decode_request(
    body: bytes,
    *,
    gzip: bool,
    as_json: bool,
    limit: int,
    logs: bool = False,
    triage: SpanTriage | None = None,
) -> Decoded:
    """Decompress (optionally) and decode an export request; runs off the event loop.
    Protobuf spans are decoded lazily: attributes only for the traces that are sampled,
    and with `triage` only the spans of traces it keeps are built at all.
    `logs`: an `ExportLogsServiceRequest`, whose GenAI events become event spans."""
    if gzip:
        body = gunzip_capped(body, limit)
    if logs:
        events = decode_logs_json(body) if as_json else decode_logs_protobuf(body)
        return events if triage is None else triage.keep_events(events)
    if as_json:
        return decode_json(body)
    return decode_protobuf(body, lazy=True, triage=triage)


def decode_and_hand_on(
    consumer: TraceConsumer,
    receiver: str,
    body: bytes,
    *,
    gzip: bool,
    as_json: bool,
    limit: int,
    logs: bool = False,
    triage: SpanTriage | None = None,
) -> tuple[Decoded, bool]:
    """Decode a request and hand its spans to the trace stage, in one thread (the
    receivers' decode thread), which then also assembles them. Returns what was decoded
    and whether the trace stage took it (False: answer with a retryable status). What
    `triage` left unread is counted once the rest was taken."""
    decoded = decode_request(
        body, gzip=gzip, as_json=as_json, limit=limit, logs=logs, triage=triage
    )
    taken = not decoded.spans or consumer.consume([Delivery(receiver, decoded.spans)])
    if taken and triage is not None and decoded.forgotten:
        triage.forgot(receiver, decoded)
    return decoded, taken


def token_ok(presented: str | None, expected: str | None) -> bool:
    """`Authorization: Bearer <token>` check in constant time; no token configured → ok."""
    if expected is None:
        return True
    if not presented:
        return False
    scheme, _, value = presented.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), expected.encode())


def export_response(decoded: Decoded, *, as_json: bool) -> bytes:
    """Success or partial success (`rejected_spans` + message), in the request's encoding."""
    if not decoded.rejected and not as_json:
        return b""  # a full success: the empty message
    return _partial_success(
        decoded, as_json, ExportTraceServiceResponse(), "rejected_spans", "rejectedSpans"
    )


def export_logs_response(decoded: Decoded, *, as_json: bool) -> bytes:
    """`ExportLogsServiceResponse`: success, or the refused log records and why."""
    return _partial_success(
        decoded, as_json, ExportLogsServiceResponse(), "rejected_log_records", "rejectedLogRecords"
    )


def _partial_success(
    decoded: Decoded,
    as_json: bool,
    response: ExportTraceServiceResponse | ExportLogsServiceResponse,
    rejected_field: str,
    rejected_json_field: str,
) -> bytes:
    if as_json:
        if not decoded.rejected:
            return b"{}"
        partial = {rejected_json_field: str(decoded.rejected), "errorMessage": decoded.message}
        return json.dumps({"partialSuccess": partial}).encode()
    if decoded.rejected:
        setattr(response.partial_success, rejected_field, decoded.rejected)
        response.partial_success.error_message = decoded.message
    data: bytes = response.SerializeToString()
    return data


def status_body(code: int, message: str, *, as_json: bool) -> bytes:
    """A `google.rpc.Status` error body (OTLP/HTTP failure responses)."""
    if as_json:
        return json.dumps({"code": code, "message": message}).encode()
    data: bytes = Status(code=code, message=message).SerializeToString()
    return data
