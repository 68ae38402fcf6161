"""Kafka receiver pieces without a broker: offset bookkeeping and message decoding."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from monitor.component import ACCEPTED, Accepted, Delivery
from monitor.config import ConfigError
from monitor.config import KafkaConfig as KafkaSettings
from monitor.receivers.kafka import KafkaReceiver, client_options
from monitor.receivers.kafka._dead_letter import DeadLetters
from monitor.receivers.kafka._loop import StageThroughLoop
from monitor.receivers.kafka._messages import Decoded, Encoding, Rejection, decode_message
from monitor.receivers.kafka._offsets import (
    FINISHED_PREFIX,
    MAX_METADATA_CHARS,
    PartitionTracker,
    finished_metadata,
    parse_finished,
)
from monitor.records import RawRecord, RecordError, parse_record
from monitor.telemetry import create_telemetry


def test_commit_point_is_the_contiguous_finished_prefix() -> None:
    tracker = PartitionTracker("t", 0)
    tracker.add(10, 2)
    tracker.add(11, 1)
    tracker.add(12, 0)  # a message with nothing to evaluate (all rejected, no DLQ)
    assert tracker.committable is None
    tracker.finish(11)
    assert tracker.committable is None  # 10 still owes two records
    tracker.finish(10)
    assert tracker.committable is None
    tracker.finish(10)
    assert tracker.committable == 13
    tracker.committed = 13
    assert tracker.committable is None
    assert tracker.outstanding == 0


def test_a_held_message_owes_what_it_adds_and_lag_counts_from_it() -> None:
    """A message is registered (held by one unit) before it is taken apart; what it then
    owes is added to it, and nothing after it commits until it has finished."""
    tracker = PartitionTracker("t", 0)
    tracker.add(5, 1)  # the hold
    tracker.add(6, 0)
    tracker.owe(5, 2)
    tracker.finish(5)  # released the hold; still owes 2
    assert tracker.committable is None
    assert tracker.first_unfinished == 5
    tracker.finish(5, 2)
    assert tracker.committable == 7
    assert tracker.first_unfinished is None


def test_unknown_and_extra_completions_are_ignored() -> None:
    tracker = PartitionTracker("t", 0)
    tracker.add(0, 1)
    tracker.finish(5)
    tracker.finish(0)
    tracker.finish(0)
    assert tracker.committable == 1
    assert tracker.outstanding == 0


def commit(tracker: PartitionTracker) -> int | None:
    """Commit what is committable, as the consumer does; the offset committed so far."""
    if tracker.committable is not None:
        tracker.committed = tracker.committable
    return tracker.committed


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=40), st.randoms())
def test_never_commits_past_an_unfinished_message(units: list[int], rnd: object) -> None:
    tracker = PartitionTracker("t", 0)
    for offset, count in enumerate(units):
        tracker.add(offset, count)
    pending = [offset for offset, count in enumerate(units) for _ in range(count)]
    rnd.shuffle(pending)  # type: ignore[attr-defined]
    remaining = {offset: count for offset, count in enumerate(units)}
    for offset in pending:
        tracker.finish(offset)
        remaining[offset] -= 1
        first_open = next((o for o in range(len(units)) if remaining[o]), len(units))
        assert (commit(tracker) or 0) <= first_open
        if first_open > 0:
            assert commit(tracker) == first_open
    assert commit(tracker) == len(units)


def _otlp_request() -> bytes:
    span = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="root")
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])]
    )
    return request.SerializeToString()


OTLP_JSON_SPAN = {
    "traceId": "0102030405060708090a0b0c0d0e0f10",
    "spanId": "0102030405060708",
    "name": "root",
}
RESOURCE_SPANS = [{"resource": {}, "scopeSpans": [{"spans": [OTLP_JSON_SPAN]}]}]


def test_auto_detects_each_encoding() -> None:
    record = {"question": "q", "context": ["c"], "answer": "a"}
    assert len(decode_message(json.dumps(record).encode(), "auto").records) == 1
    assert len(decode_message(json.dumps([record, record]).encode(), "auto").records) == 2
    assert len(decode_message(b"\n  " + json.dumps(record).encode(), "auto").records) == 1
    proto = decode_message(_otlp_request(), "auto")
    assert proto.spans is not None and proto.spans[0].trace_id.startswith("0102")
    wrapped = decode_message(json.dumps({"resourceSpans": RESOURCE_SPANS}).encode(), "auto")
    bare = decode_message(json.dumps(RESOURCE_SPANS).encode(), "auto")
    assert wrapped.spans == bare.spans and bare.spans and not bare.problems


def test_explicit_encodings_reject_the_other_formats() -> None:
    record = json.dumps({"question": "q", "context": ["c"], "answer": "a"}).encode()
    assert [p.reason for p in decode_message(_otlp_request(), "json").problems] == ["bad_json"]
    assert decode_message(record, "otlp_proto").problems[0].reason == "bad_protobuf"
    assert decode_message(record, "otlp_json").problems[0].reason == "empty"
    assert decode_message(json.dumps(RESOURCE_SPANS).encode(), "otlp_json").spans


def test_bad_messages_name_their_problem() -> None:
    cases = {
        b"": "empty",
        b"plain text": "unknown_encoding",
        b"{broken": "bad_json",
        b"\x0a\xff\xff": "bad_protobuf",
        b"[]": "empty",
        b"42": "not_object",
        b"[42]": "not_object",
    }
    for raw, reason in cases.items():
        problems = decode_message(raw, "auto").problems
        assert [p.reason for p in problems] == [reason], raw


@pytest.mark.parametrize("encoding", ["auto", "json"])
def test_json_that_is_not_a_record_object_says_what_it_is(encoding: Encoding) -> None:
    cases = {
        b'"' + b"x" * 100_000 + b'"': "a JSON string where a record object was expected",
        b" 42": "a JSON number where a record object was expected",
        b"null": "JSON null where a record object was expected",
        b"true": "a JSON boolean where a record object was expected",
        b'[{"question": "q"}, "a"]': "record 1: a JSON string where a record object was expected",
    }
    for raw, detail in cases.items():
        problems = decode_message(raw, encoding).problems
        assert [(p.reason, p.detail) for p in problems] == [("not_object", detail)], raw[:20]


def test_records_are_validated_when_parsed_and_name_their_problem() -> None:
    """A JSON record is checked for being an object when decoded, and against the record
    schema only when parsed (the trace stage parses the sampled ones)."""
    cases = {
        json.dumps({"question": "q"}).encode(): "no_response",
        json.dumps({"foo": 1}).encode(): "unknown_shape",
        json.dumps({"question": "q", "answer": 3}).encode(): "invalid_field",
    }
    for raw, reason in cases.items():
        decoded = decode_message(raw, "auto")
        assert decoded.problems == [] and len(decoded.records) == 1, raw
        with pytest.raises(RecordError) as problem:
            decoded.records[0].parse()
        assert problem.value.reason == reason, raw


def test_a_raw_record_reads_what_sampling_needs_as_the_parsed_record_has_it() -> None:
    shapes: list[dict[str, object]] = [
        {"request_id": "r-1", "service": "shop", "route": "/ask", "request": "q", "response": "a"},
        {"trace_id": "ABCDEF0123456789abcdef0123456789", "question": "q", "answer": "a",
         "feedback": "negative", "error": True},
        {"question": "no id at all", "context": ["c"], "answer": "a"},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
         "service": "chat"},
    ]  # fmt: skip
    for data in shapes:
        raw, parsed = RawRecord(data), parse_record(data)
        assert (raw.sampling_key, raw.service, raw.route, raw.feedback, raw.error) == (
            parsed.sampling_key,
            parsed.service,
            parsed.route,
            parsed.feedback,
            parsed.error,
        ), data


def test_security_options_are_passed_through_and_the_password_comes_from_the_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = KafkaSettings(
        enabled=True,
        bootstrap_servers=["broker:9093"],
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="monitor",
        sasl_password_env="KAFKA_TEST_PASSWORD",
        ssl_cafile="/etc/kafka/ca.pem",
    )
    monkeypatch.delenv("KAFKA_TEST_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="KAFKA_TEST_PASSWORD is not set"):
        client_options(cfg)
    monkeypatch.setenv("KAFKA_TEST_PASSWORD", "s3cret")
    options = client_options(cfg)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("monitor", "s3cret")
    assert options["ssl_cafile"] == "/etc/kafka/ca.pem"
    assert "ssl_certfile" not in options


def test_a_run_commits_through_its_last_message_only_once_it_finishes() -> None:
    tracker = PartitionTracker("t", 0)
    tracker.add(3, 1)  # a run of 3..6, handed on as one delivery
    tracker.stretch(3, 6)
    tracker.add(7, 1)  # a message on its own
    tracker.finish(7)
    assert tracker.committable is None  # 3..6 not finished
    assert tracker.first_unfinished == 3
    tracker.finish(3)
    assert tracker.committable == 8
    assert tracker.first_unfinished is None


@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=2)),
        min_size=1,
        max_size=30,
    ),
    st.randoms(),
)
def test_runs_never_commit_past_an_unfinished_message(
    entries: list[tuple[int, int]], rnd: object
) -> None:
    """Entries of 1-4 messages (runs) owing 0-2 units, finished in any order: the commit
    point is always one past the last message of the finished prefix of entries."""
    tracker = PartitionTracker("t", 0)
    starts, ends, offset = [], [], 0
    for length, units in entries:
        tracker.add(offset, units)
        if units:  # an entry owing nothing is finished (and may be gone) at once
            tracker.stretch(offset, offset + length - 1)
        starts.append(offset)
        ends.append(offset + length - 1 if units else offset)
        offset = ends[-1] + 1
    pending = [i for i, (_, units) in enumerate(entries) for _ in range(units)]
    rnd.shuffle(pending)  # type: ignore[attr-defined]
    remaining = [units for _, units in entries]
    for i in pending:
        tracker.finish(starts[i])
        remaining[i] -= 1
        first_open = next((j for j, left in enumerate(remaining) if left), None)
        expected = offset if first_open is None else starts[first_open]
        assert tracker.first_unfinished == (None if first_open is None else expected)
        if first_open != 0:
            assert commit(tracker) == expected
    assert commit(tracker) == offset


class _Stage:
    """Takes every delivery and keeps it, for the test to finish."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.waiting_in_traces = 0  # what `holds` answers
        self.handed_back: list[set[Hashable]] = []
        self.suspended: list[set[Hashable]] = []
        self.resumed: list[set[Hashable]] = []
        self.on_abandon: Callable[[], None] = lambda: None  # as the stage settles them

    def refuses(self) -> bool:
        return False

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted:
        self.deliveries.extend(deliveries)
        return ACCEPTED

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        return bool(self.consume(deliveries))

    def flush(self) -> None:
        pass

    def holds(self, origins: Collection[Hashable]) -> int:
        return self.waiting_in_traces

    def suspend(self, origins: Collection[Hashable]) -> None:
        self.suspended.append(set(origins))

    def resume(self, origins: Collection[Hashable]) -> None:
        self.resumed.append(set(origins))

    def abandon(self, origins: Collection[Hashable]) -> None:
        self.handed_back.append(set(origins))
        self.on_abandon()


