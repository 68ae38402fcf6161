"""Trace assembly: release on root end, idle timeout, eviction, late spans (fake clock)."""

from __future__ import annotations

from monitor.processors.trace._assembler import MAX_SPANS_PER_TRACE, TraceAssembler
from monitor.processors.trace._in_a_row import QUIET_AFTER
from monitor.processors.trace._released import RELEASED_S
from monitor.spans import Span


def _span(trace: str, span: str, parent: str = "", *, remote: bool = False) -> Span:
    return Span(
        trace_id=trace.ljust(32, "0"),
        span_id=span.rjust(16, "0"),
        parent_span_id=parent.rjust(16, "0") if parent else "",
        name=span,
        start_unix_nano=1,
        end_unix_nano=2,
        attributes={},
        events=[],
        error=False,
        service="svc",
        parent_is_remote=remote,
    )


class Drops:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def __call__(self, reason: str, n: int) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + n


def _assembler(drops: Drops | None = None, **kw: float) -> TraceAssembler:
    return TraceAssembler(
        idle_timeout_s=kw.get("idle", 10.0),
        max_open_traces=int(kw.get("max", 100)),
        on_drop=drops,
        clock=lambda: 0.0,
    )


def test_released_when_root_arrives_and_every_parent_is_present() -> None:
    asm = _assembler()
    assert asm.add([_span("a", "2", "1")], "otlp_http", now=0) == []  # child first, own batch
    assert asm.add([_span("a", "3", "2")], "otlp_http", now=1) == []  # grandchild
    (done,) = asm.add([_span("a", "1")], "otlp_grpc", now=2)  # the root ends last
    assert done.trigger == "root_ended"
    assert sorted(s.name for s in done.spans) == ["1", "2", "3"]
    assert done.source == "otlp_grpc"
    assert asm.open_traces == 0


def test_root_first_waits_for_referenced_parents() -> None:
    asm = _assembler()
    # The root and a grandchild are here, the middle span is not: keep waiting for it.
    assert asm.add([_span("b", "1"), _span("b", "3", "2")], "otlp_http", now=0) == []
    (done,) = asm.add([_span("b", "2", "1")], "otlp_http", now=1)
    assert len(done.spans) == 3


def test_remote_parent_counts_as_root() -> None:
    asm = _assembler()
    (done,) = asm.add([_span("c", "2", "1", remote=True)], "otlp_http", now=0)
    assert done.trigger == "root_ended"


def test_idle_timeout_releases_traces_without_root_oldest_first() -> None:
    asm = _assembler(idle=10)
    asm.add([_span("d", "2", "1")], "otlp_http", now=0)
    asm.add([_span("e", "2", "1")], "otlp_http", now=5)
    asm.add([_span("d", "3", "1")], "otlp_http", now=6)  # activity keeps d open
    assert asm.expire(now=14.9) == []
    released = asm.expire(now=16)
    assert [t.trace_id[:1] for t in released] == ["e", "d"]
    assert all(t.trigger == "idle_timeout" for t in released)


def test_full_assembler_evicts_least_recently_active() -> None:
    drops = Drops()
    asm = _assembler(drops, max=2)
    asm.add([_span("f", "2", "1")], "otlp_http", now=0)
    asm.add([_span("g", "2", "1")], "otlp_http", now=1)
    asm.add([_span("f", "3", "1")], "otlp_http", now=2)
    (evicted,) = asm.add([_span("h", "2", "1")], "otlp_http", now=3)
    assert (evicted.trace_id[:1], evicted.trigger) == ("g", "evicted")
    assert asm.open_traces == 2


def test_late_spans_of_a_released_trace_are_counted_not_reassembled() -> None:
    drops = Drops()
    asm = _assembler(drops)
    asm.add([_span("i", "1")], "otlp_http", now=0)
    assert asm.add([_span("i", "9", "1")], "otlp_http", now=1) == []
    assert drops.counts == {"late_span": 1}
    assert asm.open_traces == 0


def test_released_ids_are_remembered_for_a_bounded_time_and_number() -> None:
    """A late span within `RELEASED_S` of its trace's release is late; two generations of
    releases later the id is forgotten (under steady traffic the memory of ids stops growing
    then), and never more than `max_open_traces` ids are held."""
    drops, clock = Drops(), [0.0]
    asm = TraceAssembler(
        idle_timeout_s=10, max_open_traces=100, on_drop=drops, clock=lambda: clock[0]
    )

    def at(t: float, *spans: Span) -> None:
        clock[0] = t
        asm.add(list(spans), "otlp_http")

    at(0, _span("a", "1"))
    at(RELEASED_S, _span("a", "2", "1"), _span("b", "1"))  # a new generation from "b" on
    at(2 * RELEASED_S - 1, _span("a", "3", "1"))
    assert drops.counts == {"late_span": 2}
    at(2 * RELEASED_S, _span("c", "1"))
    at(2 * RELEASED_S, _span("a", "4", "1"), _span("b", "2", "1"))
    assert asm.is_open("a".ljust(32, "0")) and drops.counts == {"late_span": 3}
    for n in range(300):
        at(2 * RELEASED_S, _span(f"d{n:03d}", "1"))
    assert len(asm._released) <= 100
    at(2 * RELEASED_S, _span("d299", "2", "1"))  # the latest are still known
    assert drops.counts == {"late_span": 4}


