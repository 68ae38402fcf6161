"""Whole-pipeline fuzzing: one hostile value costs its own record, never its neighbours.

Two `rag-monitor run` processes (results written with and without the extracted text) take
every generated case on OTLP/HTTP (JSON, which can carry lone surrogates) and on Kafka (a
real tansu broker: a consumer of noida-db polls without pause while the topic is idle, so
each process would spend most of a core waiting), and export through every exporter: the
results file, Prometheus, OTLP evaluation events (to a real HTTP endpoint) and alerts (a
webhook, with a rule that fires on any failing verdict). Each case is three well-formed RAG
traces or records plus one whose field, chosen among those the extraction reads, holds a
hostile value: arbitrary Unicode with lone surrogates and control characters, text nested
40 to 100,000 deep (JSON, a Python literal, content parts, tool messages: deep enough to
parse, to pass Python's recursion limit, and far beyond), or past every text limit of a
record. The cases that broke earlier trees run every time; a longer hunt:
`MONITOR_TESTS_FUZZ_EXAMPLES=200`. After each case:

- both processes are alive and every good trace and record is in both results files;
- the hostile trace gives its record too (a hostile value costs its attribute: read as
  text, left out or truncated), unless its answer is past the response limit, which
  refuses that record, counted; the hostile Kafka record is evaluated or refused, counted;
- `/metrics` still parses and counts the good records' verdicts, and each process's
  evaluation events of the good traces reach its collector;
- the Kafka group's committed offset is at the end of the partition (nothing stalls).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from harness.kafka_broker import Broker, running_broker, unique
from harness.reliability import MonitorProcess, post
from harness.servers import Webhook
from harness.wait import wait_until
from monitor.records.limits import SizeLimits
from tests.exporters.test_otlp_events import Received, http_stub

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

# Generated cases beyond the explicit ones below.
EXAMPLES = int(os.environ.get("MONITOR_TESTS_FUZZ_EXAMPLES", "2"))
JSON_HEADERS = {"Content-Type": "application/json"}
# The test's producer sends requests of at most 1 MiB (the client's default).
KAFKA_VALUE_CHARS = 120_000
QUESTION = "At what temperature does water boil at sea level?"
CONTEXT = "At sea level, water boils at 100 degrees Celsius (212 degrees Fahrenheit)."
ANSWER = "Water boils at 100 degrees Celsius at sea level."

# -- hostile values -------------------------------------------------------------------------

_odd = st.sampled_from(
    ["\ud800", "\udfff", "a\udc80b", "\ud83d", "\x00", "\x1b[31m", "\u202e", "\ufeff", "\x7f"]
)
_unicode = st.text(st.characters(exclude_categories=[]), max_size=40)
_mixed = st.lists(st.one_of(_odd, _unicode), min_size=1, max_size=6).map("".join)


def nested(shape: str, depth: int) -> str:
    """`shape` (one `%s`) wrapped around itself `depth` times, around a number."""
    head, tail = shape.split("%s")
    return head * depth + "1" + tail * depth


# Shapes the readers look into (JSON, a Python literal, content parts, tool messages), at
# depths that parse but are deep, that pass Python's recursion limit, and far beyond.
_SHAPES = [
    '{"a": %s}',
    "[%s]",
    "{'a': %s}",
    '[{"type": "text", "text": %s}]',
    '{"role": "tool", "content": %s}',
    '{"metadata": %s, "content": "x"}',
]
_deep = st.builds(
    nested, st.sampled_from(_SHAPES), st.sampled_from([40, 300, 1_000, 2_000, 100_000])
)
# Past every text limit of a record (`SizeLimits`): a query or document is truncated, an
# answer refuses its record (`response_too_large`), a service name is a label value.
_huge = st.sampled_from(["lorem ipsum " * 50_000, "\ud800" * 300_000, "9" * 600_000])
HOSTILE = st.one_of(_mixed, _deep, _huge, st.tuples(_mixed, _deep).map("".join))
OTLP_FIELDS = [
    "query",
    "answer",
    "document",
    "document_metadata",
    "tool_output",
    "messages",
    "service",
    "route",
    "span_name",
]
RECORD_FIELDS = ["question", "answer", "context", "service", "request_id", "messages"]


# -- OTLP/JSON -----------------------------------------------------------------------------


def _attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _span(
    trace: str, span: str, parent: str | None, name: str, attrs: dict[str, str]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": span,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }
    if parent is not None:
        out["parentSpanId"] = parent
    return out


def _rag_trace(trace: str, hostile: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """An OpenInference RAG trace (chain, retriever, tool, LLM); `hostile` puts a value
    into one of the fields the extraction reads."""
    field, value = hostile or ("", "")
    query = value if field == "query" else QUESTION
    document = value if field == "document" else CONTEXT
    answer = value if field == "answer" else ANSWER
    root, retriever, tool, llm = (trace[:12] + f"{i:04x}" for i in range(1, 5))
    doc_attrs = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": query,
        "retrieval.documents.0.document.content": document,
        "retrieval.documents.0.document.id": "kb/1",
    }
    if field == "document_metadata":
        doc_attrs["retrieval.documents.0.document.metadata"] = value
    tool_attrs = {"openinference.span.kind": "TOOL", "tool.name": "lookup"}
    if field == "tool_output":
        tool_attrs["output.value"] = value
    messages = json.dumps([{"role": "user", "content": query}])
    if field == "messages":
        messages = value
    return [
        _span(
            trace,
            root,
            None,
            value if field == "span_name" else "rag",
            {
                "openinference.span.kind": "CHAIN",
                "input.value": query,
                "output.value": answer,
                **({"http.route": value} if field == "route" else {"http.route": "/ask"}),
            },
        ),
        _span(trace, retriever, root, "retrieve", doc_attrs),
        _span(trace, tool, root, "tool", tool_attrs),
        _span(
            trace,
            llm,
            root,
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": query,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": answer,
                "gen_ai.input.messages": messages,
            },
        ),
    ]


def _resource(service: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resource": {"attributes": [_attr("service.name", service)]},
        "scopeSpans": [{"scope": {"name": "fuzz"}, "spans": spans}],
    }


def otlp_request(good: list[str], bad: str, field: str, value: str) -> bytes:
    """Good traces and the hostile one in one request (one resource unless the hostile
    value is the service name); ASCII JSON, so lone surrogates travel as escapes."""
    spans = [s for t in good for s in _rag_trace(t)]
    hostile = _rag_trace(bad, (field, value))
    if field == "service":
        resources = [_resource("shop", spans), _resource(value, hostile)]
    else:
        resources = [_resource("shop", spans + hostile)]
    return json.dumps({"resourceSpans": resources}).encode()


# -- Kafka records ------------------------------------------------------------------------


def kafka_message(request_id: str, hostile: tuple[str, str] | None = None) -> bytes:
    """One JSON record. For `messages`, a hostile value that looks like JSON goes in as
    the record's own structure (nested as deep as it is), else as text; a value that only
    looks like JSON makes the message undecodable, which is a hostile case too."""
    field, value = hostile or ("", "")
    record: dict[str, Any] = {
        "request_id": value if field == "request_id" else request_id,
        "service": value if field == "service" else "shop",
        "question": value if field == "question" else QUESTION,
        "context": [value if field == "context" else CONTEXT],
        "answer": value if field == "answer" else ANSWER,
    }
    if field != "messages":
        return json.dumps(record).encode()
    if value.startswith(("[", '{"')):
        record["messages"] = "@@messages@@"
        return json.dumps(record).replace('"@@messages@@"', value).encode("utf-8", "surrogatepass")
    record["messages"] = value
    return json.dumps(record).encode()


# -- the processes ------------------------------------------------------------------------


@dataclass
class Pipeline:
    monitors: list[MonitorProcess]
    broker: Broker
    topic: str
    group: str
    events: list[Received]  # each monitor's own collector of evaluation events
    hook: Webhook
    produced: int = 0


def _config(
    broker: Broker, topic: str, group: str, events: str, hook: str, text: bool
) -> dict[str, Any]:
    return {
        "receivers": {"kafka": broker.kafka_settings([topic], group)},
        "evaluators": [{"name": "local_groundedness"}, {"name": "local_safety"}],
        "exporters": {
            "results_include_text": text,
            "otlp": {"endpoint": events, "protocol": "http/protobuf"},
        },
        "alerts": {
            "evaluation_interval_s": 0.5,
            "webhooks": [{"url": hook}],
            "rules": [
                {
                    "name": "any_failure",
                    "evaluator": "local_groundedness",
                    "max_defect_rate": 0.0,
                    "min_samples": 1,
                    "window": "1m",
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    hook = Webhook()
    with contextlib.ExitStack() as stack:
        stack.callback(hook.close)
        broker = stack.enter_context(running_broker("tansu", tmp_path_factory.mktemp("tansu")))
        topic = broker.create_topic(unique("fuzz"))
        group = unique("g")
        monitors = []
        collectors = []
        for text in (False, True):
            events = Received()
            endpoint, stop_events = http_stub(events)
            stack.callback(stop_events)
            tmp = tmp_path_factory.mktemp(f"monitor-text-{text}")
            # One consumer group per process: each reads every message.
            cfg = _config(broker, topic, f"{group}-{text}", endpoint, hook.url, text)
            monitor = MonitorProcess(tmp, cfg).start()
            stack.callback(monitor.kill)
            monitors.append(monitor)
            collectors.append(events)
        yield Pipeline(monitors, broker, topic, group, collectors, hook)
        for monitor in monitors:
            assert monitor.stop() == 0, monitor.log()[-4000:]


_ids = itertools.count(1)


# A failing case is replayed with its arguments' repr, megabytes for the huge values: that
# warning of the library's would stand in for the case's own failure.
@pytest.mark.filterwarnings(
    "ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning"
)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    # Each case changes the running processes' state: a shrunk case is no simpler to
    # read, and shrinking would rerun many expensive cases.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# The cases that broke earlier trees run every time, whatever the draw.
@example(otlp_field="answer", record_field="answer", value="ok \ud800 then")
@example(otlp_field="service", record_field="service", value="\ud800" * 300_000)
@example(otlp_field="tool_output", record_field="messages", value=nested("[%s]", 100_000))
@example(otlp_field="tool_output", record_field="context", value=nested('{"a": %s}', 1_000))
@example(otlp_field="document_metadata", record_field="messages", value=nested('{"a": %s}', 300))
@example(otlp_field="messages", record_field="context", value=nested('{"a": %s}', 2_000))
@given(
    otlp_field=st.sampled_from(OTLP_FIELDS),
    record_field=st.sampled_from(RECORD_FIELDS),
    value=HOSTILE,
)
def test_a_hostile_value_costs_its_own_record_on_every_path(
    pipeline: Pipeline, otlp_field: str, record_field: str, value: str
) -> None:
    case = next(_ids)
    good = [f"{case:016x}{i:016x}" for i in range(3)]
    bad = f"{case:016x}{0xBAD:016x}"
    rejected_before = [_kafka_rejected(m) for m in pipeline.monitors]
    too_large_before = [_too_large(m) for m in pipeline.monitors]
    # An answer past the response limit refuses its record, counted; any other hostile
    # value is a bad value of its attribute: the trace still gives its record.
    refused = otlp_field == "answer" and len(value.strip()) > SizeLimits().response_chars
    lines_before = [len(m.results_lines()) for m in pipeline.monitors]
    evaluations_before = [_evaluations(m) for m in pipeline.monitors]

    body = otlp_request(good, bad, otlp_field, value)
    for monitor in pipeline.monitors:
        reply = post(monitor.http_port, body, JSON_HEADERS)
        assert reply.status == 200, (reply, otlp_field)
    good_records = [f"case-{case}-{i}" for i in range(3)]
    messages: list[bytes | dict[str, Any] | list[Any]] = [
        kafka_message(good_records[0]),
        kafka_message(good_records[1]),
        kafka_message(f"case-{case}-bad", (record_field, value[:KAFKA_VALUE_CHARS])),
        kafka_message(good_records[2]),
    ]
    pipeline.broker.produce(pipeline.topic, messages)
    pipeline.produced += len(messages)

    for index, monitor in enumerate(pipeline.monitors):

        def settled(monitor: MonitorProcess = monitor, index: int = index) -> bool:
            new = monitor.results_lines()[lines_before[index] :]
            traces = {line["trace_id"] for line in new}
            records = [line for line in new if line["trace_id"] is None]
            requests = {line["request_id"] for line in records}
            # A hostile record field gives a results line or is refused, counted.
            hostile_record = len(records) - 3 + _kafka_rejected(monitor) - rejected_before[index]
            hostile_trace = (
                _too_large(monitor) > too_large_before[index] if refused else bad in traces
            )
            # Prometheus counts the six good records' verdicts of both evaluators (and the
            # exposition parses, whatever text the hostile record held).
            counted = _evaluations(monitor) - evaluations_before[index] >= 6 * 2
            return (
                set(good) <= traces
                and hostile_trace
                and set(good_records) <= requests
                and hostile_record >= 1
                and counted
            )

        monitor.wait_for(settled, 60, f"case {case} ({otlp_field}, {record_field}) settled")

        def exported(events: Received = pipeline.events[index]) -> bool:
            return set(good) <= _event_traces(events)

        wait_until(exported, 60, f"case {case}: monitor {index} exported the good traces' events")
    wait_until(
        lambda: _offset_at_end(pipeline),
        60,
        f"case {case}: both groups committed to the end of the partition",
    )


def _evaluations(monitor: MonitorProcess) -> float:
    return monitor.value("rag_monitor_evaluations_total")


def _kafka_rejected(monitor: MonitorProcess) -> float:
    return monitor.value("rag_monitor_records_rejected_total", receiver="kafka")


def _too_large(monitor: MonitorProcess) -> float:
    return monitor.value("rag_monitor_records_rejected_total", reason="response_too_large")


def _offset_at_end(pipeline: Pipeline) -> bool:
    return all(
        pipeline.broker.committed(f"{pipeline.group}-{text}", pipeline.topic, 1)
        == {0: pipeline.produced}
        for text in (False, True)
    )


def _event_traces(events: Received) -> set[str]:
    return {span.trace_id.hex() for span in events.spans()}


def test_alerts_on_the_failing_verdicts_reached_the_webhook(pipeline: Pipeline) -> None:
    """A failing verdict from a service whose name is hostile text (a lone surrogate, an
    escape sequence) fires the rule, and its alert is delivered as JSON by both processes."""
    trace = f"{next(_ids):016x}{0xA1E27:016x}"
    spans = _rag_trace(trace, ("answer", "Water boils at 40 degrees Celsius on the Moon."))
    body = json.dumps({"resourceSpans": [_resource("shop\ud800\x1b[31m", spans)]}).encode()
    for monitor in pipeline.monitors:
        assert post(monitor.http_port, body, JSON_HEADERS).status == 200
    wait_until(lambda: bool(pipeline.hook.alerts()), 60, "alerts at the webhook")
    for monitor in pipeline.monitors:
        monitor.wait_for(
            lambda monitor=monitor: (
                monitor.value("rag_monitor_alert_notifications_total", outcome="sent") > 0
            ),
            60,
            "a notification sent",
        )
        assert monitor.value("rag_monitor_alert_notifications_total", outcome="failed") == 0
