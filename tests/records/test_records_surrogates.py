"""A lone UTF-16 surrogate (valid JSON, `"\\ud800"`, not valid UTF-8) costs nothing: it is
repaired where a record is built, so the record is evaluated and every exporter writes it."""

from __future__ import annotations

import json

import orjson

from monitor.config import EvaluatorConfig
from monitor.evaluators.local import LocalGroundedness
from monitor.records import parse_record

LONE = json.loads('"\\ud800"')


def test_every_text_of_a_record_is_repaired_where_it_is_built() -> None:
    record = parse_record(
        {
            "request_id": f"r{LONE}",
            "service": f"shop{LONE}",
            "request": f"When did the bridge open?{LONE}",
            "retrieved_context": [
                {"content": f"The bridge opened in 1931.{LONE}", "doc_uri": LONE}
            ],
            "response": f"It opened in 1931.{LONE}",
            "metadata": {"note": LONE},
        }
    )
    texts = [
        record.request_id,
        record.service,
        record.query or "",
        record.response or "",
        *(d.content for d in record.retrieved_context),
        *(d.doc_uri or "" for d in record.retrieved_context),
        *record.metadata.values(),
    ]
    for text in texts:
        text.encode("utf-8")  # never raises
        assert "\ufffd" in text


def test_a_record_with_a_surrogate_is_scored_and_its_line_written() -> None:
    record = parse_record(
        {
            "request_id": "r",
            "question": "When did the bridge open?",
            "context": ["The bridge opened in 1931."],
            "answer": f"It opened in 1931, {LONE} the records say.",
        }
    )
    result = LocalGroundedness(EvaluatorConfig(name="local_groundedness")).score(record)
    assert result.error is None
    line = orjson.dumps({"request_id": record.request_id, "result": result.as_json()})
    assert b"request_id" in line