def test_runaway_trace_is_capped() -> None:
    drops = Drops()
    asm = _assembler(drops)
    spans = [_span("j", format(i + 2, "x"), "1") for i in range(MAX_SPANS_PER_TRACE + 5)]
    asm.add(spans, "otlp_http", now=0)
    assert drops.counts == {"trace_too_large": 5}
    (done,) = asm.drain()
    assert done.trigger == "shutdown"
    assert len(done.spans) == MAX_SPANS_PER_TRACE


def _event(
    trace: str, parent: str, service: str = "svc", name: str = "gen_ai.choice", at: int = 3
) -> Span:
    return Span(
        trace.ljust(32, "0"),
        f"e{parent}{name[7:11]}".rjust(16, "0"),
        parent.rjust(16, "0"),
        name,
        at,
        at,
        attributes={"rag_monitor.log_event": name},
        service=service,
    )


def _chat(trace: str, span: str, parent: str, service: str = "svc", **attributes: str) -> Span:
    """A GenAI model call span; its output only when given in `attributes`."""
    return Span(
        trace.ljust(32, "0"),
        span.rjust(16, "0"),
        parent.rjust(16, "0"),
        "chat scripted",
        1,
        2,
        attributes={"gen_ai.operation.name": "chat", **attributes},
        service=service,
    )


def _waiting(**kw: float) -> TraceAssembler:
    return TraceAssembler(
        idle_timeout_s=10,
        max_open_traces=int(kw.get("max", 100)),
        clock=lambda: 0.0,
        log_events_wait_s=kw.get("wait", 5),
    )


def test_a_model_call_without_output_waits_for_its_log_events_spans_first() -> None:
    """Spans first (the order Semantic Kernel's app exported in): the whole trace's model
    call has no output, so the trace waits; its events join it, and the output event
    (the last an instrumentation writes) releases it at once, still `root_ended` — also
    for the very first trace of a service never heard from before."""
    asm = _waiting()
    assert asm.add([_span("a", "1"), _chat("a", "2", "1")], "otlp_http", now=0) == []
    user = _event("a", "2", name="gen_ai.user.message")
    assert asm.add([user], "otlp_http", now=1) == []  # the question, not yet the answer
    (done,) = asm.add([_event("a", "2")], "otlp_http", now=1.5)
    assert done.trigger == "root_ended"
    assert sorted(s.name for s in done.spans) == [
        "1",
        "chat scripted",
        "gen_ai.choice",
        "gen_ai.user.message",
    ]
    assert asm.open_traces == 0


def test_log_events_first_join_and_the_trace_is_released_when_whole() -> None:
    """Logs first (the SDKs' default delays: logs every second, spans every five): the
    events wait as a trace of nothing but events, and the spans complete it at once."""
    asm = _waiting()
    assert (
        asm.add(
            [_event("a", "2", name="gen_ai.user.message"), _event("a", "2")], "otlp_http", now=0
        )
        == []
    )
    (done,) = asm.add([_span("a", "1"), _chat("a", "2", "1")], "otlp_http", now=1)
    assert done.trigger == "root_ended" and len(done.spans) == 4


def test_a_trace_whose_calls_carry_their_output_or_that_has_none_is_not_held() -> None:
    asm = _waiting()
    (plain,) = asm.add([_span("a", "1"), _span("a", "2", "1")], "otlp_http", now=0)
    assert plain.trigger == "root_ended"
    with_output = _chat("b", "2", "1", **{"gen_ai.output.messages": "[]"})
    (done,) = asm.add([_span("b", "1"), with_output], "otlp_http", now=0)
    assert done.trigger == "root_ended"
    (off,) = TraceAssembler(idle_timeout_s=10, max_open_traces=10).add(
        [_span("c", "1"), _chat("c", "2", "1")], "otlp_http", now=0
    )
    assert off.trigger == "root_ended"  # log_events_wait_s = 0: no grace


def test_the_grace_is_bounded_and_later_events_are_late() -> None:
    drops = Drops()
    asm = TraceAssembler(
        idle_timeout_s=10,
        max_open_traces=100,
        clock=lambda: 0.0,
        log_events_wait_s=5,
        on_drop=drops,
    )
    assert asm.add([_span("a", "1"), _chat("a", "2", "1")], "otlp_http", now=0) == []
    assert asm.expire(now=4.9) == []
    (done,) = asm.expire(now=5)
    assert done.trigger == "root_ended" and len(done.spans) == 2
    assert asm.add([_event("a", "2")], "otlp_http", now=6) == []
    assert drops.counts == {"late_span": 1}