def _message(offset: int, value: bytes) -> ConsumerRecord:
    return ConsumerRecord(
        "in", 0, 0, offset, 0, 0, b"key", value, [("tenant", b"acme")], None, 3, len(value), 0
    )


def test_one_record_messages_go_on_in_runs_and_commit_as_their_runs_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Consecutive one-record messages are one delivery, registered at their first
    offset; any other message goes on alone (or, rejected, not at all). Every message is
    decoded once; each record carries its own message's provenance, an invalid record is
    dead-lettered as its own message, and the commit point passes a run only once it and
    its dead letters are finished."""

    def record(i: int) -> bytes:
        return json.dumps({"request_id": f"r{i}", "response": "a"}).encode()

    values = [
        record(0),
        record(1),
        b"not json",
        record(3),
        _otlp_request(),
        json.dumps([5, {"request_id": "a1", "response": "a"}, {"request_id": "a2"}]).encode(),
        record(6),
        record(7),
    ]
    decodes: list[bytes] = []

    def counted_decode(value: bytes, encoding: Encoding) -> Decoded:
        decodes.append(value)
        return decode_message(value, encoding)

    sent: list[tuple[int, list[Rejection], Callable[[], None]]] = []

    def send(_: object, message: ConsumerRecord, problems: list[Rejection], done: Any) -> None:
        sent.append((message.offset, problems, done))

    monkeypatch.setattr("monitor.receivers.kafka._intake.decode_message", counted_decode)
    monkeypatch.setattr(DeadLetters, "send", send)
    stage = _Stage()
    receiver = KafkaReceiver(
        KafkaSettings(
            enabled=True, bootstrap_servers=["127.0.0.1:1"], topics=["in"], dead_letter_topic="dl"
        ),
        stage,
        create_telemetry(),
    )
    tracker = PartitionTracker("in", 0)
    batch: list[tuple[PartitionTracker, Delivery]] = []
    receiver._intake.take([_message(i, v) for i, v in enumerate(values)], tracker, batch)
    receiver._hand_over(batch)
    assert decodes == values
    runs = [[r.sampling_key for r in d.records] for d in stage.deliveries]
    assert runs == [["r0", "r1"], ["r3"], [], ["a1", "a2"], ["r6", "r7"]]
    assert stage.deliveries[2].spans and stage.deliveries[2].metadata is not None
    assert stage.deliveries[2].metadata["kafka.offset"] == "4"
    assert receiver.in_flight == 5
    expected: tuple[list[int], ...] = ([0, 1], [3], [], [5, 5], [6, 7])
    for delivery, offsets in zip(stage.deliveries, expected, strict=True):
        metadata = [r.metadata for r in delivery.records]
        assert [m["kafka.offset"] for m in metadata if m is not None] == [str(o) for o in offsets]
        assert all(m is not None and m["kafka.header.tenant"] == "acme" for m in metadata)
    # Rejected while taken apart: not JSON, and the array's non-object.
    assert [(offset, [p.reason for p in problems]) for offset, problems, _ in sent] == [
        (2, ["unknown_encoding"]),
        (5, ["not_object"]),
    ]
    # The trace stage finds sampled records invalid: each goes to its own message.
    first_run, array = stage.deliveries[0], stage.deliveries[3]
    assert first_run.on_rejected is not None and array.on_rejected is not None
    r1, a2 = first_run.records[1], array.records[1]
    assert isinstance(r1, RawRecord) and isinstance(a2, RawRecord)
    first_run.on_rejected([(r1, "no_response", "response: missing")])
    array.on_rejected([(a2, "no_response", "response: missing")])
    assert [(offset, problems[0].detail) for offset, problems, _ in sent[2:]] == [
        (1, "response: missing"),
        (5, "record 2: response: missing"),
    ]
    first, third, spans, array_done, last = (d.on_done for d in stage.deliveries)
    assert first and third and spans and array_done and last
    last(True)
    receiver._collect_done()
    assert tracker.committable is None  # 0..1 still open
    first(True)
    receiver._collect_done()
    assert tracker.committable is None  # 0..1 still owes the dead letter of 1
    for _, _, done in sent:
        done()
    receiver._collect_done()
    assert tracker.committable == 3  # 0, 1 and the rejected 2
    third(True)
    spans(True)
    array_done(False)  # abandoned: re-delivered, never passed
    receiver._collect_done()
    assert tracker.committable == 5
    assert receiver.in_flight == 0


def test_source_metadata_merges_over_the_records_own_and_leaves_a_malformed_one_to_validation() -> (
    None
):
    source = {"kafka.offset": "7"}
    base = {"request_id": "r", "response": "a"}
    assert parse_record(base, metadata=source).metadata == source
    own = parse_record({**base, "metadata": {"tenant": "acme"}}, metadata=source)
    assert own.metadata == {"tenant": "acme", "kafka.offset": "7"}
    malformed: object
    for malformed in (None, [], ""):
        with pytest.raises(RecordError) as err:
            parse_record({**base, "metadata": malformed}, metadata=source)
        assert err.value.reason == "invalid_field"


class _StaleAssignmentConsumer:
    """kafka-python between a revocation and the next assignment: `assignment()` still
    lists the partitions just revoked (the scripted fault)."""

    def __init__(self, partitions: set[TopicPartition]) -> None:
        self.partitions = partitions

    def metrics(self) -> dict[str, Any]:
        return {}

    def assignment(self) -> set[TopicPartition]:
        return self.partitions

    def highwater(self, tp: TopicPartition) -> int:
        return 10

    def position(self, tp: TopicPartition, timeout_ms: int) -> int:
        return 4


def test_lag_series_follow_the_rebalance_callbacks_not_the_clients_assignment_set() -> None:
    telemetry = create_telemetry()
    receiver = KafkaReceiver(
        KafkaSettings(enabled=True, bootstrap_servers=["127.0.0.1:1"], topics=["in"]),
        _Stage(),
        telemetry,
    )

    def lag(partition: int) -> float | None:
        labels = {"topic": "in", "partition": str(partition)}
        return telemetry.registry.get_sample_value("rag_monitor_kafka_lag", labels)

    both = {TopicPartition("in", 0), TopicPartition("in", 1)}
    client = _StaleAssignmentConsumer(both)
    receiver._on_assigned(both)
    receiver._refresh_status(client)
    assert lag(0) == 6 and lag(1) == 6
    _revoke(receiver, both)
    receiver._refresh_status(client)
    assert lag(0) is None and lag(1) is None
    receiver._on_assigned({TopicPartition("in", 0)})
    client.partitions = {TopicPartition("in", 0)}
    receiver._refresh_status(client)
    assert lag(0) == 6 and lag(1) is None


def test_a_partition_given_away_hands_its_open_traces_back_and_one_given_back_keeps_them() -> None:
    """Eager rebalancing revokes every partition, then assigns: the one given straight back
    carries on with its tracker (the client kept its read position); the one given away is
    handed back to the trace stage, and its message held by an open trace is never
    finished, so no commit passes it."""
    stage = _Stage()
    receiver = KafkaReceiver(
        KafkaSettings(enabled=True, bootstrap_servers=["127.0.0.1:1"], topics=["in"]),
        stage,
        create_telemetry(),
    )
    p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    receiver._on_assigned({p0, p1})
    kept, given = receiver._tracker(p0), receiver._tracker(p1)
    for tracker in (kept, given):
        tracker.add(5, 1)  # a message whose spans wait in an open trace
    stage.waiting_in_traces = 2  # so the revoke does not wait out its grace for them
    # The stage settles the handed-back message as not finished, before `abandon` returns.
    stage.on_abandon = lambda: receiver._delivered(given, 5, False)
    _revoke(receiver, {p0, p1})
    assert stage.handed_back == []  # not before the assignment says which come back
    # Meanwhile their open traces wait, however long the rejoin takes.
    assert stage.suspended == [{kept, given}]
    receiver._on_assigned({p0})
    assert stage.handed_back == [{given}]
    assert stage.resumed == [{kept}]
    assert receiver._trackers == {p0: kept}
    assert given.revoked and not kept.revoked
    # Nothing is left to wait for on it, and the committable offset does not pass it.
    assert given.outstanding == 0 and given.committable is None
    assert kept.outstanding == 1
    fresh = PartitionTracker("in", 2)
    fresh.add(5, 1)
    fresh.add(6, 1)
    fresh.drop(5)
    fresh.finish(6)
    assert fresh.outstanding == 0 and fresh.committable is None


def _revoke(receiver: KafkaReceiver, revoked: set[TopicPartition]) -> tuple[int, Any]:
    """Runs a revoke to its end as the listener does, without waiting between its looks:
    (how many looks it waited for, the commit it sent)."""
    revoking, waits = receiver._on_revoked(revoked), 0
    while True:
        try:
            next(revoking)
        except StopIteration as done:
            return waits, done.value
        waits += 1


class _CommittingClient:
    def __init__(self) -> None:
        self.sent: list[dict[TopicPartition, Any]] = []

    def commit_async(self, offsets: dict[TopicPartition, Any]) -> str:
        self.sent.append(offsets)
        return "the commit's future"


def test_a_revoke_waits_for_messages_in_flight_in_the_clients_loop_never_blocking_it() -> None:
    """A revoke gives the messages in flight a grace to finish before it commits. Between
    its looks at them it yields to kafka-python's IO loop (the listener awaits the loop's
    own sleep), so heartbeats go on; a blocking sleep would hold every task of that loop,
    the group's heartbeats included. Once they finish, it commits through them."""
    from kafka.net.selector import KernelEvent

    from monitor.receivers.kafka._rebalance import Listener

    stage = _Stage()
    receiver = _receiver(stage)
    p0 = TopicPartition("in", 0)
    receiver._on_assigned({p0})
    tracker = receiver._tracker(p0)
    client = _CommittingClient()
    receiver._consumer = client
    tracker.add(5, 1)  # a message in flight, not waiting in an open trace
    revoking = receiver._on_revoked({p0})
    assert next(revoking) > 0 and next(revoking) > 0  # still in flight: it waits
    assert client.sent == []
    receiver._delivered(tracker, 5, True)  # the evaluation finishes
    with pytest.raises(StopIteration) as done:
        next(revoking)
    assert done.value.value == "the commit's future"
    assert [{tp: o.offset for tp, o in sent.items()} for sent in client.sent] == [{p0: 6}]

    # The listener hands each wait to the client's loop as that loop's sleep event.
    receiver._on_assigned({p0})
    receiver._tracker(p0).add(9, 1)
    listening = Listener(receiver).on_partitions_revoked({p0})
    event = listening.send(None)
    assert isinstance(event, KernelEvent) and event.method == "_sleep"
    listening.close()


