"""Size bounds on record texts (`record_limits`): truncated with a marker or rejected."""

from __future__ import annotations

import pytest

from monitor.records import RecordError, SizeLimits, bound_record, parse_record

LIMITS = SizeLimits(query_chars=10, document_chars=20, context_chars=30, response_chars=40)


def _record(query: str = "q", docs: tuple[str, ...] = ("d",), response: str = "r") -> dict:
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
