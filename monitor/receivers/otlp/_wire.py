"""Request/response plumbing shared by the OTLP/HTTP and OTLP/gRPC receivers."""

from __future__ import annotations

import hmac
import json
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.component import ACCEPTED, Accepted, Delivery, Refused, TraceConsumer
from monitor.config import Config
from monitor.conventions import LOG_EVENTS, verdict_events_of
from monitor.extraction import (
    conventions_from_config,
    log_events_taken,
    vocabularies_from_config,
)
from monitor.records import CLIENT_ADDRESS
from monitor.spans import (
    Decoded,
    DecodeError,
    RequestSpans,
    decode_json,
    decode_logs_json,
    decode_logs_protobuf,
    read_protobuf,
)
from monitor.telemetry import RateLimitedLog, Telemetry

_CHUNK = 64 * 1024

T = TypeVar("T")


class Offload(Protocol):
    """Runs a CPU-bound call (decompression, decoding) off the event loop."""

    def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Awaitable[T]: ...


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


Request = Decoded | RequestSpans
"""A decoded export request: its spans (JSON, log events), or a protobuf request's spans
still serialized."""


def decode_request(
    body: bytes,
    *,
    gzip: bool,
    as_json: bool,
    limit: int,
    logs: bool = False,
    log_events: frozenset[str] = LOG_EVENTS,
) -> Request:
    """Decompress (optionally) and decode an export request, in the receivers' decode
    thread. A protobuf trace request is read, not built (`read_protobuf`): the trace
    stage builds the spans of the traces it may sample. `logs`: an
    `ExportLogsServiceRequest`, whose records named in `log_events` (the conventions
    table's, `log_events_for`) become event spans."""
    if gzip:
        body = gunzip_capped(body, limit)
    if logs:
        if as_json:
            return decode_logs_json(body, log_events)
        return decode_logs_protobuf(body, log_events)
    if as_json:
        return decode_json(body)
    return read_protobuf(body)


# An uncompressed protobuf trace body up to this size is read on the event loop (its ids
# as columns); anything else — gzip, JSON, log events, larger bodies — in the decode
# thread, whose round trip costs more than such a read (figures in README.md).
LOOP_READ_BYTES = 1 << 20


async def decode(
    offload: Offload,
    body: bytes,
    *,
    gzip: bool,
    as_json: bool,
    limit: int,
    logs: bool,
    log_events: frozenset[str] = LOG_EVENTS,
) -> Request:
    """`decode_request` where it costs least: on the loop for a small protobuf trace body
    (`LOOP_READ_BYTES`), else in the decode thread, awaited."""
    if len(body) <= LOOP_READ_BYTES and not (gzip or as_json or logs):
        return read_protobuf(body)
    return await offload(
        decode_request,
        body,
        gzip=gzip,
        as_json=as_json,
        limit=limit,
        logs=logs,
        log_events=log_events,
    )


def log_events_for(config: Config) -> frozenset[str]:
    """The events log records are taken as: the shipped conventions', those the user's
    (`extraction.conventions`) name, and those carrying verdicts (`external_verdicts`)."""
    return log_events_taken(
        conventions_from_config(config.extraction.conventions),
        verdict_events_of(vocabularies_from_config(config.external_verdicts.vocabularies)),
    )


def metrics_in(body: bytes, *, gzip: bool, as_json: bool, limit: int) -> int:
    """How many metrics an `ExportMetricsServiceRequest` holds (the monitor uses none: they
    are counted and discarded), in the receivers' decode thread. Raises `DecodeError`
    for a body that is not one, `TooLarge` past the limit."""
    if gzip:
        body = gunzip_capped(body, limit)
    if as_json:
        try:
            request = json.loads(body)
            return sum(
                len(scope.get("metrics") or [])
                for resource in request.get("resourceMetrics") or []
                for scope in resource.get("scopeMetrics") or []
            )
        except (ValueError, AttributeError, TypeError) as exc:
            raise DecodeError("bad_json", f"not an OTLP/JSON metrics request: {exc}") from None
    message = ExportMetricsServiceRequest()
    try:
        message.ParseFromString(body)
    except Exception as exc:  # the protobuf runtime's DecodeError, whichever runtime
        raise DecodeError("bad_protobuf", f"not an OTLP metrics request: {exc}") from None
    return sum(len(scope.metrics) for r in message.resource_metrics for scope in r.scope_metrics)


class Discarded:
    """The OTLP items an SDK exports to the one endpoint that the monitor does not use
    (metrics, log records that are not GenAI events): accepted, so that such an SDK logs
    no export error, counted in `otlp_discarded_total{receiver,signal}` and logged
    (rate-limited)."""

    def __init__(self, telemetry: Telemetry, receiver: str, warn: RateLimitedLog) -> None:
        self._counter = telemetry.counter("otlp_discarded")
        self._t = telemetry
        self._receiver = receiver
        self._warn = warn

    def add(self, signal: str, n: int) -> None:
        if not n:
            return
        self._t.child(self._counter, self._receiver, signal).inc(n)
        self._warn.warning(
            f"discarded/{signal}",
            "%s: %d %s accepted and discarded: the monitor reads traces and GenAI log events "
            "only (otlp_discarded_total)",
            self._receiver,
            n,
            "metrics" if signal == "metrics" else "log records that are not GenAI events",
        )


def hand_over(
    consumer: TraceConsumer,
    receiver: str,
    request: Request,
    *,
    logs: bool,
    address: str | None = None,
) -> Accepted | Refused:
    """Hand a decoded request's spans to the trace stage as one delivery (a request
    without any is taken as it is); `address`, the client's, goes into the metadata of
    the records its traces give (`monitor.records.sender`)."""
    metadata = {CLIENT_ADDRESS: address} if address else None
    if isinstance(request, RequestSpans):
        if not request:
            return ACCEPTED
        return consumer.consume([Delivery(receiver, unbuilt=request, metadata=metadata)])
    if not request.spans:
        return ACCEPTED
    delivery = Delivery(receiver, request.spans, log_events=logs, metadata=metadata)
    return consumer.consume([delivery])


def peer_address(peer: str) -> str | None:
    """The address of a gRPC peer (`ipv4:10.0.0.7:5312`, `ipv6:[::1]:5312`,
    `unix:/run/otel.sock`) without its port, which changes with every connection."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or None
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]") or None
    return peer or None


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


def export_response(decoded: Request, *, as_json: bool) -> bytes:
    """Success or partial success (`rejected_spans` + message), in the request's encoding."""
    if not decoded.rejected:
        return export_success(as_json=as_json)
    if as_json:
        partial = {"rejectedSpans": str(decoded.rejected), "errorMessage": decoded.message}
        return json.dumps({"partialSuccess": partial}).encode()
    response = ExportTraceServiceResponse()
    response.partial_success.rejected_spans = decoded.rejected
    response.partial_success.error_message = decoded.message
    data: bytes = response.SerializeToString()
    return data


def export_success(*, as_json: bool) -> bytes:
    """A full success, in the request's encoding: an empty `Export*ServiceResponse` (for
    logs and metrics whatever they held: their unused items are accepted and discarded)."""
    return b"{}" if as_json else b""


def status_body(code: int, message: str, *, as_json: bool) -> bytes:
    """A `google.rpc.Status` error body (OTLP/HTTP failure responses)."""
    if as_json:
        return json.dumps({"code": code, "message": message}).encode()
    data: bytes = Status(code=code, message=message).SerializeToString()
    return data
