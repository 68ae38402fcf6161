"""Size bounds on record texts (`record_limits`): truncated with a marker or rejected."""

from __future__ import annotations

import json

import pytest

from harness.pipeline import trace_stage
from harness.wait import wait_until_async
from monitor.component import Delivery
from monitor.config import Config
from monitor.records import RagRecord, RawRecord, RecordError, parse_record
from monitor.records.limits import SizeLimits, bound_record
from monitor.shared.labels import bounded_label
from monitor.telemetry import Telemetry, create_telemetry
from tests.trace.test_trace_stage import Acks, HoldingStage, _root, _running

LIMITS = SizeLimits(query_chars=10, document_chars=20, context_chars=30, response_chars=40)


def _record(
    query: str = "q", docs: tuple[str, ...] = ("d",), response: str = "r"
) -> dict[str, object]:
    return {"request_id": "r1", "question": query, "context": list(docs), "answer": response}


def test_a_record_within_the_limits_is_itself() -> None:
    record = parse_record(_record())
    assert bound_record(record, LIMITS) == (record, ())


def test_a_long_query_and_history_turn_are_truncated_with_a_marker() -> None:
    record = parse_record(
        {
            "request_id": "r1",
            "request": {
                "messages": [
                    {"role": "user", "content": "h" * 25},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "q" * 12},
                ]
            },
            "response": "r",
        }
    )
    bounded, cut = bound_record(record, LIMITS)
    assert cut == ("query",)
    assert bounded.query == "q" * 10 + " [truncated by rag-monitor: 2 characters]"
    assert bounded.history[0].content == "h" * 10 + " [truncated by rag-monitor: 15 characters]"
    assert bounded.history[1].content == "ok"


def test_documents_are_truncated_each_and_dropped_past_the_total() -> None:
    record = parse_record(_record(docs=("a" * 25, "b" * 5, "c" * 10, "d")))
    bounded, cut = bound_record(record, LIMITS)
    assert cut == ("context",)
    contents = bounded.context_text
    # 20 of a (cut), 5 of b, then 5 chars of room: c is cut to 5, d has no room left.
    assert contents == [
        "a" * 20 + " [truncated by rag-monitor: 5 characters]",
        "b" * 5,
        "c" * 5 + " [truncated by rag-monitor: 5 characters]",
    ]


@pytest.mark.parametrize("field", ["answer", "ground_truth"])
def test_a_response_over_its_limit_rejects_the_record(field: str) -> None:
    data = _record()
    data[field] = "x" * 41
    with pytest.raises(RecordError) as info:
        bound_record(parse_record(data), LIMITS)
    assert info.value.reason == "response_too_large"
    assert "41 characters, over the limit of 40" in info.value.detail


def test_the_default_limits_are_generous() -> None:
    record = parse_record(_record("q" * 60_000, ("d" * 200_000,) * 10, "r" * 200_000))
    assert bound_record(record, SizeLimits())[0] is record


