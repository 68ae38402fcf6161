"""What became of each trace and record the trace stage saw, as metrics, log lines and the
observer's view (`/debug/records`): records handed on, traces and records no evaluator
samples, unreadable traces, drops, and what the evaluation stage's extraction made of each
sampled trace (`extracted`, on the event loop). Every other part of the stage counts
through here."""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Sequence

from monitor.component import Delivery, Invalid, TraceObserver
from monitor.extraction import (
    ASKS_NOTHING,
    CONTEXT_DOUBTS,
    EXPLAIN,
    INSTRUMENTATION,
    SUSPECT_REASONS,
    Cause,
    TraceRecords,
    Unreadable,
    suspect_guidance,
)
from monitor.processors.trace._assembler import TRIGGERS, FinishedTrace
from monitor.records import CONTEXT_DOUBT, EXTRACTION_SUSPECT, UNREAD_VALUES, RagRecord
from monitor.records.limits import LABEL_FIELDS, Cut, SizeLimits, bound_record
from monitor.shared.nesting import REASONS
from monitor.telemetry import OVERFLOW, RateLimitedLog, Telemetry

log = logging.getLogger("monitor.processors.trace")
STAGE = "assemble"
# The part of a record each suspect reason says is missing: its warning names that cause.
_SUSPECT_PART = {"no_query": "query", "no_response": "response"}
_RECORD_ROOTS = 32  # root span names remembered per service
# traces_not_rag_total's reason for a trace that may be a request whose extraction failed.
UNRECOGNISED = "unrecognised"