def _receiver(stage: _Stage) -> KafkaReceiver:
    return KafkaReceiver(
        KafkaSettings(enabled=True, bootstrap_servers=["127.0.0.1:1"], topics=["in"]),
        stage,
        create_telemetry(),
    )


def test_a_commit_names_what_finished_past_its_offset_and_the_next_reader_skips_it() -> None:
    """Messages finished behind an unfinished one (an open trace's) travel in the commit's
    metadata; the partition's next reader, from the committed offset, hands on only what
    is left: the open trace's message, read again whole."""
    tracker = PartitionTracker("in", 0)
    tracker.add(10, 1)  # held by an open trace
    tracker.add(11, 1)
    tracker.stretch(11, 13)  # a run
    tracker.add(14, 1)
    tracker.add(15, 1)
    tracker.finish(11)
    tracker.finish(15)
    assert tracker.committable is None  # the prefix has not moved
    point = tracker.commit_point()
    assert point == (10, FINISHED_PREFIX + "11-13,15")
    tracker.committed, tracker.committed_metadata = point
    assert tracker.commit_point() is None  # nothing changed since
    tracker.finish(14)
    assert tracker.commit_point() == (10, FINISHED_PREFIX + "11-15")

    stage = _Stage()
    receiver = _receiver(stage)
    following = PartitionTracker("in", 0)
    following.skip = parse_finished(FINISHED_PREFIX + "11-13,15", 10)
    batch: list[tuple[PartitionTracker, Delivery]] = []
    record = json.dumps({"request_id": "r", "response": "a"}).encode()
    receiver._intake.take([_message(i, record) for i in range(10, 17)], following, batch)
    receiver._hand_over(batch)
    offsets = [[(r.metadata or {})["kafka.offset"] for r in d.records] for d in stage.deliveries]
    assert offsets == [["10"], ["14"], ["16"]]
    for delivery in stage.deliveries:
        assert delivery.on_done is not None
        delivery.on_done(True)
    receiver._collect_done()
    assert following.committable == 17


