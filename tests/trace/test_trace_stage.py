"""The trace stage on its own: assembly across deliveries, one sampling decision carried
with each record, acknowledgements per delivery, bounded intake and memory, flush and
shutdown. Spans are built directly; the next consumer is a stand-in that holds records
until the test finishes them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest

from harness.pipeline import trace_stage, unpack
from harness.wait import wait_until_async
from monitor.component import Delivery, Invalid, Refused, SampledRecord, SampledTrace
from monitor.config import Config
from monitor.extraction import TraceRecords, Unreadable, extract_within
from monitor.processors.trace import TraceStage
from monitor.processors.trace._assembler import TRIGGERS
from monitor.records import RagRecord, RawRecord
from monitor.records.limits import SizeLimits
from monitor.spans import Span
from monitor.telemetry import Telemetry, create_telemetry


class HoldingStage:
    """Takes records and keeps them unfinished until the test finishes them; full while
    it holds `capacity` records (None: never); `stopped` makes `take` take nothing (a
    stage that stopped accepting)."""

    def __init__(
        self,
        *,
        extract: bool = True,
        limits: SizeLimits | None = None,
        capacity: int | None = None,
    ) -> None:
        self.items: list[SampledRecord] = []
        self.traces: list[SampledTrace] = []  # as taken, when not extracting them
        self.calls: list[int] = []  # items offered by each take call
        self.stopped = False
        self.capacity = capacity
        self._room = asyncio.Event()
        self._extract = extract
        self._limits = limits  # what the evaluation stage bounds extracted records by

    @property
    def full(self) -> bool:
        return self.capacity is not None and len(self.items) >= self.capacity

    def take(self, items: Sequence[SampledRecord | SampledTrace]) -> int:
        if self.stopped:
            return 0
        self.calls.append(len(items))
        for item in items:
            if isinstance(item, SampledTrace) and not self._extract:
                self.traces.append(item)
            else:
                self.items.extend(unpack(item, limits=self._limits))
        return len(items)

    async def room(self) -> bool:
        while self.full and not self.stopped:
            self._room.clear()
            await self._room.wait()
        return not self.stopped

    def finish_all(self) -> None:
        for item in self.items:
            if item.on_done is not None:
                item.on_done(True)
        self.items.clear()
        self._room.set()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def _running(stage: TraceStage, consumer: HoldingStage) -> AsyncIterator[None]:
    """The stage started; at the end, its consumer stops accepting and the stage shuts down."""
    await stage.start()
    try:
        yield
    finally:
        consumer.stopped = True
        await stage.shutdown(5)


def _config(**assembly: Any) -> Config:
    sampling = assembly.pop("sampling", {})
    # Released as soon as whole: the wait for late spans is tests/trace/test_late_spans.py's;
    # cut at the idle timeout: the wait for a missing parent is test_open_calls.py's.
    assembly.setdefault("late_spans_wait_s", 0)
    assembly.setdefault("missing_parent_wait_s", 0)
    return Config.model_validate({"trace_assembly": assembly, "sampling": sampling})


@pytest.fixture
async def holding(telemetry: Telemetry) -> AsyncIterator[tuple[TraceStage, HoldingStage]]:
    consumer = HoldingStage()
    stage = trace_stage(_config(), consumer, telemetry)
    async with _running(stage, consumer):
        yield stage, consumer


def _span(trace: int, span: int, parent: int | None, **attributes: str) -> Span:
    return Span(
        f"{trace:032x}",
        f"{span:016x}",
        "" if parent is None else f"{parent:016x}",
        "step",
        start_unix_nano=span,
        end_unix_nano=span + 1,
        attributes=dict(attributes),
        service="svc",
    )


def _root(trace: int, **extra: str) -> Span:
    return _span(
        trace,
        1,
        None,
        **{
            "rag.query": f"question {trace}?",
            "rag.response": f"answer {trace}.",
            "rag.context": json.dumps([f"document {trace}"]),
            **extra,
        },
    )


def _value(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


class Acks:
    def __init__(self) -> None:
        self.done: dict[str, bool] = {}

    def of(self, name: str) -> Any:
        def on_done(ok: bool) -> None:
            assert name not in self.done, f"{name} acknowledged twice"
            self.done[name] = ok

        return on_done


async def test_a_delivery_is_done_once_every_trace_it_joined_is_finished(
    holding: tuple[TraceStage, HoldingStage], telemetry: Telemetry
) -> None:
    stage, consumer = holding
    acks = Acks()
    # A holds a child of trace 7 and all of trace 8; B holds the root of trace 7.
    a = Delivery("kafka", [_span(7, 2, 1), _root(8)], on_done=acks.of("a"))
    b = Delivery("kafka", [_root(7)], on_done=acks.of("b"))
    assert stage.consume([a])
    await wait_until_async(lambda: len(consumer.items) == 1, 5, "trace 8's record")
    assert acks.done == {}  # trace 8 is not finished, and trace 7 is still open
    assert stage.consume([b])
    await wait_until_async(lambda: len(consumer.items) == 2, 5, "trace 7's record")
    assert acks.done == {}
    consumer.finish_all()
    assert acks.done == {"a": True, "b": True}
    assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 2
    assert _value(telemetry, "records_total", service="svc", source="kafka") == 2


async def test_every_record_carries_the_one_decision_and_unsampled_traces_are_counted(
    telemetry: Telemetry,
) -> None:
    consumer = HoldingStage()
    config = _config(sampling={"rate": 0.0})
    stage = trace_stage(config, consumer, telemetry)
    async with _running(stage, consumer):
        acks = Acks()
        plain = Delivery("otlp_http", [_root(1)], on_done=acks.of("plain"))
        flagged = Delivery(
            "otlp_http", [_root(2, **{"rag.feedback": "negative"})], on_done=acks.of("flagged")
        )
        assert stage.consume([plain, flagged])
        await wait_until_async(lambda: "plain" in acks.done, 5, "the unsampled trace")
        await wait_until_async(lambda: len(consumer.items) == 1, 5, "the priority record")
        (item,) = consumer.items
        assert item.record.trace_id == f"{2:032x}"
        assert item.sampled == {e.name for e in config.evaluators}
        assert _value(telemetry, "traces_unsampled_total", service="svc") == 1
        assert _value(telemetry, "records_total", service="svc", source="otlp_http") == 1
        consumer.finish_all()
        assert acks.done == {"plain": True, "flagged": True}


async def test_records_are_sampled_too_and_their_delivery_waits_for_the_sampled_ones(
    telemetry: Telemetry,
) -> None:
    consumer = HoldingStage()
    stage = trace_stage(_config(sampling={"rate": 0.0}), consumer, telemetry)
    async with _running(stage, consumer):
        acks = Acks()
        records = [
            RagRecord(request_id="r0", query="q", response="a"),
            RagRecord(request_id="r1", query="q", response="a", feedback="negative"),
            RagRecord(request_id="r2", query="q", response="a"),
        ]
        assert stage.consume([Delivery("kafka", records=records, on_done=acks.of("m"))])
        await wait_until_async(lambda: len(consumer.items) == 1, 5, "the sampled record")
        assert consumer.items[0].record.request_id == "r1" and acks.done == {}
        assert _value(telemetry, "records_incomplete_total", service="unknown", missing="context")
        consumer.finish_all()
        assert acks.done == {"m": True}
        assert _value(telemetry, "traces_unsampled_total", service="unknown") == 2


async def test_late_spans_are_counted_and_done_only_once_their_trace_was_evaluated(
    holding: tuple[TraceStage, HoldingStage], telemetry: Telemetry
) -> None:
    """A late span's delivery waits for the evaluation of the trace it belongs to (and
    gets its outcome); once that trace is finished, a late span is done at once."""
    stage, consumer = holding
    acks = Acks()
    assert stage.consume([Delivery("kafka", [_root(3)], on_done=acks.of("first"))])
    await wait_until_async(lambda: len(consumer.items) == 1, 5, "the record")
    assert stage.consume([Delivery("kafka", [_span(3, 9, 1)], on_done=acks.of("late"))])
    await wait_until_async(
        lambda: _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 1,
        5,
        "the late span counted",
    )
    assert acks.done == {}  # the trace's record is not finished yet
    consumer.finish_all()
    assert acks.done == {"late": True, "first": True}
    assert stage.consume([Delivery("kafka", [_span(3, 8, 1)], on_done=acks.of("later"))])
    await wait_until_async(lambda: "later" in acks.done, 5, "the later delivery's ack")
    assert acks.done["later"] is True
    assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 2


async def test_a_late_span_of_a_trace_whose_evaluation_was_abandoned_is_not_done(
    telemetry: Telemetry,
) -> None:
    consumer = HoldingStage()
    stage = trace_stage(_config(), consumer, telemetry)
    acks = Acks()
    async with _running(stage, consumer):
        assert stage.consume([Delivery("kafka", [_root(44)], on_done=acks.of("first"))])
        await wait_until_async(lambda: len(consumer.items) == 1, 5, "the record")
        assert stage.consume([Delivery("kafka", [_span(44, 9, 1)], on_done=acks.of("late"))])
        await wait_until_async(
            lambda: _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 1,
            5,
            "the late span counted",
        )
    # The record never finished (the process stopped first): neither delivery is done.
    for item in consumer.items:
        assert item.on_done is not None
        item.on_done(False)
    assert acks.done == {"first": False, "late": False}


async def test_kafka_metadata_reaches_the_records_of_the_trace(
    holding: tuple[TraceStage, HoldingStage],
) -> None:
    stage, consumer = holding
    meta = {"kafka.topic": "otlp_spans", "kafka.offset": "41"}
    assert stage.consume([Delivery("kafka", [_span(4, 2, 1)], metadata=meta)])
    assert stage.consume([Delivery("kafka", [_root(4)], metadata={"kafka.offset": "42"})])
    await wait_until_async(lambda: len(consumer.items) == 1, 5, "the record")
    metadata = consumer.items[0].record.metadata
    assert meta.items() <= metadata.items()  # from the trace's first message


async def test_a_full_next_stage_makes_consume_refuse_and_count_until_there_is_room(
    telemetry: Telemetry,
) -> None:
    consumer = HoldingStage(capacity=3)  # evaluation is stuck on what it holds
    stage = trace_stage(_config(), consumer, telemetry)
    async with _running(stage, consumer):
        for trace in (1, 2, 3):
            assert stage.consume([Delivery("otlp_http", [_root(trace)])])
        assert stage.refuses()
        refused = stage.consume([Delivery("otlp_http", [_root(4)])])
        assert isinstance(refused, Refused) and refused.reason == "queue_full"
        # One refusal each: the receivers' check before reading a body, and consume.
        assert _value(telemetry, "dropped_total", stage="assemble", reason="queue_full") == 2
        assert len(consumer.items) == 3  # nothing of the refused delivery went on
        consumer.finish_all()
        assert not stage.refuses()
        assert stage.consume([Delivery("otlp_http", [_root(4)])])
        assert [item.record.trace_id for item in consumer.items] == [f"{4:032x}"]


async def test_open_traces_are_bounded_in_bytes(telemetry: Telemetry) -> None:
    consumer = HoldingStage()
    stage = trace_stage(_config(max_open_bytes=20_000), consumer, telemetry)
    async with _running(stage, consumer):
        big = "x" * 4000
        # Ten traces whose roots never come, 4 kB each: at most five fit.
        for trace in range(10):
            assert stage.consume([Delivery("otlp_http", [_span(trace + 1, 2, 1, payload=big)])])
        await wait_until_async(
            lambda: _value(telemetry, "traces_assembled_total", trigger="evicted") >= 5,
            5,
            "evictions",
        )
        assert _value(telemetry, "open_trace_bytes") <= 20_000
        assert _value(telemetry, "open_traces") <= 5


async def test_idle_traces_are_released_by_the_injected_clock(telemetry: Telemetry) -> None:
    consumer = HoldingStage()
    clock = Clock()
    config = _config(idle_timeout_s=0.2)
    stage = trace_stage(config, consumer, telemetry, clock=clock)
    async with _running(stage, consumer):
        assert stage.consume([Delivery("otlp_http", [_root(5), _span(5, 2, 3)])])
        await wait_until_async(lambda: _value(telemetry, "open_traces") == 1, 5, "open trace")
        assert consumer.items == []  # its child's parent (span 3) never came
        clock.now += 1.0
        await wait_until_async(lambda: len(consumer.items) == 1, 5, "the idle release")
        assert _value(telemetry, "traces_assembled_total", trigger="idle_timeout") == 1


async def test_flush_and_shutdown_release_open_traces(
    holding: tuple[TraceStage, HoldingStage], telemetry: Telemetry
) -> None:
    stage, consumer = holding
    assert stage.consume([Delivery("kafka", [_span(6, 2, 1, **{"rag.response": "a"})])])
    await wait_until_async(lambda: _value(telemetry, "open_traces") == 1, 5, "open trace")
    stage.flush()
    await wait_until_async(lambda: len(consumer.items) == 1, 5, "the flushed trace")
    assert _value(telemetry, "traces_assembled_total", trigger="flushed") == 1
    assert stage.consume([Delivery("kafka", [_span(9, 2, 1, **{"rag.response": "b"})])])
    await stage.shutdown(5)
    assert len(consumer.items) == 2
    assert _value(telemetry, "traces_assembled_total", trigger="shutdown") == 1
    assert not stage.consume([Delivery("kafka", [_root(10)])])
    assert _value(telemetry, "dropped_total", stage="assemble", reason="shutting_down") == 1


async def test_what_the_next_stage_no_longer_takes_at_shutdown_is_abandoned(
    telemetry: Telemetry,
) -> None:
    """Shutdown releases the open traces to the next stage; one that stopped accepting
    first takes none of them: they are abandoned, counted, their deliveries not done."""
    consumer = HoldingStage()
    stage = trace_stage(_config(), consumer, telemetry)
    await stage.start()
    acks = Acks()
    child = {"rag.context": json.dumps(["document"]), "rag.response": "a"}
    assert stage.consume([Delivery("kafka", [_span(11, 2, 1, **child)], on_done=acks.of("m"))])
    assert acks.done == {} and _value(telemetry, "open_traces") == 1
    consumer.stopped = True
    await stage.shutdown(5)
    assert acks.done == {"m": False}
    assert stage.abandoned == 1
    assert _value(telemetry, "dropped_total", stage="assemble", reason="shutting_down") == 1


async def test_put_waits_for_room_instead_of_refusing(telemetry: Telemetry) -> None:
    consumer = HoldingStage(capacity=2)
    stage = trace_stage(_config(), consumer, telemetry)
    async with _running(stage, consumer):
        for trace in (1, 2):
            assert await stage.put([Delivery("replay", [_root(trace)])])
        waiting = asyncio.create_task(stage.put([Delivery("replay", [_root(3)])]))
        # The next stage holds two and is full: the third waits until it has room.
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiting.done() and len(consumer.items) == 2
        consumer.finish_all()
        async with asyncio.timeout(5):
            assert await waiting
        assert [item.record.trace_id for item in consumer.items] == [f"{3:032x}"]
        assert _value(telemetry, "dropped_total", stage="assemble", reason="queue_full") == 0


def _count_is(consumer: HoldingStage, n: int) -> bool:
    return len(consumer.items) == n


async def test_what_one_consume_samples_goes_on_before_it_returns_in_one_hand_on(
    telemetry: Telemetry,
) -> None:
    """The sampled records and traces of the deliveries handed in together go to the
    evaluation stage in one call (records in order, then the traces they completed)
    before `consume` returns: no thread and no timer between them; those of the next
    `consume` in the next call."""
    consumer = HoldingStage()
    config = _config(sampling={"rate": 1.0})
    stage = trace_stage(config, consumer, telemetry)

    def record(i: int) -> Delivery:
        raw = {"request_id": f"r{i}", "question": "q", "context": ["c"], "answer": "a"}
        return Delivery("kafka", records=[RawRecord(raw)])

    async with _running(stage, consumer):
        assert stage.consume([record(0), Delivery("otlp_http", [_root(1)]), record(2)])
        assert consumer.calls == [3]
        assert stage.consume([record(3)])
        assert consumer.calls == [3, 1]
        records = [item.record for item in consumer.items]
        assert [r.request_id for r in records[:2]] == ["r0", "r2"]
        assert records[2].trace_id == f"{1:032x}" and records[3].request_id == "r3"


async def test_raw_records_are_validated_only_when_sampled(telemetry: Telemetry) -> None:
    """Kafka hands records over unvalidated: the sampled ones are validated, and those
    that fail are counted and reported to the receiver (which dead-letters them)."""
    good = {"request_id": "g", "question": "q", "context": ["c"], "answer": "a"}
    bad = {"request_id": "b", "question": "no answer"}
    for rate, expect_rejected in ((1.0, True), (0.0, False)):
        consumer = HoldingStage()
        t = create_telemetry()
        stage = trace_stage(_config(sampling={"rate": rate}), consumer, t)
        async with _running(stage, consumer):
            acks = Acks()
            rejected: list[list[Invalid]] = []
            bad_record = RawRecord(bad)
            delivery = Delivery(
                "kafka",
                records=[RawRecord(good), bad_record],
                on_done=acks.of("m"),
                on_rejected=rejected.append,
            )
            assert stage.consume([delivery])
            if rate:
                await wait_until_async(partial(_count_is, consumer, 1), 5, "the good record")
                assert consumer.items[0].record.request_id == "g"
                consumer.finish_all()
            assert acks.done == {"m": True}
            if expect_rejected:
                assert rejected == [[(bad_record, "no_response", "response: missing")]]
                assert _value(t, "records_rejected_total", receiver="kafka", reason="no_response")
            else:
                assert rejected == []  # an unsampled record is never validated
                assert _value(t, "traces_unsampled_total", service="unknown") == 2


def _without_id_nested_too_deeply() -> RawRecord:
    """A record without an id, nested deeper than Python's json serialises (orjson reads
    JSON up to 1024 levels): no id can be derived from it."""
    nested: dict[str, Any] = {}
    inner = nested
    for _ in range(1100):
        inner["a"] = {}
        inner = inner["a"]
    return RawRecord({"response": "a", "extra": nested})


async def test_a_record_whose_sampling_key_cannot_be_read_is_rejected_alone(
    telemetry: Telemetry,
) -> None:
    """A record without an id, nested deeper than an id can be derived from, is rejected
    with a reason (and reported to the receiver) when its sampling key is read (at 0.5) or
    when it is validated (at 1, where no key is read), while the records beside it in the
    same delivery are sampled as usual and the delivery is finished."""
    deep = _without_id_nested_too_deeply()
    good = {"question": "q", "context": ["c"], "answer": "a"}
    for rate in (0.5, 1.0):
        consumer = HoldingStage()
        t = create_telemetry()
        stage = trace_stage(_config(sampling={"rate": rate}), consumer, t)
        async with _running(stage, consumer):
            acks = Acks()
            rejected: list[list[Invalid]] = []
            delivery = Delivery(
                "kafka",
                records=[RawRecord({**good, "request_id": f"g{i}"}) for i in range(20)] + [deep],
                on_done=acks.of("run"),
                on_rejected=rejected.append,
            )
            assert stage.consume([delivery])
            assert len(rejected) == 1
            assert [(record, reason) for record, reason, _ in rejected[0]] == [
                (deep, "invalid_field")
            ]
            assert "nested too deeply" in rejected[0][0][2]
            assert _value(t, "records_rejected_total", receiver="kafka", reason="invalid_field")
            unsampled = _value(t, "traces_unsampled_total", service="unknown")
            assert 0 < unsampled < 20 if rate < 1 else unsampled == 0
            evaluated = 20 - int(unsampled)
            await wait_until_async(partial(_count_is, consumer, evaluated), 5, "the good ones")
            consumer.finish_all()
            assert acks.done == {"run": True}


async def test_unsampled_records_without_a_readable_key_are_shown_to_the_observer(
    telemetry: Telemetry,
) -> None:
    """At rate 0 no key is read to decide; the observer (`/debug/records`) still gets
    every unsampled record, one whose key cannot be derived with an empty id."""
    seen: list[tuple[str, str]] = []

    class Observer:
        def extracted(self, record: RagRecord, source: str) -> None:
            raise AssertionError("nothing is sampled")

        def no_record(self, trace_id: str, service: str, source: str, reason: str, _: int) -> None:
            seen.append((trace_id, reason))

        def kept_spans(self, trace_id: str, spans: Sequence[Span]) -> None:
            raise AssertionError("nothing is sampled")

    config = _config(sampling={"rate": 0.0})
    stage = trace_stage(config, HoldingStage(), telemetry, observer=Observer())
    await stage.start()
    acks = Acks()
    try:
        records = [RawRecord({"request_id": "g", "response": "a"})]
        records.append(_without_id_nested_too_deeply())
        assert stage.consume([Delivery("kafka", records=records, on_done=acks.of("run"))])
        assert seen == [("g", "unsampled"), ("", "unsampled")]
        assert acks.done == {"run": True}
    finally:
        await stage.shutdown(5)


async def test_sampled_traces_go_on_as_spans_and_what_their_extraction_gave_is_counted(
    telemetry: Telemetry,
) -> None:
    """The stage extracts nothing itself: it hands sampled traces on as their spans, and
    counts and acknowledges what the evaluation stage tells it each gave — records (with
    their Kafka metadata), nothing (not RAG), or unreadable."""
    consumer = HoldingStage(extract=False)
    stage = _stage(consumer, telemetry, rate=1.0)
    async with _running(stage, consumer):
        acks = Acks()
        first = Delivery("kafka", [_root(21)], on_done=acks.of("a"), metadata={"offset": "7"})
        rest = [Delivery("kafka", [_root(n)], on_done=acks.of(str(n))) for n in (22, 23)]
        assert stage.consume([first, *rest])
        await wait_until_async(lambda: len(consumer.traces) == 3, 5, "the sampled traces")
        a, b, c = consumer.traces
        assert [t.spans[0].trace_id for t in (a, b, c)] == [f"{n:032x}" for n in (21, 22, 23)]
        assert a.metadata == {"offset": "7"} and a.sampled and a.source == "kafka"
        assert consumer.items == [] and acks.done == {}
        extracted = extract_within(a.spans, "http.route", SizeLimits())
        assert isinstance(extracted, TraceRecords)
        a.on_extracted(extracted)
        b.on_extracted(TraceRecords([], [], []))
        c.on_extracted(Unreadable("bad_protobuf", "span 1: corrupt"))
        assert _value(telemetry, "records_total", service="svc", source="kafka") == 1
        (record,) = extracted.records
        counted = {"service": "svc", "context_source": record.context_source}
        assert _value(telemetry, "records_context_source_total", **counted) == 1
        assert _value(telemetry, "dropped_total", stage="assemble", reason="not_rag") == 1
        assert (
            _value(telemetry, "records_rejected_total", receiver="kafka", reason="bad_protobuf")
            == 1
        )
        for trace in (a, b, c):
            assert trace.on_done is not None
            trace.on_done(True)
        assert acks.done == {"a": True, "22": True, "23": True}


def _stage(consumer: HoldingStage, telemetry: Telemetry, **sampling: float) -> TraceStage:
    config = _config(sampling=sampling)
    return trace_stage(config, consumer, telemetry)


async def test_a_trace_whose_parent_links_form_a_cycle_is_counted_and_the_stage_goes_on(
    holding: tuple[TraceStage, HoldingStage], telemetry: Telemetry
) -> None:
    stage, consumer = holding
    acks = Acks()
    cycle = [_span(26, 2, 3, **{"rag.response": "a"}), _span(26, 3, 2)]  # no root
    assert stage.consume([Delivery("kafka", cycle, on_done=acks.of("cycle"))])
    await wait_until_async(lambda: _value(telemetry, "open_traces") == 1, 5, "open trace")
    stage.flush()
    await wait_until_async(lambda: "cycle" in acks.done, 5, "the cyclic trace settled")
    assert acks.done == {"cycle": True}
    assert (
        _value(telemetry, "records_rejected_total", receiver="kafka", reason="extract_failed") == 1
    )
    assert stage.consume([Delivery("kafka", [_root(27)], on_done=acks.of("next"))])
    await wait_until_async(partial(_count_is, consumer, 1), 5, "the next trace's record")
    consumer.finish_all()
    assert acks.done["next"] is True


async def test_abandoned_traces_are_dropped_unevaluated_and_their_deliveries_not_finished(
    holding: tuple[TraceStage, HoldingStage], telemetry: Telemetry
) -> None:
    """Handing an origin back drops the open traces whose deliveries all came from it,
    without a record; a trace that also holds a delivery of a kept origin stays open and
    is evaluated whole; spans of an abandoned trace that come again start it afresh."""
    stage, consumer = holding
    acks = Acks()
    child = {"rag.context": json.dumps(["document"])}
    assert stage.consume(
        [
            Delivery("kafka", [_span(40, 2, 1, **child)], on_done=acks.of("gone"), origin="p0"),
            Delivery("kafka", [_span(41, 2, 1, **child)], on_done=acks.of("mixed0"), origin="p0"),
            Delivery("kafka", [_span(41, 3, 1)], on_done=acks.of("mixed1"), origin="p1"),
            Delivery("kafka", [_span(42, 2, 1, **child)], on_done=acks.of("kept"), origin="p1"),
        ]
    )
    await wait_until_async(lambda: _value(telemetry, "open_traces") == 3, 5, "three open traces")
    stage.abandon(["p0"])
    # Returns once done: the abandoned trace's delivery is settled as not finished.
    assert acks.done == {"gone": False}
    assert _value(telemetry, "open_traces") == 2
    assert _value(telemetry, "dropped_total", stage="assemble", reason="handed_back") == 1
    assert sum(_value(telemetry, "traces_assembled_total", trigger=t) for t in TRIGGERS) == 0
    # The kept and the mixed traces complete as usual.
    assert stage.consume(
        [
            Delivery("kafka", [_root(41)], on_done=acks.of("root41"), origin="p1"),
            Delivery("kafka", [_root(42)], on_done=acks.of("root42"), origin="p1"),
        ]
    )
    await wait_until_async(lambda: len(consumer.items) == 2, 5, "the kept traces' records")
    consumer.finish_all()
    assert {k: acks.done.get(k) for k in ("mixed0", "mixed1", "kept")} == dict.fromkeys(
        ("mixed0", "mixed1", "kept"), True
    )
    # Trace 40 read again whole (by whoever owns p0 now: here the same stage): not late.
    assert stage.consume(
        [
            Delivery("kafka", [_span(40, 2, 1, **child)], on_done=acks.of("again"), origin="p0b"),
            Delivery("kafka", [_root(40)], on_done=acks.of("root40"), origin="p0b"),
        ]
    )
    await wait_until_async(lambda: len(consumer.items) == 1, 5, "trace 40 whole")
    (item,) = consumer.items
    assert item.record.trace_id == f"{40:032x}"
    assert item.record.query and item.record.response and item.record.retrieved_context
    consumer.finish_all()
    assert acks.done["again"] is True and acks.done["root40"] is True
    assert _value(telemetry, "dropped_total", stage="assemble", reason="late_span") == 0


async def test_a_suspended_origin_keeps_its_open_traces_past_the_idle_timeout(
    telemetry: Telemetry,
) -> None:
    """While a receiver does not know whether it will read an origin again (a Kafka
    partition revoked, the rejoin taking longer than the idle timeout), the open traces
    holding its deliveries are not released for idleness: once it is resumed they
    complete whole; once it is handed back they are dropped unevaluated. Other traces
    expire as usual meanwhile."""
    consumer = HoldingStage()
    clock = Clock()
    config = _config(idle_timeout_s=0.2)
    stage = trace_stage(config, consumer, telemetry, clock=clock)
    acks = Acks()
    child = {"rag.context": json.dumps(["document"])}
    async with _running(stage, consumer):
        assert stage.consume(
            [
                Delivery("kafka", [_span(60, 2, 1, **child)], on_done=acks.of("a"), origin="p0"),
                Delivery("kafka", [_span(61, 2, 1, **child)], on_done=acks.of("b"), origin="p1"),
            ]
        )
        await wait_until_async(lambda: _value(telemetry, "open_traces") == 2, 5, "open traces")
        stage.suspend(["p0", "p1"])
        for step in range(5):  # a rejoin of many idle timeouts
            clock.now += 1.0
            # A trace of no suspended origin, idle from now on, is released by the next
            # expiry pass: once it is, that pass has kept the suspended ones.
            marker = 70 + step
            marked = Delivery(
                "otlp_http", [_span(marker, 2, 1, **child)], on_done=acks.of(f"m{marker}")
            )
            assert stage.consume([marked])
            await wait_until_async(
                lambda: _value(telemetry, "open_traces") == 3, 5, "the marker trace open"
            )
            clock.now += 1.0
            await wait_until_async(
                partial(_count_is, consumer, step + 1), 5, "the marker's idle release"
            )
            assert _value(telemetry, "open_traces") == 2
        assert [i.record.trace_id for i in consumer.items] == [f"{70 + n:032x}" for n in range(5)]
        # p0 comes back: its trace completes whole; p1 goes: its trace is dropped.
        stage.resume(["p0"])
        stage.abandon(["p1"])
        assert "a" not in acks.done and acks.done["b"] is False
        assert stage.consume([Delivery("kafka", [_root(60)], on_done=acks.of("c"), origin="p0")])
        await wait_until_async(lambda: len(consumer.items) == 6, 5, "trace 60 whole")
        record = consumer.items[-1].record
        assert record.trace_id == f"{60:032x}"
        assert record.query and record.response and record.retrieved_context
        consumer.finish_all()
        assert {k: acks.done[k] for k in "abc"} == {"a": True, "b": False, "c": True}
    assert _value(telemetry, "traces_assembled_total", trigger="idle_timeout") == 5
    assert _value(telemetry, "dropped_total", stage="assemble", reason="handed_back") == 1


async def test_a_resumed_origin_s_traces_age_again_from_then(telemetry: Telemetry) -> None:
    """Resumed, an origin's open trace that never completes is released for idleness an
    idle timeout after the resume, not at once and not never."""
    consumer = HoldingStage()
    clock = Clock()
    config = _config(idle_timeout_s=0.2)
    stage = trace_stage(config, consumer, telemetry, clock=clock)
    child = {"rag.context": json.dumps(["document"])}
    async with _running(stage, consumer):
        assert stage.consume([Delivery("kafka", [_span(80, 2, 1, **child)], origin="p0")])
        await wait_until_async(lambda: _value(telemetry, "open_traces") == 1, 5, "open trace")
        stage.resume(["p0"])  # resuming an origin never suspended changes nothing
        clock.now += 1.0
        await wait_until_async(lambda: len(consumer.items) == 1, 5, "the idle release")
    assert _value(telemetry, "traces_assembled_total", trigger="idle_timeout") == 1


async def test_abandon_takes_the_deliveries_just_handed_in_too(
    telemetry: Telemetry,
) -> None:
    """Spans handed in right before their origin is handed back are part of what goes
    back (`consume` assembled them before it returned), so they cannot open a trace the
    stage evaluates cut later."""
    consumer = HoldingStage()
    stage = trace_stage(_config(), consumer, telemetry)
    await stage.start()
    acks = Acks()
    queued = Delivery("kafka", [_span(43, 2, 1)], on_done=acks.of("queued"), origin="p0")
    assert stage.consume([queued])
    assert _value(telemetry, "open_traces") == 1
    stage.abandon({"p0"})
    assert acks.done == {"queued": False}
    assert _value(telemetry, "open_traces") == 0
    assert _value(telemetry, "dropped_total", stage="assemble", reason="handed_back") == 1
    await stage.shutdown(5)
    assert consumer.items == []
