"""A question's topic (`monitor.detector.topics`): the closest named topic in the
detector's word vectors, the same in every process, none when nothing is close; and the
worker gives extracted records theirs when alert rules ask for it."""

from __future__ import annotations

import pytest

from monitor.detector.topics import question_topic
from monitor.extraction import TraceRecords
from monitor.processors.evaluation._task import _with_topics
from monitor.records import RagRecord


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("How do I get a refund for my order?", "orders"),
        ("What payment methods do you accept?", "payments"),
        ("When will my package be delivered?", "shipping"),
        ("Where is my parcel, it has not arrived", "shipping"),
        ("I forgot my password, how do I reset it?", "account"),
        ("How do I change the email on my account?", "account"),
        ("Is the kettle covered by the warranty?", "warranty"),
        ("My blender broke, will you repair it?", "warranty"),
        ("What are the symptoms of flu?", "health"),
        ("Which river flows through Vienna?", "geography"),
    ],
)
def test_questions_of_a_kind_get_its_topic(question: str, topic: str) -> None:
    assert question_topic(question) == topic


def test_a_question_near_no_topic_has_none() -> None:
    assert question_topic("Wie lange dauert der Versand?") == ""
    assert question_topic("?") == ""


def test_extracted_records_carry_their_questions_topic() -> None:
    records = [
        RagRecord(request_id="a", query="Is the kettle covered by the warranty?"),
        RagRecord(request_id="b", response="no question"),
    ]
    done = _with_topics(TraceRecords(records, [], []))
    assert done.records[0].metadata["topic"] == "warranty"
    assert "topic" not in done.records[1].metadata