async def test_every_record_is_bounded_before_it_is_scored() -> None:
    """Records that arrive as records (Kafka, replay), bounded by the trace stage when
    sampled, and records from spans (OTLP), bounded where they are extracted (the
    evaluation stage's task; here its stand-in, with the same limits): a long query is
    truncated and counted, an oversized answer rejected, named and counted, and every
    delivery still finishes."""
    telemetry = create_telemetry()
    consumer = HoldingStage(limits=LIMITS)
    config = Config()
    stage = trace_stage(config, consumer, telemetry, limits=LIMITS)
    async with _running(stage, consumer):
        acks = Acks()
        rejected: list[tuple[str, str]] = []
        spans = Delivery(
            "otlp_http",
            [_root(1, **{"rag.query": "q" * 15}), _root(2, **{"rag.response": "x" * 41})],
            on_done=acks.of("spans"),
        )
        records = Delivery(
            "kafka",
            records=[RawRecord(_record(query="k" * 11)), RawRecord(_record(response="y" * 50))],
            on_done=acks.of("records"),
            on_rejected=lambda problems: rejected.extend((r, d) for _, r, d in problems),
        )
        assert stage.consume([spans, records])
        await wait_until_async(lambda: len(consumer.items) == 2, 10, "the bounded records")
        queries = sorted(item.record.query or "" for item in consumer.items)
        assert queries == [
            "k" * 10 + " [truncated by rag-monitor: 1 characters]",
            "q" * 10 + " [truncated by rag-monitor: 5 characters]",
        ]
        assert rejected == [
            (
                "response_too_large",
                "response: 50 characters, over the limit of 40 (record_limits.response_chars)",
            )
        ]
        for source in ("otlp_http", "kafka"):
            labels = {"receiver": source, "reason": "response_too_large"}
            assert (
                telemetry.registry.get_sample_value("rag_monitor_records_rejected_total", labels)
                == 1
            )
        assert (
            telemetry.registry.get_sample_value(
                "rag_monitor_records_truncated_total", {"part": "query"}
            )
            == 2
        )
        consumer.finish_all()
        await wait_until_async(lambda: len(acks.done) == 2, 10, "both deliveries finished")
        assert acks.done == {"spans": True, "records": True}


def test_an_id_too_long_for_an_exemplar_is_an_invalid_field() -> None:
    """A trace id travels as a Prometheus exemplar, whose labels hold 128 characters: a
    longer one is refused where the record is built, never by the metrics sink."""
    assert parse_record({**_record(), "trace_id": "AB" * 32}).trace_id == "ab" * 32
    with pytest.raises(RecordError, match=r"trace_id: .*at most 64 hex characters"):
        parse_record({**_record(), "trace_id": "ab" * 100})
    with pytest.raises(RecordError, match=r"span_id: .*at most 64"):
        parse_record({**_record(), "span_id": "0" * 65})


def test_a_long_label_value_is_cut_to_a_prefix_and_a_hash_that_keeps_it_apart() -> None:
    limits = SizeLimits(label_chars=40)
    first, second = "a" * 1000 + "1", "a" * 1000 + "2"
    record = parse_record(
        {**_record(), "service": first, "version": "v" * 41, "route": "/" + "r" * 39}
    )
    bounded, cut = bound_record(record, limits)
    assert cut == ("service", "version")
    assert len(bounded.service) == len(bounded.version or "") == 40
    assert bounded.route == record.route  # exactly at the limit: kept
    assert bounded.service.startswith("a" * 23 + "…")
    # The same value is always cut the same way; two values sharing the prefix differ.
    assert bounded_label(first, 40) == bounded.service
    assert bounded_label(second, 40) != bounded.service
    assert bounded_label("short", 40) == "short"


def test_documents_past_the_bound_are_dropped_and_said() -> None:
    """A record of more documents than `max_documents` keeps the first ones (`documents`
    cut); a record read from JSON builds no more than one document past the bound."""
    limits = SizeLimits(max_documents=3)
    raw = _record(docs=tuple(f"d{i}" for i in range(100_000)))
    record = parse_record(raw, max_documents=3)
    assert len(record.retrieved_context) == 4  # one past: the cut shows
    bounded, cut = bound_record(record, limits)
    assert cut == ("documents",)
    assert bounded.context_text == ["d0", "d1", "d2"]
    assert bound_record(parse_record(_record(docs=("a", "b", "c"))), limits)[1] == ()


