"""A value of a trace that cannot be read costs that value, never the trace
(monitor/shared/nesting.py): JSON, a Python literal or a structured OTLP value nested deeper than
`MAX_DEPTH`, and a protobuf value that does not parse, are read as their text or left out;
the trace still gives its record, which names why (`metadata.unread_values`) and is counted
in `records_partly_read_total`, and every exporter can serialise it. Spans are encoded as
OTLP/protobuf by the SDK's encoder and as OTLP/JSON."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from harness.pipeline import trace_stage
from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.extraction import extract_trace
from monitor.records import UNREAD_VALUES, RagRecord, RecordError, parse_record
from monitor.shared.nesting import MAX_DEPTH, within_depth
from monitor.spans import decode_json, decode_protobuf
from monitor.telemetry import Telemetry
from tests.trace.test_trace_stage import HoldingStage, _config, _running, _value

TRACE = "ab" * 16
QUESTION = "What is the boiling point of water at sea level?"
DOC = "At sea level, water boils at 100 degrees Celsius."
ANSWER = "Water boils at 100 degrees Celsius at sea level."
GOOD_TOOL = '{"text": "The thermometer reads 100 degrees."}'


def nested(shape: str, depth: int) -> str:
    head, tail = shape.split("%s")
    return head * depth + "1" + tail * depth


def _spans(tool: str | None = None, **extra: str) -> list[dict[str, Any]]:
    """A RAG trace as `(span id, parent, attributes)`: chain, retriever, LLM, and two tool
    spans (the hostile one and a good one) when `tool` is given; `extra` goes on the LLM
    span (`metadata` on the retriever's document)."""
    metadata = extra.pop("metadata", None)
    retriever = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": QUESTION,
        "retrieval.documents.0.document.content": DOC,
    }
    if metadata is not None:
        retriever["retrieval.documents.0.document.metadata"] = metadata
    spans: list[dict[str, Any]] = [
        {
            "id": 1,
            "parent": None,
            "attrs": {
                "openinference.span.kind": "CHAIN",
                "input.value": QUESTION,
                "output.value": ANSWER,
            },
        },
        {"id": 2, "parent": 1, "attrs": retriever},
        {
            "id": 3,
            "parent": 1,
            "attrs": {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": QUESTION,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER,
                **extra,
            },
        },
    ]
    if tool is not None:
        for span_id, name, output in ((4, "lookup", tool), (5, "thermometer", GOOD_TOOL)):
            attrs = {"openinference.span.kind": "TOOL", "tool.name": name, "output.value": output}
            spans.append({"id": span_id, "parent": 1, "attrs": attrs})
    return spans


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _attribute(key: str, value: str | bytes) -> bytes:
    """A serialized `KeyValue`; bytes are a serialized `AnyValue`, written as they are (the
    SDK's classes would refuse to build one nested past the parser's limit)."""
    raw = value if isinstance(value, bytes) else AnyValue(string_value=value).SerializeToString()
    return _field(1, key.encode()) + _field(2, raw)


def protobuf_body(spans: list[dict[str, Any]]) -> bytes:
    """An `ExportTraceServiceRequest`, one resource (service `shop`), one scope."""
    scope = b""
    for s in spans:
        span = Span(
            trace_id=bytes.fromhex(TRACE),
            span_id=s["id"].to_bytes(8, "big"),
            parent_span_id=b"" if s["parent"] is None else s["parent"].to_bytes(8, "big"),
            name=f"span{s['id']}",
            start_time_unix_nano=1_000 + s["id"],
            end_time_unix_nano=2_000 - s["id"],
        ).SerializeToString()
        attributes = b"".join(_field(9, _attribute(k, v)) for k, v in s["attrs"].items())
        scope += _field(2, span + attributes)
    resource = Resource(
        attributes=[KeyValue(key="service.name", value=AnyValue(string_value="shop"))]
    ).SerializeToString()
    return _field(1, _field(1, resource) + _field(2, scope))


def _json_value(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"stringValue": value}


def json_body(spans: list[dict[str, Any]]) -> bytes:
    out = [
        {
            "traceId": TRACE,
            "spanId": f"{s['id']:016x}",
            **({} if s["parent"] is None else {"parentSpanId": f"{s['parent']:016x}"}),
            "name": f"span{s['id']}",
            "startTimeUnixNano": str(1_000 + s["id"]),
            "endTimeUnixNano": str(2_000 - s["id"]),
            "attributes": [{"key": k, "value": _json_value(v)} for k, v in s["attrs"].items()],
        }
        for s in spans
    ]
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "shop"}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": out}]}]}
    return json.dumps(body).encode()


def _record(body: bytes, *, protobuf: bool = True) -> RagRecord:
    """The one record of the trace in `body`, read as the OTLP receivers read it, checked
    to serialise as every exporter and the worker processes do."""
    spans = decode_protobuf(body, lazy=True).spans if protobuf else decode_json(body).spans
    extraction = extract_trace(spans, "http.route")
    assert isinstance(extraction, list), extraction
    (record,) = extraction
    assert record.response == ANSWER and record.query == QUESTION
    json.loads(record.model_dump_json())
    assert pickle.loads(pickle.dumps(record)) == record
    return record