def test_messages_delivered_again_to_the_same_reader_are_not_taken_twice() -> None:
    """A client whose position went back (a partition given straight back after a failed
    commit) delivers messages again: they are registered once, their deliveries once."""
    stage = _Stage()
    receiver = _receiver(stage)
    tracker = PartitionTracker("in", 0)
    spans = [_message(i, _otlp_request()) for i in range(4)]
    batch: list[tuple[PartitionTracker, Delivery]] = []
    receiver._intake.take(spans[:3], tracker, batch)
    receiver._intake.take(spans[1:], tracker, batch)
    receiver._hand_over(batch)
    assert [d.metadata["kafka.offset"] for d in stage.deliveries if d.metadata] == [
        "0",
        "1",
        "2",
        "3",
    ]
    for delivery in stage.deliveries:
        assert delivery.on_done is not None
        delivery.on_done(True)
    receiver._collect_done()
    assert tracker.committable == 4 and tracker.outstanding == 0


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), max_size=400))
def test_finished_metadata_round_trips_within_the_brokers_limit(
    gaps: list[tuple[int, int]],
) -> None:
    ranges, offset = [], 100
    for gap, length in gaps:
        first = offset + gap + 1
        ranges.append((first, first + length))
        offset = first + length + 1
    metadata = finished_metadata(ranges)
    assert len(metadata) <= MAX_METADATA_CHARS
    parsed = parse_finished(metadata, 100)
    assert parsed == ranges[: len(parsed)]  # the nearest ones, when not all fit
    assert len(parsed) == len(ranges) or len(metadata) > MAX_METADATA_CHARS - 30


