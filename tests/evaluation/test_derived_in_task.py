"""What the evaluation task derives where it extracts and scores, so that the ingest
process does not: a record's request fingerprint (what the alert rules take as "the same
question") and its dimension values (what a page attributes a regression to) travel with
the record, which the ingest process then reads instead of
normalising the texts again (a copy of the record with other texts gets its own); and
each result carries its evaluator's revision."""

from __future__ import annotations

import pickle
import random

import pytest

from harness.otlp_load import SPANS_PER_TRACE, build_payload
from monitor.config import EvaluatorConfig, Judge
from monitor.evaluators.revision import revision
from monitor.extraction import TraceRecords
from monitor.processors.evaluation._task import Batch, Job, Settings, build_scorer, run
from monitor.records import CLIENT_ADDRESS, RESOURCE, RagRecord, sender
from monitor.records.fingerprint import request_fingerprint
from monitor.records.where import Where
from monitor.spans import decode_protobuf


def _extracted(metadata: dict[str, str] | None = None) -> RagRecord:
    body, _ = build_payload(random.Random(3))
    spans = decode_protobuf(body, lazy=True).spans[:SPANS_PER_TRACE]
    (outcome,) = run(Batch([Job((), spans=spans, metadata=metadata)]), {}, Settings(), [])
    outcome = pickle.loads(pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL))  # as from a worker
    assert isinstance(outcome.extraction, TraceRecords)
    (record,) = outcome.extraction.records
    return record


def test_the_fingerprint_comes_with_the_extracted_record() -> None:
    record = _extracted()
    carried = record.memo.fingerprint
    assert carried is not None and carried[0] is not None
    # The same value a record never seen before gets, from its texts.
    fresh = RagRecord.model_validate(record.model_dump())
    assert fresh.memo.fingerprint is None
    assert request_fingerprint(fresh) == carried[0] == request_fingerprint(record)
    assert record == fresh  # the memo takes no part in equality


def test_the_dimensions_come_with_the_extracted_record() -> None:
    record = _extracted()
    carried = record.memo.where
    assert carried is not None
    fresh = RagRecord.model_validate(record.model_dump())
    assert fresh.memo.where is None
    assert Where.of(fresh) == carried[1] == Where.of(record)
    other = record.model_copy(update={"query": "Wo ist mein Paket und wann kommt es an?"})
    assert Where.of(other) != carried[1]
    assert Where.of(record) == carried[1]


def test_the_delivery_s_sender_keeps_the_carried_dimensions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A copy of an extracted record with another sender (its delivery's metadata merged
    in) keeps the carried values, with the new sender."""
    record = _extracted()
    assert record.memo.where is not None
    carried = record.memo.where[1]
    assert isinstance(carried, Where)
    metadata = {**record.metadata, CLIENT_ADDRESS: "10.0.0.7"}
    delivered = record.model_copy(update={"metadata": metadata})
    fresh = RagRecord.model_validate(delivered.model_dump())
    expected = Where.of(fresh)
    assert expected.sender == sender(delivered) != carried.sender
    monkeypatch.setattr(Where, "_of", classmethod(lambda cls, r: pytest.fail("derived again")))
    assert Where.of(delivered) == expected
    assert Where.of(record) == carried


def test_the_task_merges_the_delivery_s_metadata_before_it_derives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The delivery's metadata (who sent the trace) is merged into its records where they
    are extracted, so the dimensions they carry name the sender: the ingest process copies
    no record and derives nothing."""
    record = _extracted({CLIENT_ADDRESS: "10.0.0.7"})
    assert record.metadata[CLIENT_ADDRESS] == "10.0.0.7"
    # The sender: the address, then the digest of the spans' resource (no instance id).
    assert sender(record) == f"10.0.0.7/~{record.metadata[RESOURCE]}"
    assert record.memo.where is not None
    carried = record.memo.where[1]
    assert isinstance(carried, Where) and carried.sender == sender(record)
    monkeypatch.setattr(Where, "_of", classmethod(lambda cls, r: pytest.fail("derived again")))
    assert Where.of(record) is carried


def test_a_copy_with_other_texts_gets_its_own_fingerprint() -> None:
    record = _extracted()
    carried = request_fingerprint(record)
    other = record.model_copy(update={"query": "Who designed the kettle?"})
    assert request_fingerprint(other) not in (None, carried)
    assert request_fingerprint(record.model_copy(update={"query": None})) is None
    assert request_fingerprint(record) == carried
    # A copy with only other metadata (the trace's client address) keeps it.
    assert request_fingerprint(record.model_copy(update={"metadata": {"k": "v"}})) == carried


def test_the_task_sets_each_current_result_s_revision() -> None:
    entry = EvaluatorConfig.model_validate({"name": "local_relevance"})
    scorer = build_scorer(entry)
    current = revision(entry, Judge())
    record = _extracted()
    settings = Settings(revisions={entry.name: current})
    (outcome,) = run(
        Batch([Job((entry.name,), record=record, others=(entry.name,))]),
        {entry.name: scorer},
        settings,
        [],
        {entry.name: scorer},
    )
    assert outcome.scored is not None
    ((result, _),) = outcome.scored[0].values()
    assert result.error is None and result.revision == current
    # Another revision's results are not the current revision's.
    ((old, _),) = outcome.others_of(0).values()
    assert old.revision != current
