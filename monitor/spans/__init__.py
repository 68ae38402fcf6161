"""Spans: the unit every trace source hands to the trace stage, and the OTLP codec.

`decode_protobuf` / `decode_json` turn an OTLP `ExportTraceServiceRequest` (as OTLP
receivers get it, and as the Collector's Kafka exporter writes it) into `Span` objects;
`read_protobuf` reads a request's ids and leaves each span serialized until its trace is
asked for (`RequestSpans.build`).
Like `monitor.records` for records, this is data, not a pipeline stage: receivers decode
with it and the trace stage reads what it decoded.
"""

from monitor.spans._json import decode_json, encode_request, encode_span
from monitor.spans._logs import (
    LOG_EVENT_KEY,
    decode_logs_json,
    decode_logs_protobuf,
)
from monitor.spans._protobuf import Built, RequestSpans, decode_protobuf, read_protobuf
from monitor.spans._span import FEEDBACK_KEY, Decoded, DecodeError, Span, SpanEvent

__all__ = [
    "FEEDBACK_KEY",
    "LOG_EVENT_KEY",
    "Built",
    "DecodeError",
    "Decoded",
    "RequestSpans",
    "Span",
    "SpanEvent",
    "decode_json",
    "decode_logs_json",
    "decode_logs_protobuf",
    "decode_protobuf",
    "encode_request",
    "encode_span",
    "read_protobuf",
]