@pytest.mark.parametrize(
    "metadata",
    [None, "", "someone else's", FINISHED_PREFIX + "5-3", FINISHED_PREFIX + "a-b",
     FINISHED_PREFIX + "2-4", FINISHED_PREFIX + "9" * 5000, FINISHED_PREFIX + "11,,12"],
)  # fmt: skip
def test_metadata_that_is_not_ours_or_not_well_formed_skips_nothing(metadata: str | None) -> None:
    assert parse_finished(metadata, 10) == []


class _LoopStage(_Stage):
    """Notes the thread each call runs in."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted:
        self.threads.append(threading.get_ident())
        return super().consume(deliveries)

    def holds(self, origins: Collection[Hashable]) -> int:
        self.threads.append(threading.get_ident())
        return len(origins)


async def test_the_consumer_thread_reaches_the_trace_stage_on_the_event_loop() -> None:
    """What the consumer thread asks of the trace stage runs on the event loop, where the
    stage lives, and the thread gets the answer; a call made on the loop runs there at
    once; once the loop is closed a call answers what a stopped stage would."""
    stage = _LoopStage()
    through = StageThroughLoop(stage, create_telemetry(), answer_within_s=3600)
    through.loop = asyncio.get_running_loop()
    delivery = Delivery("kafka", records=[RawRecord({"request_id": "r", "response": "a"})])

    def from_the_consumer_thread() -> tuple[bool, int]:
        return bool(through.consume([delivery])), through.holds(["p0", "p1"])

    assert await asyncio.to_thread(from_the_consumer_thread) == (True, 2)
    assert through.holds(["p0"]) == 1  # on the loop itself: no round trip to wait for
    assert stage.threads == [threading.get_ident()] * 3
    assert stage.deliveries == [delivery]

    closed = asyncio.new_event_loop()
    closed.close()
    through.loop = closed
    refused = await asyncio.to_thread(through.consume, [delivery])
    assert not refused and await asyncio.to_thread(through.holds, ["p0"]) == 0
    assert stage.deliveries == [delivery]


async def test_a_call_the_loop_does_not_start_in_time_is_withdrawn_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop blocked past the deadline: the consumer thread stops waiting, answers what a
    stopped stage would, counts and logs the call; once the loop runs again the withdrawn
    call does not reach the stage."""
    stage = _LoopStage()
    telemetry = create_telemetry()
    through = StageThroughLoop(stage, telemetry, answer_within_s=0.01)
    loop = asyncio.get_running_loop()
    through.loop = loop
    delivery = Delivery("kafka", records=[RawRecord({"request_id": "r", "response": "a"})])
    blocked, release = threading.Event(), threading.Event()

    def block_the_loop() -> None:
        blocked.set()
        release.wait()

    def from_the_consumer_thread() -> bool:
        blocked.wait()
        try:
            return bool(through.consume([delivery]))
        finally:
            release.set()

    answered = asyncio.ensure_future(asyncio.to_thread(from_the_consumer_thread))
    await asyncio.sleep(0)  # the thread's start is scheduled before the loop blocks
    loop.call_soon(block_the_loop)
    assert await answered is False
    await asyncio.sleep(0)  # the withdrawn call's turn on the loop
    assert stage.deliveries == []
    expired = telemetry.registry.get_sample_value(
        "rag_monitor_kafka_stage_calls_expired_total", {"call": "consume"}
    )
    assert expired == 1
    assert any("consume call" in r.getMessage() for r in caplog.records)