def _contents(record: RagRecord) -> list[str]:
    return [doc.content for doc in record.retrieved_context]


@pytest.mark.parametrize(
    "tool",
    [
        nested("[%s]", 100_000),
        nested('{"a": %s}', 2_000),
        nested("{'a': %s}", 150),  # a Python literal (the tokenizer refuses 200 levels)
        nested('[{"type": "text", "text": %s}]', 3_000),
        nested('{"a": %s}', MAX_DEPTH + 1),
        nested('{"text": %s}', 1_000),
    ],
    ids=["list-100000", "json-2000", "literal-150", "parts-3000", "json-65", "text-1000"],
)
def test_a_deep_tool_output_is_read_as_text_next_to_a_good_tool(tool: str) -> None:
    record = _record(protobuf_body(_spans(tool)))
    contents = _contents(record)
    assert DOC in contents and "The thermometer reads 100 degrees." in contents
    assert tool.strip()[:200] in [c[:200] for c in contents]  # the deep one as its text
    assert record.metadata[UNREAD_VALUES] == "too_deep"


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 300, 1_000, 2_000])
@pytest.mark.parametrize(
    "shape", ['{"a": %s}', "[%s]", '{"role": "tool", "content": %s}', '{"metadata": %s}']
)
def test_deep_json_in_any_attribute_the_readers_parse_costs_that_value(
    shape: str, depth: int
) -> None:
    value = nested(shape, depth)
    for spans in (_spans(metadata=value), _spans(**{"gen_ai.input.messages": value})):
        for protobuf in (True, False):
            body = protobuf_body(spans) if protobuf else json_body(spans)
            record = _record(body, protobuf=protobuf)
            assert DOC in _contents(record)
            assert all(within_depth(doc.metadata) for doc in record.retrieved_context)
            assert record.metadata[UNREAD_VALUES] == "too_deep"


def test_json_nested_within_the_bound_is_read() -> None:
    record = _record(protobuf_body(_spans(metadata=nested('{"a": %s}', MAX_DEPTH - 1))))
    assert record.retrieved_context[0].metadata is not None
    assert UNREAD_VALUES not in record.metadata


def _deep_kvlist(depth: int) -> bytes:
    """A serialized `AnyValue`: a kvlist nested `depth` deep around a string."""
    value = AnyValue(string_value="leaf").SerializeToString()
    for _ in range(depth):
        value = _field(6, _field(1, _field(1, b"a") + _field(2, value)))
    return value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (_deep_kvlist(40), "too_deep"),
        (_deep_kvlist(1_000), "too_deep"),
        (b"\x2a\xff\xff\x0f", "corrupt"),
    ],
    ids=["kvlist-40", "kvlist-1000", "not-protobuf"],
)
def test_a_deep_or_corrupt_protobuf_value_is_left_out(value: bytes, reason: str) -> None:
    """Past the protobuf parser's own depth limit (100 messages, three per kvlist level)
    or not a valid `AnyValue`: a bad value, not a corrupt span."""
    spans = _spans()
    spans[2]["attrs"]["gen_ai.tool.definitions"] = value
    record = _record(protobuf_body(spans))
    assert record.metadata[UNREAD_VALUES] == reason


def test_a_structured_protobuf_value_within_the_limits_is_read() -> None:
    spans = _spans()
    spans[2]["attrs"]["gen_ai.tool.definitions"] = _deep_kvlist(30)
    record = _record(protobuf_body(spans))
    assert UNREAD_VALUES not in record.metadata


def _deep_json_kvlist(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "a", "value": value}]}}
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 150])
def test_a_deep_structured_json_value_is_left_out(depth: int) -> None:
    spans = _spans()
    spans[2]["attrs"]["gen_ai.tool.definitions"] = _deep_json_kvlist(depth)
    record = _record(json_body(spans), protobuf=False)
    assert record.metadata[UNREAD_VALUES] == "too_deep"


def test_a_records_own_deep_document_metadata_is_an_invalid_field() -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(300):
        inner["a"] = {}
        inner = inner["a"]
    data = {"question": QUESTION, "answer": ANSWER, "context": [{"content": DOC, "metadata": deep}]}
    with pytest.raises(RecordError, match=r"context\.0\.metadata: nested deeper than 64"):
        parse_record(data)


async def test_the_stage_counts_and_hands_on_a_partly_read_record(telemetry: Telemetry) -> None:
    consumer = HoldingStage()
    stage = trace_stage(_config(), consumer, telemetry)
    spans = decode_protobuf(protobuf_body(_spans(nested("[%s]", 100_000))), lazy=True).spans
    async with _running(stage, consumer):
        assert stage.consume([Delivery("otlp_http", spans)])
        await wait_until_async(lambda: consumer.items, 30, "the record handed on")
    (item,) = consumer.items
    assert item.record.metadata[UNREAD_VALUES] == "too_deep"
    labels = {"service": "shop", "reason": "too_deep"}
    assert _value(telemetry, "records_partly_read_total", **labels) == 1
