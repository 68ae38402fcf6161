"""A sampled trace turned into its records, a failure kept to its own trace
(`extract_trace`), and those records within the size limits (`extract_within`). The rule
itself: `_extraction_rule.py`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from monitor.conventions import Convention
from monitor.extraction._diagnosis import Cause, causes
from monitor.extraction._extraction_rule import extract_records
from monitor.extraction._verdicts import TraceVerdicts
from monitor.records import RagRecord, RecordError
from monitor.records.limits import Cut, SizeLimits, bound_record
from monitor.spans import DecodeError, Span


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Why a sampled trace gave no records although it may be a RAG trace: `bad_protobuf`
    (an attribute value that is not valid protobuf, found when first read) or
    `extract_failed` (building a record failed, or the process extracting it was lost),
    or `extract_timeout` (its extraction passed its budget: `pipeline.extraction_timeout_s`).
    `reason` is a `records_rejected_total` label."""

    reason: str
    detail: str


Extraction = list[RagRecord] | Unreadable
"""What became of one sampled trace: its records (none: not a RAG trace), or why not."""


def extract_trace(
    spans: Sequence[Span],
    route_attribute: str,
    max_documents: int | None = None,
    conventions: Sequence[Convention] = (),
    address: str | None = None,
) -> Extraction:
    """`extract_records`, or why the trace is unreadable."""
    try:
        return extract_records(
            spans,
            route_attribute=route_attribute,
            max_documents=max_documents,
            conventions=conventions,
            address=address,
        )
    except DecodeError as exc:
        return Unreadable(exc.reason, exc.detail)
    except Exception as exc:
        return Unreadable("extract_failed", f"cannot build a record: {exc}")


@dataclass(frozen=True, slots=True)
class TraceRecords:
    """What a readable sampled trace gave: its records within the size limits (none: not
    a RAG trace), what the limits cut (one entry per cut: a part of the text, a
    `records_truncated_total` label, or a label field), the records they refused (an
    answer over its limit), and why it gave no record or an incomplete one (`causes`,
    worked out only then: `_diagnosis.py`); and the verdicts the app wrote into the trace
    (`_verdicts.py`), when they were read."""

    records: list[RagRecord]
    cut: list[Cut]
    refused: list[Unreadable]
    causes: list[Cause] = field(default_factory=list)
    verdicts: TraceVerdicts | None = None


def extract_within(
    spans: Sequence[Span],
    route_attribute: str,
    limits: SizeLimits,
    conventions: Sequence[Convention] = (),
    address: str | None = None,
) -> TraceRecords | Unreadable:
    """`extract_trace`, each record bound by `limits`."""
    extraction = extract_trace(spans, route_attribute, limits.max_documents, conventions, address)
    if isinstance(extraction, Unreadable):
        return extraction
    out = TraceRecords([], [], [])
    for record in extraction:
        try:
            bounded, cut = bound_record(record, limits)
        except RecordError as exc:
            out.refused.append(Unreadable(exc.reason, exc.detail))
            continue
        out.records.append(bounded)
        out.cut.extend(cut)
    if extraction and not any(r.missing() for r in extraction):
        return out
    try:
        why = causes(spans, extraction, conventions)
    except Exception as exc:  # the records stand; the warning says the cause is unknown
        why = [Cause("diagnosis_failed", None, f"{type(exc).__name__}: {exc}")]
    return dataclasses.replace(out, causes=why)