async def test_orders_run_on_the_loop_in_the_order_sent_before_a_later_question() -> None:
    """Suspend, resume, hand back and flush are orders: the consumer thread does not wait
    for them (they are never withdrawn, however long the loop is blocked), and the loop
    runs them in the order sent, before a question asked after them."""
    seen: list[str] = []

    class Ordered(_LoopStage):
        def suspend(self, origins: Collection[Hashable]) -> None:
            seen.append("suspend")

        def resume(self, origins: Collection[Hashable]) -> None:
            seen.append("resume")

        def abandon(self, origins: Collection[Hashable]) -> None:
            seen.append("abandon")

        def flush(self) -> None:
            seen.append("flush")

        def holds(self, origins: Collection[Hashable]) -> int:
            seen.append("holds")
            return len(origins)

    through = StageThroughLoop(Ordered(), create_telemetry(), answer_within_s=3600)
    loop = asyncio.get_running_loop()
    through.loop = loop
    blocked, release = threading.Event(), threading.Event()

    def block_the_loop() -> None:
        blocked.set()
        release.wait()

    def from_the_consumer_thread() -> int:
        blocked.wait()
        through.suspend(["p0"])
        through.resume(["p0"])
        through.abandon(["p1"])
        through.flush()
        assert seen == []  # sent while the loop is blocked, and not waited for
        release.set()
        return through.holds(["p0"])

    answered = asyncio.ensure_future(asyncio.to_thread(from_the_consumer_thread))
    await asyncio.sleep(0)
    loop.call_soon(block_the_loop)
    assert await answered == 1
    assert seen == ["suspend", "resume", "abandon", "flush", "holds"]