async def test_records_of_many_documents_are_cut_where_they_are_built_and_counted() -> None:
    """From spans and from JSON records alike, a record holds at most `max_documents`
    documents, counted in `records_truncated_total{part="documents"}`; long label values
    are counted in `label_values_cut_total`."""
    limits = SizeLimits(max_documents=5, label_chars=40)
    telemetry = create_telemetry()
    consumer = HoldingStage(limits=limits)
    config = Config()
    stage = trace_stage(config, consumer, telemetry, limits=limits)
    many = [f"document {i}" for i in range(10_000)]
    async with _running(stage, consumer):
        spans = Delivery("otlp_http", [_root(1, **{"rag.context": json.dumps(many)})])
        records = Delivery(
            "kafka", records=[RawRecord({**_record(docs=tuple(many)), "route": "/" * 400})]
        )
        assert stage.consume([spans, records])
        await wait_until_async(lambda: len(consumer.items) == 2, 10, "both records")
        assert [len(item.record.retrieved_context) for item in consumer.items] == [5, 5]

    def value(name: str, **labels: str) -> float | None:
        return telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)

    assert value("records_truncated_total", part="documents") == 2
    assert value("label_values_cut_total", label="route") == 1


def test_a_long_conversation_id_is_cut_like_a_label_and_said() -> None:
    """The conversation id is written into every results line of its trace and kept by
    the alert rules: over `label_chars` it is cut to a prefix and a hash (two ids sharing
    the prefix stay apart)."""
    limits = SizeLimits(label_chars=40)
    first = parse_record({**_record(), "conversation": "s" * 1_000_000 + "1"})
    second = parse_record({**_record(), "conversation": "s" * 1_000_000 + "2"})
    (bounded, cut), (other, _) = bound_record(first, limits), bound_record(second, limits)
    assert cut == ("conversation",)
    assert len(bounded.conversation or "") == 40 and bounded.conversation != other.conversation
    short = parse_record({**_record(), "conversation": "c" * 40})
    assert bound_record(short, limits) == (short, ())


async def _through_the_trace_stage(
    attributes: list[dict[str, str]],
) -> tuple[list[RagRecord], Telemetry]:
    """The records of one trace per `attributes` (its root span's) through the trace stage
    with `label_chars` 64, and its telemetry."""
    telemetry = create_telemetry()
    limits = SizeLimits(label_chars=64)
    consumer = HoldingStage(limits=limits)
    config = Config.model_validate({"trace_assembly": {"late_spans_wait_s": 0}})
    stage = trace_stage(config, consumer, telemetry, limits=limits)
    async with _running(stage, consumer):
        for n, attrs in enumerate(attributes, start=1):
            assert stage.consume([Delivery("otlp_http", [_root(n, **attrs)])])
        await wait_until_async(lambda: len(consumer.items) == len(attributes), 10, "the records")
        records = [item.record for item in consumer.items]
        consumer.finish_all()
    return records, telemetry


def _truncated(telemetry: Telemetry, part: str) -> float | None:
    return telemetry.registry.get_sample_value(
        "rag_monitor_records_truncated_total", {"part": part}
    )


async def test_a_conversation_id_from_spans_is_cut_and_counted() -> None:
    """A 1 MB `session.id` on a trace's span: its record carries the cut id and the cut is
    counted (`records_truncated_total{part="conversation"}`)."""
    session = "s" * 1_000_000
    (record,), telemetry = await _through_the_trace_stage([{"session.id": session}])
    assert record.conversation == bounded_label(session, 64)
    assert _truncated(telemetry, "conversation") == 1


async def test_a_user_id_from_spans_is_cut_and_counted() -> None:
    """A 1 MB `user.id` on a trace's span, written into every results line of its trace as
    the record's `metadata["user.id"]`: cut like a label (two ids sharing the prefix stay
    apart) and counted (`records_truncated_total{part="user_id"}`)."""
    users = ["u" * 1_000_000 + "1", "u" * 1_000_000 + "2", "u" * 64]
    records, telemetry = await _through_the_trace_stage([{"user.id": user} for user in users])
    got = sorted(record.metadata["user.id"] for record in records)
    assert got == sorted([bounded_label(users[0], 64), bounded_label(users[1], 64), users[2]])
    assert got[0] != got[1]
    assert _truncated(telemetry, "user_id") == 2