def test_a_service_that_sends_no_events_stops_waiting_until_it_sends_one() -> None:
    """Content capture off: nothing will come. After `QUIET_AFTER` graces in a row with no
    event at all, the service's traces are released at once; its next event makes them
    wait again."""
    asm = _waiting()
    now = 0.0
    for i in range(QUIET_AFTER):
        trace = f"q{i}"
        assert asm.add([_span(trace, "1"), _chat(trace, "2", "1")], "otlp_http", now=now) == []
        now += 5
        (done,) = asm.expire(now=now)
        assert done.trace_id == trace.ljust(32, "0")
    (at_once,) = asm.add([_span("r", "1"), _chat("r", "2", "1")], "otlp_http", now=now)
    assert at_once.trigger == "root_ended"
    assert asm.add([_event("u", "9")], "otlp_http", now=now) == []  # svc sends one again
    assert asm.add([_span("t", "1"), _chat("t", "2", "1")], "otlp_http", now=now) == []


def test_an_apps_own_verdicts_do_not_make_a_quiet_service_wait_for_content() -> None:
    """Content capture off, and an online judge sending `gen_ai.evaluation.result` log
    records for every trace: the verdicts join their traces, but they are no content, so
    the service still turns quiet and its traces stop waiting for content events."""
    asm = _waiting()
    now = 0.0
    for i in range(QUIET_AFTER):
        trace = f"v{i}"
        verdict = _event(trace, "2", name="gen_ai.evaluation.result", at=1)
        assert (
            asm.add([verdict, _span(trace, "1"), _chat(trace, "2", "1")], "otlp_http", now=now)
            == []
        )
        now += 5
        (done,) = asm.expire(now=now)
        assert len(done.spans) == 3  # the verdict came with its trace
    verdict = _event("w", "2", name="gen_ai.evaluation.result", at=1)
    (at_once,) = asm.add([verdict, _span("w", "1"), _chat("w", "2", "1")], "otlp_http", now=now)
    assert at_once.trigger == "root_ended"


def test_events_for_unknown_traces_never_push_out_a_trace_with_spans() -> None:
    """A real trace split over two requests, with a flood of GenAI log events for trace
    ids that never send a span in between: the events live apart, within a quarter of the
    bounds, and the real trace is released whole when its root comes, never as a late
    span."""
    drops = Drops()
    asm = TraceAssembler(
        idle_timeout_s=10, max_open_traces=1_000, max_open_bytes=10_000_000, on_drop=drops
    )
    assert asm.add([_span("real", "2", "1")], "otlp_http", now=0) == []
    flood = [_event(f"{i + 1:032x}", "1") for i in range(100_000)]
    finished = asm.add(flood, "otlp_http", now=1)
    assert {f.trigger for f in finished} == {"events_only"}
    assert len(finished) == 100_000 - 250  # a quarter of max_open_traces stays
    assert asm.open_traces == 1 + 250
    (done,) = asm.add([_span("real", "1")], "otlp_http", now=2)
    assert done.trigger == "root_ended" and len(done.spans) == 2
    assert drops.counts == {}


def test_events_only_traces_have_their_own_byte_bound() -> None:
    asm = TraceAssembler(idle_timeout_s=10, max_open_traces=1_000, max_open_bytes=400_000)
    real = _span("real", "2", "1")
    assert asm.add([real], "otlp_http", now=0) == []
    events = [_event(f"{i + 1:032x}", "1") for i in range(1_000)]
    finished = asm.add(events, "otlp_http", now=1)
    assert finished and {f.trigger for f in finished} == {"events_only"}
    assert asm.open_bytes - real.size <= 400_000 // 4
    assert asm.is_open(real.trace_id)
    assert sum(len(f.spans) for f in finished) + asm.open_traces - 1 == 1_000


def test_events_before_their_spans_join_them_and_idle_events_start_afresh() -> None:
    """Events may come first: the trace joins the others with its first span. An events-only
    trace that idles out is released as `events_only` and not remembered, so its spans
    arriving later make a trace of their own, not late spans."""
    drops = Drops()
    asm = _assembler(drops, idle=10)
    assert asm.add([_event("a", "2")], "otlp_http", now=0) == []
    (done,) = asm.add([_span("a", "1"), _span("a", "2", "1")], "otlp_http", now=1)
    assert done.trigger == "root_ended"
    assert sorted(s.name for s in done.spans) == ["1", "2", "gen_ai.choice"]
    assert asm.add([_event("b", "2")], "otlp_http", now=2) == []
    (idle,) = asm.expire(now=12)
    assert (idle.trigger, len(idle.spans)) == ("events_only", 1)
    (later,) = asm.add([_span("b", "1")], "otlp_http", now=13)
    assert later.trigger == "root_ended"
    assert drops.counts == {}


def test_an_operation_name_of_any_type_is_read_without_failing() -> None:
    """Span attributes may hold any value: a list where a string belongs is no model call
    waiting for events, and costs nothing else."""
    asm = _waiting()
    odd = Span(
        "o".ljust(32, "0"),
        "2".rjust(16, "0"),
        "1".rjust(16, "0"),
        "chat",
        1,
        2,
        attributes={"gen_ai.operation.name": ["chat"]},
        service="svc",
    )
    (done,) = asm.add([_span("o", "1"), odd], "otlp_http", now=0)
    assert done.trigger == "root_ended"
