"""GenAI log events cannot hurt the traces around them (monitor/spans/_logs.py,
processors/trace/_assembler.py): an event of millions of values is decoded as the bytes it
came as, weighed at what it holds, and left out (`too_large`) when its trace is read,
the trace still giving its record; events for trace ids that never send a span live
within their own bound and never push out a trace that has spans; whole traces held for
their log events (the grace, on by default) stay within `max_open_traces` and
`max_open_bytes`, the least recent pushed out and counted. Requests are encoded as the
OTLP exporters encode them; the trace stage is the real one."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from harness.pipeline import trace_stage
from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.extraction import extract_trace
from monitor.records import EXTRACTION_SUSPECT, UNREAD_VALUES
from monitor.spans import LOG_EVENT_KEY, Span, decode_json, decode_logs_protobuf
from monitor.spans._span import _holds_more_than
from monitor.telemetry import Telemetry
from tests.trace.test_trace_stage import HoldingStage, _config, _running, _value
from tests.trace.test_unreadable_values import ANSWER, DOC, QUESTION, TRACE, _spans, json_body
from tests.trace.test_unreadable_values import _field as field

MILLIONS = 3_000_000
CHAT_SPAN = "0000000000000003"  # the LLM span of `_spans()`


def numbers_value(count: int) -> bytes:
    """A serialized `AnyValue`: an array of `count` integers (five bytes each)."""
    one = field(1, b"\x18\xac\x02")  # ArrayValue.values: AnyValue{int_value: 300}
    return field(5, one * count)


def logs_request(events: list[tuple[str, str, str, bytes]]) -> bytes:
    """An `ExportLogsServiceRequest` of GenAI events `(name, trace id, span id, serialized
    body)`; bodies are written as they are."""
    records = b""
    for name, trace_id, span_id, body in events:
        record = LogRecord(
            time_unix_nano=5,
            event_name=name,
            trace_id=bytes.fromhex(trace_id),
            span_id=bytes.fromhex(span_id),
            attributes=[KeyValue(key="gen_ai.system", value=AnyValue(string_value="openai"))],
        ).SerializeToString()
        records += field(2, record + field(5, body))
    service = KeyValue(key="service.name", value=AnyValue(string_value="shop"))
    resource = ResourceLogs(resource=Resource(attributes=[service])).SerializeToString()
    return field(1, resource + field(2, records))


def _value_of(value: str | dict[str, Any]) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    pairs = [KeyValue(key=k, value=_value_of(v)) for k, v in value.items()]
    return AnyValue(kvlist_value=KeyValueList(values=pairs))


def _body(**fields: str | dict[str, str]) -> bytes:
    """A serialized kvlist `AnyValue`: an event body such as `{"content": ...}`."""
    data: bytes = _value_of(dict(fields)).SerializeToString()
    return data


def _chat_trace() -> list[dict[str, Any]]:
    """A root and a GenAI chat span whose content comes as log events."""
    return [
        {"id": 1, "parent": None, "attrs": {"http.route": "/ask"}},
        {"id": 3, "parent": 1, "attrs": {"gen_ai.operation.name": "chat"}},
    ]


def test_an_event_of_millions_of_values_stays_serialized_and_costs_that_value() -> None:
    huge = numbers_value(MILLIONS)
    body = logs_request(
        [
            ("gen_ai.user.message", TRACE, CHAT_SPAN, _body(content=QUESTION)),
            ("gen_ai.tool.message", TRACE, CHAT_SPAN, huge),
            ("gen_ai.tool.message", TRACE, CHAT_SPAN, _body(content=DOC, id="c1")),
            ("gen_ai.choice", TRACE, CHAT_SPAN, _body(message={"content": ANSWER})),
        ]
    )
    decoded = decode_logs_protobuf(body)
    assert decoded.rejected == 0
    # Decoding read the framing only; each event's weight is what the process holds.
    assert not any(span.decoded for span in decoded.spans)
    assert decoded.spans[1].size >= len(huge)
    assert decoded.spans[1].attribute(LOG_EVENT_KEY) == "gen_ai.tool.message"
    assert _holds_more_than(huge, 10_000) and not _holds_more_than(numbers_value(9_000), 10_000)
    spans = decode_json(json_body(_chat_trace())).spans
    extraction = extract_trace([*spans, *decoded.spans], "http.route")
    assert isinstance(extraction, list)
    (record,) = extraction
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, [DOC])
    assert record.metadata[UNREAD_VALUES] == "too_large"


def test_an_otlp_json_value_of_too_many_values_is_left_out() -> None:
    spans = _spans()
    numbers: dict[str, Any] = {"arrayValue": {"values": [{"intValue": "7"}] * 20_000}}
    spans[2]["attrs"]["gen_ai.tool.definitions"] = numbers
    extraction = extract_trace(decode_json(json_body(spans)).spans, "http.route")
    assert isinstance(extraction, list)
    assert extraction[0].metadata[UNREAD_VALUES] == "too_large"


@pytest.mark.parametrize("grace", ["off", "default"])
async def test_a_flood_of_events_for_unknown_traces_cuts_no_trace(
    telemetry: Telemetry, grace: str
) -> None:
    """A real trace split over two requests, and between them thousands of GenAI events
    for trace ids that never send a span: the trace is evaluated whole, none of its spans
    is late, and the events are counted as `events_only`; with or without the grace for
    log events (its model call carries its output: it does not wait)."""
    consumer = HoldingStage()
    # Off: no wait for more events once a trace is whole; else the default grace.
    config = _config(max_open_traces=100, **({"log_events_wait_s": 0} if grace == "off" else {}))
    assert (config.trace_assembly.log_events_wait_s > 0) is (grace == "default")
    stage = trace_stage(config, consumer, telemetry)
    spans = decode_json(json_body(_spans())).spans
    root = next(span for span in spans if span.is_root)
    flood = logs_request(
        [
            ("gen_ai.user.message", f"{i + 1:032x}", CHAT_SPAN, _body(content=f"event {i}"))
            for i in range(5_000)
        ]
    )
    async with _running(stage, consumer):
        assert stage.consume([Delivery("otlp_http", [s for s in spans if s is not root])])
        assert stage.consume([Delivery("otlp_http", decode_logs_protobuf(flood).spans)])
        assert stage.consume([Delivery("otlp_http", [root])])
        await wait_until_async(lambda: consumer.items, 30, "the record handed on")
    (item,) = consumer.items
    assert (item.record.trace_id, item.record.query, item.record.response) == (
        TRACE,
        QUESTION,
        ANSWER,
    )
    assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 0
    assert _value(telemetry, "traces_assembled_total", trigger="evicted") == 0
    assert _value(telemetry, "traces_assembled_total", trigger="events_only") >= 5_000 - 25
    assert _value(telemetry, "dropped_total", stage="assemble", reason="events_only") > 0


def _held_trace(i: int, pad: int) -> list[Span]:
    """Trace number `i` of `_chat_trace()`, whose chat call's output is to come as log
    events: once whole, it waits for them. `pad` characters more on the chat span."""
    spans = _chat_trace()
    spans[1]["attrs"]["app.note"] = "x" * pad
    return decode_json(json_body(spans).replace(TRACE.encode(), _trace_id(i).encode())).spans


def _trace_id(i: int) -> str:
    return f"{i + 1:032x}"


@pytest.mark.parametrize("bound", ["max_open_traces", "max_open_bytes"])
async def test_traces_held_for_their_log_events_stay_within_the_bounds(
    telemetry: Telemetry, bound: str
) -> None:
    """The grace on (the default) and a clock that never moves, so that no grace ends:
    30 whole traces waiting for their log events, with room for 10. The 20 least recent
    are pushed out (`evicted`, counted) and evaluated on what they have (suspect: no
    question); 10 stay held, within the bound; events that come later for a trace pushed
    out are late (counted), never a second record."""
    consumer = HoldingStage()
    held, total, pad = 10, 30, 4_000
    one = sum(span.size for span in _held_trace(0, pad))
    if bound == "max_open_traces":
        config = _config(max_open_traces=held)
    else:
        config = _config(max_open_traces=1_000, max_open_bytes=held * one)
    assert config.trace_assembly.log_events_wait_s > 0  # the default grace
    stage = trace_stage(config, consumer, telemetry, clock=lambda: 0.0)
    # Started and stopped as the service does: the evaluation stage still takes what the
    # trace stage releases when it stops.
    await stage.start()
    try:
        for i in range(total):
            assert stage.consume([Delivery("otlp_http", _held_trace(i, pad))])
        await wait_until_async(
            lambda: len(consumer.items) == total - held, 30, "the traces pushed out"
        )
        assert _value(telemetry, "traces_assembled_total", trigger="evicted") == total - held
        assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 0
        assert _value(telemetry, "open_traces") == held
        assert _value(telemetry, "open_trace_bytes") <= held * one
        answer = _body(message={"content": ANSWER})
        # The last one pushed out (released ids are remembered within the same bound).
        last = _trace_id(total - held - 1)
        late = logs_request([("gen_ai.choice", last, CHAT_SPAN, answer)])
        assert stage.consume([Delivery("otlp_http", decode_logs_protobuf(late).spans)])
        await wait_until_async(
            lambda: _value(telemetry, "dropped_total", stage="assemble", reason="late_span"),
            30,
            "the late event counted",
        )
    finally:
        await stage.shutdown(5)
    evicted = [item.record for item in consumer.items[: total - held]]
    assert [r.trace_id for r in evicted] == [_trace_id(i) for i in range(total - held)]
    assert {r.metadata[EXTRACTION_SUSPECT] for r in evicted} == {"no_query"}
    # The ones still held when the stage stopped were released then, each once.
    assert [item.record.trace_id for item in consumer.items] == [_trace_id(i) for i in range(total)]
    assert _value(telemetry, "traces_assembled_total", trigger="shutdown") == held