class _PausingClient:
    """kafka-python's pause bookkeeping, scripted: a partition an assignment gives straight
    back keeps its pause (kafka-python keeps its state), a new one starts unpaused."""

    def __init__(self, partitions: set[TopicPartition]) -> None:
        self.assigned = set(partitions)
        self.stopped: set[TopicPartition] = set()

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def paused(self) -> set[TopicPartition]:
        return self.stopped & self.assigned

    def pause(self, *partitions: TopicPartition) -> None:
        self.stopped |= set(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.stopped -= set(partitions)

    def rebalance(self, assigned: set[TopicPartition]) -> None:
        self.assigned = set(assigned)
        self.stopped &= self.assigned


def test_a_partition_given_straight_back_while_paused_is_read_again_once_the_work_finishes() -> (
    None
):
    """A replica whose pipeline is full when the group rebalances (a replica joins, another
    leaves) is paused; the partition it keeps stays paused in the client. Once the work in
    flight finishes, every partition it owns is read again, the kept one with the new one;
    while the work is still over half the bound, the new one is paused with the kept one."""
    stage = _Stage()
    receiver = KafkaReceiver(
        KafkaSettings(enabled=True, bootstrap_servers=["127.0.0.1:1"], topics=["in"]),
        stage,
        create_telemetry(),
        max_in_flight=4,
    )
    p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    client = _PausingClient({p0, p1})
    receiver._on_assigned({p0, p1})
    tracker = receiver._tracker(p0)
    for offset in range(4):  # four deliveries in flight: the bound
        batch: list[tuple[PartitionTracker, Delivery]] = []
        value = json.dumps({"request_id": f"r{offset}", "response": "a"}).encode()
        receiver._intake.take([_message(offset, value)], tracker, batch)
        receiver._hand_over(batch)
    receiver._backpressure(client)
    assert client.paused() == {p0, p1} and receiver.paused
    stage.waiting_in_traces = 4  # the revoke does not wait out its grace for them
    _revoke(receiver, {p0, p1})
    client.rebalance({p0})  # given straight back, still paused
    receiver._on_assigned({p0})
    first, *rest = stage.deliveries
    assert first.on_done is not None
    first.on_done(True)
    receiver._collect_done()
    receiver._backpressure(client)
    assert client.paused() == {p0}  # over half the bound still in flight: still paused
    client.rebalance({p0, p1})  # the next rebalance adds a partition, unpaused
    receiver._on_assigned({p1})
    receiver._backpressure(client)
    assert client.paused() == {p0, p1} and receiver.paused
    for delivery in rest:
        assert delivery.on_done is not None
        delivery.on_done(True)
    receiver._collect_done()
    receiver._backpressure(client)
    assert client.paused() == set() and not receiver.paused
