"""A field of the wrong type costs its span (or log record), never its request: for every
field the OTLP/JSON decoders read, a value of any other JSON type, an id of the wrong
length, a huge or non-finite number, in one span of a request whose other spans form a
good RAG trace. The good trace is decoded whole and gives its record; the bad span is
decoded or rejected alone (counted in `rejected`, named in the message). Ids that are not
hex reject the request as a whole (`bad_ids`): a sender that writes them so writes every
id so."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.extraction import extract_trace
from monitor.spans import DecodeError, decode_json, decode_logs_json
from tests.trace.test_unreadable_values import ANSWER, QUESTION, _spans, json_body

GOOD_TRACE = "ab" * 16
Path = tuple[str | int, ...]
SPAN_FIELDS: list[Path] = [
    ("traceId",),
    ("spanId",),
    ("parentSpanId",),
    ("name",),
    ("kind",),
    ("startTimeUnixNano",),
    ("endTimeUnixNano",),
    ("flags",),
    ("status",),
    ("status", "code"),
    ("attributes",),
    ("attributes", 0),
    ("attributes", 0, "key"),
    ("attributes", 0, "value"),
    ("attributes", 1, "value", "intValue"),
    ("attributes", 2, "value", "doubleValue"),
    ("attributes", 3, "value", "arrayValue"),
    ("attributes", 3, "value", "arrayValue", "values"),
    ("attributes", 4, "value", "kvlistValue"),
    ("attributes", 4, "value", "kvlistValue", "values"),
    ("attributes", 5, "value", "bytesValue"),
    ("events",),
    ("events", 0),
    ("events", 0, "name"),
    ("events", 0, "timeUnixNano"),
    ("events", 0, "attributes"),
]
WRONG = st.sampled_from(
    [
        None,
        True,
        -1,
        2**64,
        10**400,
        1e308,
        "x",
        "NaN",
        "9" * 5_000,
        "abcd",  # hex of the wrong length
        "",
        [],
        [1, "a"],
        {},
        {"stringValue": 5},
        {"a": 1},
    ]
)


def _hostile_span() -> dict[str, Any]:
    """A span of another trace with one attribute of each AnyValue kind and an event."""
    return {
        "traceId": "cd" * 16,
        "spanId": "00000000000000e1",
        "name": "tool",
        "kind": 1,
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "2000",
        "flags": 0,
        "status": {"code": 0},
        "attributes": [
            {"key": "a", "value": {"stringValue": "text"}},
            {"key": "b", "value": {"intValue": "7"}},
            {"key": "c", "value": {"doubleValue": 0.5}},
            {"key": "d", "value": {"arrayValue": {"values": [{"stringValue": "x"}]}}},
            {"key": "e", "value": {"kvlistValue": {"values": [{"key": "k", "value": {}}]}}},
            {"key": "f", "value": {"bytesValue": "aGk="}},
        ],
        "events": [{"name": "e", "timeUnixNano": "1500", "attributes": []}],
    }


def _set(target: Any, path: Path, value: Any) -> None:
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def _request(hostile: dict[str, Any]) -> bytes:
    body = json.loads(json_body(_spans()))
    body["resourceSpans"][0]["scopeSpans"][0]["spans"].append(hostile)
    return json.dumps(body).encode()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SPAN_FIELDS), WRONG, st.booleans())
def test_a_wrong_type_in_a_span_field_costs_that_span(
    path: Path, value: Any, in_the_good_trace: bool
) -> None:
    """The bad span in a trace of its own, or in the good trace (a child of its root)."""
    hostile = _hostile_span()
    if in_the_good_trace:
        hostile.update(traceId=GOOD_TRACE, parentSpanId=f"{1:016x}")
    _set(hostile, path, copy.deepcopy(value))
    try:
        decoded = decode_json(_request(hostile))
    except DecodeError as exc:
        # Only ids that are not hex reject the request.
        assert exc.reason == "bad_ids" and path[0] in ("traceId", "spanId", "parentSpanId")
        return
    assert len(decoded.spans) + decoded.rejected == 4
    if decoded.rejected:
        assert decoded.message.startswith("resourceSpans[0].scopeSpans[0].spans[3]")
    traces: dict[str, list[Any]] = {}
    for span in decoded.spans:
        traces.setdefault(span.trace_id, []).append(span)
    assert len(traces.get(GOOD_TRACE, [])) >= 3, decoded.message
    extracted = [extract_trace(t, "http.route") for t in traces.values()]
    extractions = dict(zip(traces, extracted, strict=True))
    assert all(isinstance(e, list) for e in extractions.values()), extractions
    good = extractions[GOOD_TRACE]
    assert isinstance(good, list), good
    (record,) = good
    assert (record.query, record.response) == (QUESTION, ANSWER)


def test_a_wrong_type_in_a_resource_costs_that_resources_spans() -> None:
    body = json.loads(json_body(_spans()))
    other = copy.deepcopy(body["resourceSpans"][0])
    other["resource"] = {"attributes": {"service.name": "not a list"}}
    body["resourceSpans"].append(other)
    decoded = decode_json(json.dumps(body).encode())
    assert (len(decoded.spans), decoded.rejected) == (3, 3)
    assert decoded.message.startswith("resourceSpans[1].resource.attributes")


LOG_FIELDS: list[Path] = [
    ("traceId",),
    ("spanId",),
    ("eventName",),
    ("timeUnixNano",),
    ("observedTimeUnixNano",),
    ("body",),
    ("body", "kvlistValue"),
    ("attributes",),
    ("attributes", 0),
    ("attributes", 0, "value"),
]


def _log_record(content: str, trace_id: str = GOOD_TRACE) -> dict[str, Any]:
    return {
        "traceId": trace_id,
        "spanId": "0000000000000003",
        "eventName": "gen_ai.user.message",
        "timeUnixNano": "1500",
        "body": {
            "kvlistValue": {"values": [{"key": "content", "value": {"stringValue": content}}]}
        },
        "attributes": [{"key": "gen_ai.system", "value": {"stringValue": "openai"}}],
    }


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LOG_FIELDS), WRONG)
def test_a_wrong_type_in_a_log_record_costs_that_record(path: Path, value: Any) -> None:
    hostile = _log_record("hostile", "cd" * 16)
    _set(hostile, path, copy.deepcopy(value))
    records = [_log_record("first"), hostile, _log_record("last")]
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}
    try:
        decoded = decode_logs_json(json.dumps(body).encode())
    except DecodeError as exc:
        assert exc.reason == "bad_ids" and path[0] in ("traceId", "spanId")
        return
    good = [s for s in decoded.spans if s.trace_id == GOOD_TRACE]
    assert len(good) == 2, decoded.message
    assert len(decoded.spans) - 2 + decoded.rejected == 1
