"""A model call slower than `trace_assembly.idle_timeout_s` does not cut its trace in two.

OTLP carries only ended spans, so an open span is seen two ways: as the parent its
children name (which a lost root or one in another service also is: the idle timeout is the
bound for those), and as the span a GenAI instrumentation's input log events belong to,
written as the call starts. A trace with such an event whose span has not come waits past
the idle timeout, up to `trace_assembly.open_calls_wait_s`; one whose named parent has not
come, up to `trace_assembly.missing_parent_wait_s` (a service whose parents never come
learns to stop waiting); a trace the idle timeout cuts
while a parent had not come is logged naming `trace_assembly.idle_timeout_s` (clock
injected)."""

from __future__ import annotations

import logging

import pytest

from harness.pipeline import trace_stage
from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.config import Config
from monitor.processors.trace._assembler import TraceAssembler
from monitor.spans import LOG_EVENT_KEY, Span
from monitor.telemetry import Telemetry
from tests.trace.test_assembler import _span
from tests.trace.test_trace_stage import Clock, HoldingStage, _running


def _input_event(trace: str, call: str) -> Span:
    """A `gen_ai.user.message` log event of model call `call` (an event span)."""
    return Span(
        trace_id=trace.ljust(32, "0"),
        span_id=f"e{call}".rjust(16, "0"),
        parent_span_id=call.rjust(16, "0"),
        name="gen_ai.user.message",
        start_unix_nano=1,
        end_unix_nano=1,
        attributes={LOG_EVENT_KEY: "gen_ai.user.message"},
        service="svc",
    )


def _assembler(open_wait: float = 300.0, parent_wait: float = 0.0) -> TraceAssembler:
    return TraceAssembler(
        idle_timeout_s=10.0,
        max_open_traces=100,
        clock=lambda: 0.0,
        open_calls_wait_s=open_wait,
        missing_parent_wait_s=parent_wait,
    )


def test_a_missing_parent_keeps_its_trace_past_the_idle_timeout() -> None:
    """Round 8's 15 s model call at the default 10 s idle timeout: the retrieval (span 2)
    and the model call (span 3) name the request (span 1) as parent; the retrieval's span
    came at 0, the call's and the request's at 15: one trace, released whole."""
    asm = _assembler(parent_wait=120)
    asm.add([_span("p", "2", "1")], "otlp_http", now=0)
    assert asm.expire(now=10) == []
    (done,) = asm.add([_span("p", "3", "1"), _span("p", "1")], "otlp_http", now=15)
    assert (done.trigger, done.incomplete, len(done.spans)) == ("root_ended", False, 3)


def test_the_wait_for_a_missing_parent_is_bounded_and_learned_per_service() -> None:
    """A root that never comes: released incomplete once the bound has passed (idle
    timeout plus the wait, from the first span); the service's next such trace is cut at
    the idle timeout, until a trace of it is whole; another service still waits."""
    asm = _assembler(parent_wait=60)
    asm.add([_span("q", "2", "1")], "otlp_http", now=0)
    for now in (10, 20, 30, 40, 50, 60):
        assert asm.expire(now=now) == [], now
    (done,) = asm.expire(now=70)
    assert (done.trigger, done.incomplete) == ("idle_timeout", True)

    asm.add([_span("r", "2", "1")], "otlp_http", now=100)
    other = _span("s", "2", "1")
    other.service = "other"
    asm.add([other], "otlp_http", now=100)
    (cut,) = asm.expire(now=110)  # svc's trace at the idle timeout; other's kept
    assert (cut.trace_id[:1], cut.incomplete) == ("r", True)

    (whole,) = asm.add([_span("t", "2", "1"), _span("t", "1")], "otlp_http", now=120)
    assert whole.trigger == "root_ended"
    asm.add([_span("u", "2", "1")], "otlp_http", now=130)
    assert asm.expire(now=140) == []  # svc had a whole trace: it waits again


def test_an_open_model_call_keeps_its_trace_past_the_idle_timeout() -> None:
    """The retrieval ended and its span came, the model call's input event came; the
    call (span 3) and the root (span 1) end 40 s later: one trace, released whole."""
    asm = _assembler()
    asm.add([_span("a", "2", "1"), _input_event("a", "3")], "otlp_http", now=0)
    assert asm.expire(now=11) == []
    assert asm.expire(now=30) == []
    (done,) = asm.add([_span("a", "3", "1"), _span("a", "1")], "otlp_http", now=40)
    assert done.trigger == "root_ended" and len(done.spans) == 4


def test_the_wait_for_an_open_call_is_bounded() -> None:
    asm = _assembler(open_wait=60)
    asm.add([_span("b", "2", "1"), _input_event("b", "3")], "otlp_http", now=0)
    assert asm.expire(now=59) == []
    (done,) = asm.expire(now=70)
    assert (done.trigger, done.incomplete) == ("idle_timeout", True)


def test_without_an_open_call_the_idle_timeout_cuts_as_before() -> None:
    asm = _assembler()
    asm.add([_span("c", "2", "1")], "otlp_http", now=0)
    (done,) = asm.expire(now=10)
    assert (done.trigger, done.incomplete) == ("idle_timeout", True)


async def test_a_cut_by_the_idle_timeout_names_the_key(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="monitor.processors.trace")
    clock = Clock()
    consumer = HoldingStage()
    config = Config.model_validate({"trace_assembly": {"idle_timeout_s": 10}})
    stage = trace_stage(config, consumer, telemetry, clock=clock)
    async with _running(stage, consumer):
        assert stage.consume([Delivery("otlp_http", [_span("d", "2", "1")])])
        clock.now += 10 + 120 + 1  # past the idle timeout and the wait for a missing parent

        def logged() -> list[str]:
            return [r.getMessage() for r in caplog.records if "idle_timeout_s" in r.getMessage()]

        await wait_until_async(logged, 30, "the cut, logged")
        (line,) = logged()
        assert "released incomplete by trace_assembly.idle_timeout_s (10s" in line
        assert "raise trace_assembly.idle_timeout_s" in line
        consumer.finish_all()
