"""The sampling decision, once per trace or record, before any extraction.

A released trace is reduced to what sampling reads (`sampling_view`: no attribute
decoding beyond the route and `rag.feedback`); records that arrive as records (Kafka JSON,
replay) are decided in the caller's thread, and only the sampled ones are validated.
Traces and records no evaluator samples are counted in `traces_unsampled_total{service}`.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Sequence
from operator import attrgetter

from monitor.component import Invalid
from monitor.extraction import Unreadable
from monitor.processors.sampler import Sampler
from monitor.processors.trace._assembler import FinishedTrace
from monitor.processors.trace._outcomes import Outcomes
from monitor.processors.trace._sampling_view import sampling_view
from monitor.records import RagRecord, RawRecord, RecordError
from monitor.spans import DecodeError

Chosen = tuple[RagRecord, frozenset[str], RagRecord | RawRecord]
"""A sampled record, validated; the evaluators that sample it; the record as delivered."""

_SERVICE = attrgetter("service")


def _key(record: RagRecord | RawRecord) -> str:
    """The record's sampling key, or "" for one whose key cannot be read (a record without
    an id, nested too deeply to derive one: never read when nothing is sampled)."""
    try:
        return record.sampling_key
    except RecordError:
        return ""


class TraceSampling:
    def __init__(self, sampler: Sampler, outcomes: Outcomes, view_route: str | None) -> None:
        self._sampler = sampler
        self._outcomes = outcomes
        # The route is read for sampling only when an override names one: otherwise it
        # cannot change a decision, and reading it costs an attribute lookup per trace.
        self._view_route = view_route

    def trace(self, trace: FinishedTrace, unsampled: Tally[str]) -> tuple[frozenset[str], str]:
        """The evaluators that sample a released trace, and its service (the root's);
        none when no evaluator does (counted in `unsampled`, by service) or when what
        sampling reads is unreadable (counted)."""
        if not trace.spans:
            return frozenset(), ""
        service = trace.spans[0].service
        try:
            view = sampling_view(trace.spans, route_attribute=self._view_route)
            sampled = self._sampler.sampled(view)
        except DecodeError as exc:
            # An attribute value that is not valid protobuf, found when first read.
            self._outcomes.unreadable(trace, service, Unreadable(exc.reason, exc.detail))
            return frozenset(), service
        except Exception as exc:  # e.g. parent links that form a cycle: no root
            why = Unreadable("extract_failed", f"cannot build a record: {exc}")
            self._outcomes.unreadable(trace, service, why)
            return frozenset(), service
        if not sampled:
            unsampled[view.service] += 1
            self._outcomes.no_record(trace, view.service, "unsampled")
        return sampled, view.service

    def records(
        self, records: Sequence[RagRecord | RawRecord]
    ) -> tuple[
        list[Chosen],
        Sequence[RagRecord | RawRecord],
        list[Invalid],
    ]:
        """Records split by the sampling decision: the sampled ones, validated, with their
        evaluators and the record as delivered; the unsampled ones; and the problems of the sampled records that did
        not validate and of those whose sampling key could not be read. No other
        effects."""
        try:
            decisions: list[frozenset[str] | RecordError] = list(
                map(self._sampler.sampled, records)
            )
        except RecordError:  # a record without a readable sampling key: find which
            decisions = [self._decide(record) for record in records]
        if not any(decisions):  # most deliveries: nothing sampled, nothing copied
            return [], records, []
        chosen: list[Chosen] = []
        skipped: list[RagRecord | RawRecord] = []
        problems: list[Invalid] = []
        for record, sampled in zip(records, decisions, strict=True):
            if isinstance(sampled, RecordError):
                assert isinstance(record, RawRecord)  # a validated record's key is read
                problems.append((record, sampled.reason, sampled.detail))
            elif not sampled:
                skipped.append(record)
            else:
                try:
                    parsed = (
                        record.parse(self._outcomes.max_documents)
                        if isinstance(record, RawRecord)
                        else record
                    )
                    chosen.append((self._outcomes.bounded(parsed), sampled, record))
                except RecordError as exc:
                    raw = (
                        record if isinstance(record, RawRecord) else RawRecord(record.model_dump())
                    )
                    problems.append((raw, exc.reason, exc.detail))
        return chosen, skipped, problems

    def _decide(self, record: RagRecord | RawRecord) -> frozenset[str] | RecordError:
        try:
            return self._sampler.sampled(record)
        except RecordError as exc:
            return exc

    def count_skipped(self, unsampled: list[tuple[str, Sequence[RagRecord | RawRecord]]]) -> None:
        """Count (and show the observer) the records no evaluator samples, by the source
        of their delivery."""
        counts: Tally[str] = Tally()
        observer = self._outcomes.observer
        for source, records in unsampled:
            counts.update(map(_SERVICE, records))  # counted in C: this runs for most records
            if observer is not None:
                for record in records:
                    observer.no_record(_key(record), record.service, source, "unsampled", 0)
        self._outcomes.unsampled_by_service(counts)
