"""Where the trace stage has sampled traces turned into records: `extract_traces` (a
failure kept to its own trace) and the `Extractor` that runs it, in this process or
elsewhere. The rule itself: `_extraction_rule.py`."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from monitor.processors.trace._extraction_rule import extract_records
from monitor.processors.trace._sampling_view import SamplingView, sampling_view
from monitor.records import RagRecord
from monitor.spans import DecodeError, Span

__all__ = [
    "Extraction",
    "Extractor",
    "InProcess",
    "SamplingView",
    "Unreadable",
    "extract_records",
    "extract_traces",
    "sampling_view",
]


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Why a sampled trace gave no records although it may be a RAG trace: `bad_protobuf`
    (an attribute value that is not valid protobuf, found when first read) or
    `extract_failed` (building a record failed, or the process extracting it was lost).
    `reason` is a `records_rejected_total` label."""

    reason: str
    detail: str


Extraction = list[RagRecord] | Unreadable
"""What became of one sampled trace: its records (none: not a RAG trace), or why not."""


def extract_traces(traces: Sequence[Sequence[Span]], route_attribute: str) -> list[Extraction]:
    """`extract_records` of each trace, a failure kept to its own trace."""
    out: list[Extraction] = []
    for spans in traces:
        try:
            out.append(extract_records(spans, route_attribute=route_attribute))
        except DecodeError as exc:
            out.append(Unreadable(exc.reason, exc.detail))
        except Exception as exc:
            out.append(Unreadable("extract_failed", f"cannot build a record: {exc}"))
    return out


class Extractor(Protocol):
    """Where the trace stage's worker thread has sampled traces turned into records: in
    this process, or in the evaluation worker processes (`monitor.pool`, through `trace/_pooled.py`), so that the ingest
    process does not spend its CPU on extraction."""

    def extract(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> Future[list[Extraction]]:
        """The extractions of `traces`, in order, once done; callable from any thread."""


class InProcess:
    """Extraction in the calling thread (no worker processes: `pipeline.processes: 0`)."""

    def extract(
        self, traces: Sequence[Sequence[Span]], route_attribute: str
    ) -> Future[list[Extraction]]:
        done: Future[list[Extraction]] = Future()
        done.set_result(extract_traces(traces, route_attribute))
        return done
