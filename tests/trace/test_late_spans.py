"""Spans that end after their trace's root join its record: a whole trace waits
`trace_assembly.late_spans_wait_s` (its clock injected here) before it is released, holding
its place among the open traces (bounded like them); a span that comes after the record
was made is dropped, counted per service and outcome (`late_spans_total`) and logged with
its service and what released its trace.

The end-to-end case is LiteLLM's OTel callback as it traces: the app's spans go through
the app's SDK, and the model call's span, a child of the app's request span, is written by
the callback's own provider after the request returned (its own batch processor: it
reaches the monitor after the root)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from opentelemetry import trace as otel_trace

from harness.pipeline import RecordingStage, receiver_config, started
from harness.pipeline import metric_value as _value
from harness.wait import wait_until_async
from monitor.config import Config
from monitor.processors.trace._assembler import TraceAssembler
from monitor.processors.trace._in_a_row import QUIET_AFTER
from monitor.spans import Span
from monitor.telemetry import Telemetry
from tests.frameworks.apps.framework_apps import tracer_provider
from tests.trace.test_assembler import _span
from tests.trace.test_trace_stage import Clock

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOC = "The Eiffel Tower was completed in 1889 for the World Fair."
SERVICE = "litellm-app"


class Late:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def __call__(self, service: str, outcome: str, n: int) -> None:
        self.seen.append((service, outcome, n))


def _assembler(late: Late, wait: float = 6.0, max_open: int = 100) -> TraceAssembler:
    return TraceAssembler(
        idle_timeout_s=10.0,
        max_open_traces=max_open,
        late_spans_wait_s=wait,
        on_late=late,
        clock=lambda: 0.0,
    )


def test_a_span_within_the_wait_joins_its_whole_trace() -> None:
    late = Late()
    asm = _assembler(late)
    assert asm.add([_span("a", "1")], "otlp_http", now=0) == []  # whole, and waits
    assert asm.add([_span("a", "2", "1")], "otlp_http", now=5) == []  # after the root
    assert asm.expire(now=5.9) == []
    (done,) = asm.expire(now=6)
    assert (done.trigger, sorted(s.name for s in done.spans)) == ("root_ended", ["1", "2"])
    assert late.seen == [("svc", "joined", 1)]


def test_a_span_after_the_record_is_reported_with_its_service_and_what_released_it() -> None:
    late = Late()
    asm = _assembler(late)
    asm.add([_span("b", "1")], "otlp_http", now=0)
    assert len(asm.expire(now=6)) == 1
    straggler = _span("b", "2", "1")
    straggler.service = "model-proxy"
    assert asm.add([straggler], "otlp_http", now=7) == []
    assert late.seen == [("model-proxy", "root_ended", 1)]
    assert asm.open_traces == 0


def test_waiting_traces_are_bounded_like_every_open_trace() -> None:
    """Whole traces waiting for late spans hold places among the open ones: past
    `max_open_traces` the least recently active is released early (`evicted`)."""
    late = Late()
    asm = _assembler(late, max_open=2)
    asm.add([_span("c", "1")], "otlp_http", now=0)
    asm.add([_span("d", "1")], "otlp_http", now=1)
    (pushed,) = asm.add([_span("e", "1")], "otlp_http", now=2)
    assert (pushed.trace_id[:1], pushed.trigger, asm.open_traces) == ("c", "evicted", 2)


def test_no_wait_releases_at_once() -> None:
    asm = _assembler(Late(), wait=0.0)
    (done,) = asm.add([_span("f", "1")], "otlp_http", now=0)
    assert done.trigger == "root_ended"


def _config() -> Config:
    return receiver_config()


async def test_litellm_callback_span_after_the_root_joins_the_record(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    """The app's request and retrieval spans reach the monitor first; the callback's model
    span (OpenLLMetry-style `gen_ai.prompt.N` / `gen_ai.completion.N`, as LiteLLM's OTel
    integration writes it) comes after the root: within the default wait it joins the
    record. One more span after the wait is dropped, counted and logged with its service."""
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    clock = Clock()
    stage = RecordingStage()
    config = _config()
    wait = config.trace_assembly.late_spans_wait_s
    assert wait > 0  # the default
    served = await started(config, stage, telemetry, clock=clock)
    try:
        assert served.http is not None
        endpoint = f"http://127.0.0.1:{served.http.port}/v1/traces"
        app, _ = tracer_provider(SERVICE, endpoint)
        callback, _ = tracer_provider(SERVICE, endpoint)  # LiteLLM's own provider
        tracer = app.get_tracer("app")
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as root:
            retriever = {
                "openinference.span.kind": "RETRIEVER",
                "input.value": QUESTION,
                "retrieval.documents.0.document.content": DOC,
            }
            with tracer.start_as_current_span("retrieve", attributes=retriever):
                pass
        parent = otel_trace.set_span_in_context(root)
        await asyncio.to_thread(app.force_flush)
        await wait_until_async(
            lambda: _value(telemetry, "open_traces") == 1, 30, "the app's spans, held"
        )
        clock.now += 1  # the request returned; then the callback traces the call
        model = {
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": f"Context: {DOC}\n\nQuestion: {QUESTION}",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": ANSWER,
        }
        span = callback.get_tracer("litellm").start_span(
            "litellm_request", context=parent, attributes=model
        )
        span.end()
        await asyncio.to_thread(callback.force_flush)
        await wait_until_async(
            lambda: _value(telemetry, "late_spans_total", service=SERVICE, outcome="joined"),
            30,
            "the callback's span to join",
        )
        assert stage.records == []  # still waiting
        clock.now += wait
        await stage.wait_until(lambda: len(stage.records) == 1)
        ((_, record),) = stage.records
        assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, [DOC])

        straggler = callback.get_tracer("litellm").start_span("litellm_cost", context=parent)
        straggler.end()
        await asyncio.to_thread(callback.force_flush)
        await wait_until_async(
            lambda: _value(telemetry, "late_spans_total", service=SERVICE, outcome="root_ended"),
            30,
            "the straggler, counted",
        )
        assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 1
        said = [r.getMessage() for r in caplog.records if "late_spans_total" in r.getMessage()]
        assert any(
            f"service '{SERVICE}': 1 spans came after their trace was released (root_ended)" in line
            and "trace_assembly.late_spans_wait_s" in line
            for line in said
        ), said
        app.shutdown()
        callback.shutdown()
    finally:
        await served.shutdown(5)


def _punctual(late: Late) -> tuple[TraceAssembler, float]:
    """An assembler whose service showed `QUIET_AFTER` whole traces in a row that waited
    and had no span ending after the root; and the time then."""
    asm = _assembler(late)
    now = 0.0
    for i in range(QUIET_AFTER):
        trace = f"p{i}"
        assert asm.add([_span(trace, "1"), _span(trace, "2", "1")], "otlp_http", now=now) == []
        now += 6
        assert len(asm.expire(now=now)) == 1
    return asm, now


def test_a_punctual_service_stops_waiting_until_a_late_span_misses_its_record() -> None:
    late = Late()
    asm, now = _punctual(late)
    (at_once,) = asm.add([_span("q", "1")], "otlp_http", now=now)
    assert at_once.trigger == "root_ended"
    assert asm.add([_span("q", "3", "1")], "otlp_http", now=now + 1) == []  # missed
    assert late.seen == [("svc", "root_ended", 1)]
    assert asm.add([_span("s", "1")], "otlp_http", now=now + 2) == []  # waits again


def test_a_span_that_ended_after_its_root_makes_its_trace_wait() -> None:
    asm, now = _punctual(Late())
    after_root = _span("r", "2", "1")
    after_root.end_unix_nano = 9  # the root ended at 2
    assert asm.add([_span("r", "1"), after_root], "otlp_http", now=now) == []
    assert len(asm.expire(now=now + 6)) == 1
    assert asm.add([_span("t", "1")], "otlp_http", now=now + 6) == []  # waits again


ADDRESSES = {"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.0.3", "skewed": "10.0.0.9"}


def _replica_span(trace: str, span: str, parent: str = "", *, replica: str = "") -> Span:
    """A span of `svc` whose resource names the replica that sent it (none: "")."""
    sent = _span(trace, span, parent)
    if replica:
        sent.resource = {"service.instance.id": replica}
    return sent


@pytest.mark.parametrize("by", ["instance_id", "client_address"])
def test_one_replica_whose_spans_come_late_makes_only_its_own_traces_wait(by: str) -> None:
    """Four replicas of one service, one of them sending a span that ends after the root in
    every trace: the other three stop waiting once each showed `QUIET_AFTER` punctual
    traces; the late one's traces still wait. The replica is told by its instance id, or
    by the client address the receiver saw when the spans carry none."""
    asm = _assembler(Late())
    now = 0.0
    waited: dict[str, list[bool]] = {r: [] for r in ("a", "b", "c", "skewed")}
    for i in range(QUIET_AFTER + 3):
        for replica in waited:
            trace = f"{replica}{i}"
            child = _replica_span(trace, "2", "1", replica=replica if by == "instance_id" else "")
            if replica == "skewed":
                child.end_unix_nano = 9  # the root ended at 2
            root = _replica_span(trace, "1", replica=replica if by == "instance_id" else "")
            address = ADDRESSES[replica] if by == "client_address" else None
            released = asm.add([root, child], "otlp_http", now=now, address=address)
            waited[replica].append(released == [])
            now += 1
            asm.expire(now=now + 6)  # a waiting trace's wait is over before the next
            now += 7
    for replica in ("a", "b", "c"):
        assert waited[replica] == [True] * QUIET_AFTER + [False] * 3, replica
    assert waited["skewed"] == [True] * (QUIET_AFTER + 3)


def test_a_missed_late_span_makes_only_its_senders_traces_wait_again() -> None:
    """A span that missed its released trace's record puts that trace's sender back to
    waiting, not the service's other replicas."""
    asm = _assembler(Late())
    now = 0.0
    for i in range(QUIET_AFTER):
        for replica in ("a", "b"):
            trace = f"{replica}{i}"
            spans = [
                _replica_span(trace, "1", replica=replica),
                _replica_span(trace, "2", "1", replica=replica),
            ]
            assert asm.add(spans, "otlp_http", now=now) == []
            now += 7
            assert len(asm.expire(now=now)) == 1
    (at_once,) = asm.add([_replica_span("ax", "1", replica="a")], "otlp_http", now=now)
    assert at_once.trigger == "root_ended"
    assert asm.add([_replica_span("ax", "3", "1", replica="a")], "otlp_http", now=now) == []
    assert asm.add([_replica_span("ay", "1", replica="a")], "otlp_http", now=now) == []
    assert len(asm.add([_replica_span("by", "1", replica="b")], "otlp_http", now=now)) == 1


