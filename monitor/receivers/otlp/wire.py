"""Request/response plumbing shared by the OTLP/HTTP and OTLP/gRPC receivers."""

from __future__ import annotations

import hmac
import json
import zlib

from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.receivers.otlp.decode import Decoded, DecodeError, decode_json, decode_protobuf
from monitor.receivers.otlp.extract import VIEW_KEYS

_CHUNK = 64 * 1024


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


def decode_request(body: bytes, *, gzip: bool, as_json: bool, limit: int) -> Decoded:
    """Decompress (optionally) and decode an export request; runs off the event loop.
    Protobuf spans are decoded lazily: attributes only for the traces that are sampled."""
    if gzip:
        body = gunzip_capped(body, limit)
    return decode_json(body) if as_json else decode_protobuf(body, lazy=True, probe=VIEW_KEYS)


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
    if as_json:
        if not decoded.rejected:
            return b"{}"
        partial = {"rejectedSpans": str(decoded.rejected), "errorMessage": decoded.message}
        return json.dumps({"partialSuccess": partial}).encode()
    response = ExportTraceServiceResponse()
    if decoded.rejected:
        response.partial_success.rejected_spans = decoded.rejected
        response.partial_success.error_message = decoded.message
    data: bytes = response.SerializeToString()
    return data


def status_body(code: int, message: str, *, as_json: bool) -> bytes:
    """A `google.rpc.Status` error body (OTLP/HTTP failure responses)."""
    if as_json:
        return json.dumps({"code": code, "message": message}).encode()
    data: bytes = Status(code=code, message=message).SerializeToString()
    return data
