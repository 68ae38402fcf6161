"""One step of `bench/log_event_decode.py`, in a fresh interpreter:
`python -m bench._log_event_step STEP VALUES` prints one JSON line (`s`, `mb`, `bytes`).

The request: a GenAI chat span's question, a document, the answer and a tool message whose
body is an array of VALUES integers, as OTLP log events; the spans of its trace come as
OTLP/JSON. Both are built before the step's clock and memory reading start.
"""

from __future__ import annotations

import json
import resource
import sys
import time

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from monitor.extraction import TraceRecords, extract_within
from monitor.records.limits import SizeLimits
from monitor.spans import decode_json, decode_logs_protobuf
from monitor.spans._span import _any_value

TRACE = "ab" * 16
ROOT, CHAT = f"{1:016x}", f"{3:016x}"
QUESTION = "What is the boiling point of water at sea level?"
DOC = "At sea level, water boils at 100 degrees Celsius."
ANSWER = "Water boils at 100 degrees Celsius at sea level."


def _text(**fields: str) -> AnyValue:
    pairs = [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in fields.items()]
    return AnyValue(kvlist_value=KeyValueList(values=pairs))


def _numbers(count: int) -> AnyValue:
    """An array of `count` integers, built from one element's bytes (a repeated field's
    elements are its encodings one after another)."""
    one = ArrayValue(values=[AnyValue(int_value=300)]).SerializeToString()
    array = ArrayValue.FromString(one * count)
    return AnyValue(array_value=array)


def logs_request(values: int) -> bytes:
    events = [
        ("gen_ai.user.message", _text(content=QUESTION)),
        ("gen_ai.tool.message", _numbers(values)),
        ("gen_ai.tool.message", _text(content=DOC, id="c1")),
        ("gen_ai.choice", AnyValue(kvlist_value=KeyValueList(values=[
            KeyValue(key="message", value=_text(content=ANSWER))
        ]))),
    ]  # fmt: skip
    records = [
        LogRecord(
            time_unix_nano=5,
            event_name=name,
            trace_id=bytes.fromhex(TRACE),
            span_id=bytes.fromhex(CHAT),
            body=body,
            attributes=[KeyValue(key="gen_ai.system", value=AnyValue(string_value="openai"))],
        )
        for name, body in events
    ]
    request = ExportLogsServiceRequest(
        resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=records)])]
    )
    return request.SerializeToString()


def trace_json() -> bytes:
    """The trace's root (its route) and the chat span the events belong to, as OTLP/JSON."""

    def span(span_id: str, parent: str, key: str, value: str) -> dict[str, object]:
        return {
            "traceId": TRACE,
            "spanId": span_id,
            **({"parentSpanId": parent} if parent else {}),
            "name": f"span {span_id}",
            "startTimeUnixNano": "1000",
            "endTimeUnixNano": "2000",
            "attributes": [{"key": key, "value": {"stringValue": value}}],
        }

    spans = [
        span(ROOT, "", "http.route", "/ask"),
        span(CHAT, ROOT, "gen_ai.operation.name", "chat"),
    ]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def main(step: str, values: int) -> None:
    body = logs_request(values)
    spans = decode_json(trace_json()).spans
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if step == "parse":
        ExportLogsServiceRequest.FromString(body)
    elif step == "to Python":
        request = ExportLogsServiceRequest.FromString(body)
        [_any_value(r.body) for r in request.resource_logs[0].scope_logs[0].log_records]
    else:
        decoded = decode_logs_protobuf(body)
        if step == "decode + extract":
            extracted = extract_within([*spans, *decoded.spans], "http.route", SizeLimits())
            assert isinstance(extracted, TraceRecords), extracted
            assert extracted.records[0].metadata["unread_values"] == "too_large", extracted
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"s": elapsed, "mb": (peak - before) / 1024, "bytes": len(body)}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