def test_a_sender_claiming_another_replicas_id_makes_only_its_own_traces_wait() -> None:
    """The wait is keyed on the address the receiver saw, the instance id only beneath it:
    a sender at another address that claims an honest replica's `service.instance.id` and
    sends late spans (spans ending after the root, and spans after the record) makes its
    own traces wait, never the honest replica's, which stays released at once."""
    asm = _assembler(Late())
    honest, forger = ADDRESSES["a"], ADDRESSES["skewed"]
    now = 0.0
    for i in range(QUIET_AFTER):
        trace = f"h{i}"
        spans = [_replica_span(trace, "1", replica="pod-1"), _replica_span(trace, "2", "1")]
        assert asm.add(spans, "otlp_grpc", now=now, address=honest) == []
        now += 7
        assert len(asm.expire(now=now)) == 1
    for i in range(3):
        trace = f"f{i}"
        child = _replica_span(trace, "2", "1", replica="pod-1")
        child.end_unix_nano = 9  # the root ended at 2
        root = _replica_span(trace, "1", replica="pod-1")
        assert asm.add([root, child], "otlp_grpc", now=now, address=forger) == []  # waits
        now += 7
        assert len(asm.expire(now=now)) == 1
        late = _replica_span(trace, f"3{i}", "1", replica="pod-1")
        assert asm.add([late], "otlp_grpc", now=now, address=forger) == []  # after the record
        (at_once,) = asm.add(
            [_replica_span(f"h-after-{i}", "1", replica="pod-1")],
            "otlp_grpc",
            now=now,
            address=honest,
        )
        assert at_once.trigger == "root_ended"