class Outcomes:
    def __init__(
        self, telemetry: Telemetry, observer: TraceObserver | None, limits: SizeLimits
    ) -> None:
        self._t = telemetry
        self.observer = observer
        # Applied to every record before it goes on: no text reaches a worker unbounded.
        self._limits = limits
        self.max_documents = limits.max_documents
        self.warn = RateLimitedLog(log)
        self.open_traces = telemetry.gauge("open_traces")
        self.open_trace_bytes = telemetry.gauge("open_trace_bytes")
        self.assembled = telemetry.counter("traces_assembled")
        for trigger in TRIGGERS:
            self.assembled.labels(trigger)
        self.suspect = telemetry.counter("records_suspect")
        self.doubtful = telemetry.counter("records_context_doubtful")
        self.partly_read = telemetry.counter("records_partly_read")
        self.not_rag_traces = telemetry.counter("traces_not_rag")
        # Per service (capped): sampled traces that gave no record while the service has
        # never given one; a service leaves once it gives a record.
        self._silent: dict[str, int] = {}
        self._speaking: set[str] = set()
        # Per service (capped): the names of root spans whose traces gave a record, so that
        # such a span alone, without content, is known for a request whose call was lost.
        self._record_roots: dict[str, set[str]] = {}
        self.late = telemetry.counter("late_spans")
        self.unsampled = telemetry.counter("traces_unsampled")

    def dropped(self, reason: str, n: int = 1) -> None:
        self._t.child(self._t.counter("dropped"), STAGE, reason).inc(n)

    def spans_received(self, source: str, n: int) -> None:
        self._t.child(self._t.counter("spans_received"), source).inc(n)

    def assembly_dropped(self, reason: str, n: int) -> None:
        """Spans trace assembly dropped (`late_span`, `trace_too_large`, `events_only`);
        late spans are logged with their service (`late_spans`)."""
        self.dropped(reason, n)
        if reason != "late_span":
            self.warn.warning(reason, "trace assembly dropped %d spans: %s", n, reason)

    def late_spans(self, causes: dict[str, str], service: str, outcome: str, n: int) -> None:
        """`n` spans of `service` came after their trace's root: `joined` its record, or
        dropped because `outcome` had released the trace (`causes` says why in words)."""
        capped = self._t.service_cap(service)
        self._t.child(self.late, capped, outcome).inc(n)
        if outcome == "joined":
            return
        self.warn.warning(
            f"late/{capped}/{outcome}",
            "service %r: %d spans came after their trace was released (%s) and are dropped "
            "(late_spans_total): %s; %s",
            capped,
            n,
            outcome,
            causes.get(outcome, outcome),
            EXPLAIN,
        )

    def cut_by_idle_timeout(self, trace: FinishedTrace, idle_timeout_s: float) -> None:
        """A trace released by the idle timeout while a span its spans name as parent
        had not come: the step still open (a model call slower than the timeout, or a
        root that ends later) is cut off its record."""
        service = self._t.service_cap(trace.spans[0].service if trace.spans else "")
        self.warn.warning(
            f"idle/{service}",
            "service %r: trace %s was released incomplete by trace_assembly.idle_timeout_s "
            "(%gs without a new span, and trace_assembly.missing_parent_wait_s past it) while "
            "a span it names as parent had not ended: a step slower than that (a long model "
            "call) splits its trace and its later spans are dropped as late, and the "
            "service's next traces are not kept for a missing parent until one is whole; "
            "raise trace_assembly.idle_timeout_s above the service's slowest step",
            service,
            trace.trace_id,
            idle_timeout_s,
        )

    def released(self, triggers: Tally[str]) -> None:
        for trigger, n in triggers.items():
            self.assembled.labels(trigger).inc(n)

    def bounded(self, record: RagRecord) -> RagRecord:
        """`record` within the size limits (truncations counted); raises `RecordError`."""
        bounded, cut = bound_record(record, self._limits)
        self.cut(cut)
        return bounded

    def cut(self, cut: Sequence[Cut]) -> None:
        """Count what the size limits cut: a label value in `label_values_cut_total`,
        a part of the text in `records_truncated_total`."""
        for part in cut:
            if part in LABEL_FIELDS:
                self._t.child(self._t.counter("label_values_cut"), part).inc()
            else:
                self._t.child(self._t.counter("records_truncated"), part).inc()
            if part == "documents":
                self.warn.warning(
                    "documents",
                    "a record had more than record_limits.max_documents (%d) documents; "
                    'the first %d are evaluated (records_truncated_total{part="documents"})',
                    self.max_documents,
                    self.max_documents,
                )

    def record(self, record: RagRecord, source: str, causes: Sequence[Cause] = ()) -> None:
        """A record handed on; `causes`: why its trace's records lack what they lack."""
        if self.observer is not None:
            self.observer.extracted(record, source)
        service = self._t.service_cap(record.service)
        if service not in self._speaking:
            self._speaking.add(service)
            self._silent.pop(service, None)
            self._forget_evicted()
        self._t.child(self._t.counter("records"), service, source).inc()
        self._t.child(
            self._t.counter("records_context_source"), service, record.context_source
        ).inc()
        missing = record.missing()
        for part in sorted(missing):
            self._t.child(self._t.counter("records_incomplete"), service, part).inc()
        unread = record.metadata.get(UNREAD_VALUES)
        if unread is not None:
            self._partly_read(record, service, unread)
        doubt = record.metadata.get(CONTEXT_DOUBT)
        if doubt is not None:
            self._doubtful(record, service, doubt)
        why = {c.part: c for c in causes if c.part is not None}
        reason = record.metadata.get(EXTRACTION_SUSPECT)
        if reason is not None:
            reason = reason if reason in SUSPECT_REASONS else "other"  # a record's own metadata
            self._t.child(self.suspect, service, reason).inc()
            cause = why.get(_SUSPECT_PART.get(reason, ""))
            self.warn.warning(
                f"suspect/{service}/{reason}",
                "service %r: record %s looks wrongly extracted (%s): %s. It is not evaluated "
                "(records_suspect_total; pipeline.evaluate_suspect_records: true evaluates "
                "such records anyway; /debug/records shows what was read); %s",
                service,
                record.request_id,
                reason,
                _suspect_why(reason, record.metadata.get(INSTRUMENTATION), cause),
                EXPLAIN,
            )
        said = _SUSPECT_PART.get(reason or "")
        for part in sorted(missing):
            cause = why.get(part)
            if part == said or cause is None:
                continue
            self.warn.warning(
                f"incomplete/{service}/{part}/{cause.key}",
                "service %r: record %s has no %s (records_incomplete_total): %s; %s",
                service,
                record.request_id,
                part,
                cause.text(),
                EXPLAIN,
            )

    def _doubtful(self, record: RagRecord, service: str, doubt: str) -> None:
        """Signs that the record's documents, split out of its prompt, were split
        wrongly: each counted, and logged per service and reason (rate-limited)."""
        for reason in sorted({r if r in CONTEXT_DOUBTS else "other" for r in doubt.split(",")}):
            self._t.child(self.doubtful, service, reason).inc()
            self.warn.warning(
                f"doubt/{service}/{reason}",
                "service %r: record %s looked for its documents in the model call's prompt, and "
                "%s (%s; records_context_doubtful_total): its context may not be what the "
                "model was given; it is evaluated as read; %s",
                service,
                record.request_id,
                CONTEXT_DOUBTS.get(reason, reason),
                reason,
                EXPLAIN,
            )

    def _partly_read(self, record: RagRecord, service: str, unread: str) -> None:
        reasons = {r if r in REASONS else "other" for r in unread.split(",")}
        for reason in sorted(reasons):
            self._t.child(self.partly_read, service, reason).inc()
        self.warn.warning(
            f"unread/{service}",
            "service %r: record %s: some attribute values of its trace could not be read "
            "(%s): they were read as text or left out (records_partly_read_total)",
            service,
            record.request_id,
            unread,
        )

    def unsampled_by_service(self, unsampled: Tally[str] | dict[str, int]) -> None:
        for service, n in unsampled.items():
            self._t.child(self.unsampled, self._t.service_cap(service)).inc(n)

    def forgotten(self, roots: dict[str, int]) -> None:
        """Traces the span filter left unbuilt whose root came (`roots`, by service):
        counted as the stage counts a whole trace no evaluator samples, released
        (`root_ended`) and unsampled."""
        self.assembled.labels("root_ended").inc(sum(roots.values()))
        self.unsampled_by_service(roots)

    def no_record(self, trace: FinishedTrace, service: str, reason: str) -> None:
        if self.observer is not None:
            self.observer.no_record(trace.trace_id, service, trace.source, reason, len(trace.spans))

    def not_rag(self, trace: FinishedTrace, service: str, causes: Sequence[Cause] = ()) -> None:
        """A sampled trace that gave no record: counted with its service and reason; one
        that asks nothing (indexing, an embedding call alone, a health check) is not
        logged; otherwise, while the service has never given a record, its first such trace
        is logged at once (then at most every 10 s), naming the trace and why (`causes`)."""
        self.dropped("not_rag")
        self.no_record(trace, service, "not_rag")
        capped = self._t.service_cap(service)
        quiet = next((c.key for c in causes if c.key in ASKS_NOTHING), None)
        self._t.child(self.not_rag_traces, capped, quiet or UNRECOGNISED).inc()
        if quiet is not None:
            return
        lone = next((c for c in causes if c.key == "lone_root"), None)
        if lone is not None and _root_name(trace) in self._record_roots.get(capped, ()):
            self.warn.warning(
                f"lost/{capped}",
                "service %r: its trace %s is the %s alone, though traces under that span "
                "give records: a request whose model call was lost (traces_not_rag_total): "
                "%s; %s",
                capped,
                trace.trace_id,
                lone.detail,
                lone.text(),
                EXPLAIN,
            )
            return
        if capped in self._speaking:
            return
        if capped not in self._silent:
            self._forget_evicted()
        silent = self._silent[capped] = self._silent.get(capped, 0) + 1
        why = "; ".join(c.text() for c in causes if c.part is None) or (
            "no model call, retrieval or rag.* attribute was recognised; its instrumentation "
            "may write none of the conventions read (declare yours in extraction.conventions), "
            "or no content"
        )
        self.warn.warning(
            f"silent/{capped}",
            "service %r: its sampled trace %s (of %d spans) gave no record, and none of its "
            "%d such traces has (traces_not_rag_total): %s; %s (/debug/records lists its "
            "traces)",
            capped,
            trace.trace_id,
            len(trace.spans),
            silent,
            why,
            EXPLAIN,
        )

    def _forget_evicted(self) -> None:
        """Keep what is known of services to those holding a label slot (plus `other`):
        the cap's slots follow traffic, so without this both would grow with every
        value ever admitted."""
        cap = self._t.service_cap
        bound = 2 * (cap.limit + len(cap.allowed)) + 1
        if len(self._speaking) > bound:
            self._speaking = {s for s in self._speaking if s == OVERFLOW or cap.holds(s)}
        if len(self._record_roots) > bound:
            self._record_roots = {
                s: n for s, n in self._record_roots.items() if s == OVERFLOW or cap.holds(s)
            }
        if len(self._silent) > bound:
            self._silent = {s: n for s, n in self._silent.items() if s == OVERFLOW or cap.holds(s)}

    def extracted(
        self, trace: FinishedTrace, service: str, outcome: TraceRecords | Unreadable
    ) -> None:
        """What extraction made of a sampled trace: its records, the parts the size limits
        cut and the records they refused, or why it is unreadable."""
        if self.observer is not None and _worth_keeping(outcome):
            self.observer.kept_spans(trace.trace_id, trace.spans)
        if isinstance(outcome, Unreadable):
            self.unreadable(trace, service, outcome)
            return
        self.cut(outcome.cut)
        for why in outcome.refused:
            self.unreadable(trace, service, why)
        for record in outcome.records:
            self.record(record, trace.source, outcome.causes)
        if outcome.records:
            self._gave_records(trace, service)
        if not outcome.records and not outcome.refused:
            self.not_rag(trace, service, outcome.causes)

    def _gave_records(self, trace: FinishedTrace, service: str) -> None:
        root = _root_name(trace)
        names = self._record_roots.setdefault(self._t.service_cap(service), set())
        if root is not None and len(names) < _RECORD_ROOTS:
            names.add(root)

    def unreadable(self, trace: FinishedTrace, service: str, why: Unreadable) -> None:
        self._t.child(self._t.counter("records_rejected"), trace.source, why.reason).inc()
        self.warn.warning(
            why.reason, "trace %s (service %s): %s", trace.trace_id, service, why.detail
        )
        self.no_record(trace, service, why.reason)

    def rejected(self, delivery: Delivery, problems: list[Invalid]) -> None:
        """Sampled records of a delivery that did not validate."""
        for _, reason, _ in problems:
            self._t.child(self._t.counter("records_rejected"), delivery.source, reason).inc()
        _, reason, detail = problems[0]
        self.warn.warning(
            "reject:" + reason, "%s: a sampled record is invalid: %s", delivery.source, detail
        )
        if delivery.on_rejected is not None:
            delivery.on_rejected(problems)

    def abandoned(self, what: str, n: int) -> None:
        """`n` records or sampled traces the evaluation stage no longer takes (it stopped
        first)."""
        self.dropped("shutting_down", n)
        self.warn.warning("abandoned", "trace stage stopping: %d %s abandoned", n, what)


def _root_name(trace: FinishedTrace) -> str | None:
    return next((s.name for s in trace.spans if not s.parent_span_id), None)


def _worth_keeping(outcome: TraceRecords | Unreadable) -> bool:
    """Whether a trace's spans are worth showing: it gave no record, or one that lacks a
    part or looks wrongly extracted."""
    if isinstance(outcome, Unreadable) or outcome.refused or not outcome.records:
        return True
    return any(r.missing() or EXTRACTION_SUSPECT in r.metadata for r in outcome.records)


def _suspect_why(reason: str, instrumentation: str | None, cause: Cause | None) -> str:
    """Why a record looks wrongly extracted, and the fix. Spans that missed the record may
    have held what it lacks, or the instrumentation may never record it: both are named,
    since either fix may be the one needed."""
    guidance = suspect_guidance(reason, instrumentation)
    if cause is None or cause.key == "content_not_captured":
        return guidance
    if cause.key == "spans_after_root":
        return f"{cause.text()}; or else: {guidance}"
    return cause.text()
