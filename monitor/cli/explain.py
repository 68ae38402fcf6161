"""`rag-monitor explain FILE [--trace-id ID] [--config CONFIG]`: for each trace of an
OTLP/JSON file (one `ExportTraceServiceRequest` per line, as the OpenTelemetry Collector's
file exporter writes it, with the log records of `ExportLogsServiceRequest` lines; gzip
too), what each span was taken as (its role, the convention
that declared it, the values read), the records the extraction makes of it, a diagnosis of
each (whole ones too: where its context came from, and whether it is doubtful), what they
lack and why, and — when a record is missing, lacks a part or is doubtful — a proposed
`extraction.conventions` entry that reads it (`explain_proposal.py`), with the records the
extraction makes once it is added.

`rag-monitor explain --from-debug URL [--trace-id ID]` explains the traces a running
monitor's `/debug/records` keeps the spans of (URL: its metrics port, e.g.
`http://127.0.0.1:9464`), read over HTTP (`explain_debug.py`) as the file's lines are read.

Everything said is the extraction's own reading (`monitor.extraction.spans_taken`,
`causes`, `extract_records`): the proposal is checked by extracting the trace again with
it, never by a reading of its own."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson
from pydantic import ValidationError

from monitor.cli.explain_debug import DEADLINE_S, ExplainError, fetch_debug_traces
from monitor.cli.explain_proposal import propose, with_log_records
from monitor.config import UserConvention, dump_yaml
from monitor.conventions import LOG_EVENTS
from monitor.exporters.debug_records import PATH as DEBUG_PATH
from monitor.exporters.debug_records import TRACES_PATH
from monitor.extraction import (
    CONTEXT_DOUBTS,
    Convention,
    SpanTaken,
    causes,
    conventions_from_config,
    extract_records,
    spans_taken,
)
from monitor.extraction._trace_tree import trace_shape
from monitor.records import CONTEXT_DOUBT, RagRecord
from monitor.spans import DecodeError, Span, decode_json, decode_logs_json

TEXT_SHOWN = 160  # characters of a value printed
EVENTS_SHOWN = 8  # event names printed of a span nothing was read from


def read_traces(path: Path) -> tuple[dict[str, list[Span]], list[str]]:
    """The spans of each trace in the file, by trace id, and a problem per line that is
    not an OTLP/JSON trace request (`line N: why`)."""
    opener = gzip.open if path.suffix == ".gz" else open
    traces: dict[str, list[Span]] = {}
    problems: list[str] = []
    try:
        with opener(path, "rb") as lines:
            _read_lines(lines, traces, problems)
    except (OSError, EOFError) as exc:
        raise ExplainError(f"{path}: {exc}") from None
    return traces, problems


def _read_lines(lines: Iterable[bytes], traces: dict[str, list[Span]], problems: list[str]) -> None:
    """Add the spans of each OTLP/JSON line to `traces` (a logs request's log records as
    event spans of their span, whatever their event names), a problem per unreadable
    line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            if b'"resourceLogs"' in line and b'"resourceSpans"' not in line:
                decoded = decode_logs_json(line, LOG_EVENTS | _event_names(line))
            else:
                decoded = decode_json(line)
        except DecodeError as exc:
            problems.append(f"line {number}: {exc.detail}")
            continue
        if decoded.rejected:
            problems.append(f"line {number}: {decoded.message}")
        for span in decoded.spans:
            traces.setdefault(span.trace_id, []).append(span)


def _event_names(line: bytes) -> frozenset[str]:
    """The event names of a logs request's records (`eventName`, or an `event.name`
    attribute), so that each is read whatever convention names it."""
    try:
        data = orjson.loads(line)
        names = set()
        for resource in data.get("resourceLogs") or ():
            for scope in resource.get("scopeLogs") or ():
                for record in scope.get("logRecords") or ():
                    names.add(record.get("eventName"))
                    for attribute in record.get("attributes") or ():
                        if attribute.get("key") == "event.name":
                            names.add((attribute.get("value") or {}).get("stringValue"))
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return frozenset()  # the decoder says what is wrong with it
    return frozenset(n for n in names if isinstance(n, str) and n)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= TEXT_SHOWN else text[: TEXT_SHOWN - 1] + "…"


def _span_lines(taken: SpanTaken, depth: int) -> Iterator[str]:
    span = taken.span
    pad = "  " * depth
    if taken.structure:
        how = (
            "a model call found by structure (role-tagged messages sent, an assistant's "
            "returned); no convention declares it"
        )
    elif taken.role is None:
        how = "nothing: no convention declares it and its content is none a convention reads"
    elif taken.convention is not None:
        how = f"{taken.role} (declared by convention {taken.convention})"
    else:
        how = f"{taken.role} (by its content)"
    yield f"{pad}- span {span.name!r} [{span.span_id}]: {how}"
    for key, value in taken.read.items():
        if key == "documents":
            yield f"{pad}    documents: {len(value)}"
            for doc in value:
                yield f"{pad}      - [{doc['doc_uri']}] {_shown(doc['content'])}"
        elif key == "messages":
            for message in value:
                yield f"{pad}    message {message['role']}: {_shown(message['content'])}"
        elif value not in (None, [], ""):
            yield f"{pad}    {key}: {_shown(value)}"
    if taken.role is None and span.events:
        names = list(dict.fromkeys(e.name for e in span.events))
        shown = ", ".join(names[:EVENTS_SHOWN]) + (", ..." if len(names) > EVENTS_SHOWN else "")
        yield f"{pad}    events: {shown}"


def _record_lines(record: RagRecord) -> Iterator[str]:
    yield f"- record {record.request_id}"
    yield f"    query: {_shown(record.query) if record.query else '(none)'}"
    yield f"    response: {_shown(record.response) if record.response is not None else '(none)'}"
    context = record.retrieved_context or ()
    yield f"    context: {len(context)} document(s)"
    for doc in context:
        yield f"      - [{doc.doc_uri}] {_shown(doc.content)}"
    for key in (
        "context_source",
        "context_evidence",
        "extraction_suspect",
        "conventions",
        "instrumentation",
    ):
        value = record.metadata.get(key)
        if value:
            yield f"    {key}: {_shown(value)}"


def _depths(spans: Sequence[Span]) -> dict[str, int]:
    _, by_id, _ = trace_shape(spans)
    depths = {}
    for span in spans:
        depth, current = 0, span
        while current.parent_span_id in by_id and depth < 64:
            current = by_id[current.parent_span_id]
            depth += 1
        depths[span.span_id] = depth
    return depths


def _conventions(entries: Sequence[dict[str, Any]]) -> tuple[Convention, ...]:
    return conventions_from_config([UserConvention.model_validate(e) for e in entries])


def doubtful_context(record: RagRecord) -> list[str]:
    """Why a record with every part may still be wrong, one reason each: the record's own
    `extraction_suspect`, each sign of a wrong prompt split the extraction found
    (`context_doubt`, worded by `CONTEXT_DOUBTS`), and documents split out of the prompt at
    all (a span or event that carries them reads them as the retriever gave them)."""
    reasons = []
    suspect = record.metadata.get("extraction_suspect")
    if suspect:
        reasons.append(f"its parts look wrong ({suspect})")
    for doubt in filter(None, str(record.metadata.get(CONTEXT_DOUBT) or "").split(",")):
        reasons.append(f"{CONTEXT_DOUBTS.get(doubt, doubt)} ({doubt})")
    if record.metadata.get("context_source") == "prompt":
        reasons.append(
            "its documents were split out of the model call's prompt, not read from a span"
        )
    return reasons


def _diagnosis_lines(record: RagRecord) -> Iterator[str]:
    missing = record.missing()
    doubts = doubtful_context(record)
    if missing:
        yield f"record {record.request_id}: lacks {', '.join(sorted(missing))}"
    elif not doubts:
        source = record.metadata.get("context_source") or "none"
        yield f"record {record.request_id}: whole, its context from {source}"
    for doubt in doubts:
        yield f"record {record.request_id}: doubtful: {doubt}"


def explain_trace(
    spans: Sequence[Span],
    user: Sequence[UserConvention] = (),
    route_attribute: str = "http.route",
) -> Iterator[str]:
    """The lines `explain` prints for one trace: each span as taken, each record and its
    diagnosis (whole ones too), the causes of what is missing, and a proposed entry when
    a record is missing, lacks a part or is doubtful, or its context was found by
    structure (no entry names the span that carries it)."""
    conventions = conventions_from_config(user)
    taken = spans_taken(spans, conventions)
    if not taken:
        yield "(no span)"
        return
    root = taken[0].span
    yield f"trace {root.trace_id}: service {root.service!r}, {len(taken)} span(s)"
    yield "spans, as the extraction takes them:"
    depths = _depths([t.span for t in taken])
    for t in taken:
        yield from _span_lines(t, depths[t.span.span_id])
    records = extract_records(spans, route_attribute=route_attribute, conventions=conventions)
    yield f"records: {len(records)}"
    for record in records:
        yield from _record_lines(record)
    doubtful = False
    for record in records:
        for line in _diagnosis_lines(record):
            doubtful = doubtful or ": doubtful: " in line
            yield line
    why = causes(spans, records, conventions)
    for cause in why:
        lacks = f"the record has no {cause.part}" if cause.part else "no record"
        yield f"{lacks}: {cause.text()}"
    # Context found by structure is right but read by no entry: the proposal names it.
    by_structure = any(r.metadata.get("context_source") == "structure" for r in records)
    if records and not why and not doubtful and not by_structure:
        return
    yield from _proposal_lines(spans, taken, conventions, records, route_attribute)


def _proposal_lines(
    spans: Sequence[Span],
    taken: Sequence[SpanTaken],
    conventions: Sequence[Convention],
    records: Sequence[RagRecord],
    route_attribute: str,
) -> Iterator[str]:
    # Log records no convention names are read as events of their span, as an entry
    # naming them has them read.
    joined = with_log_records(spans)
    entries = propose(joined, spans_taken(joined, conventions))
    if not entries:
        yield (
            "no entry proposed: no span the conventions leave unread carries documents, chat "
            "messages or a question in an attribute or an event (docs/tracing.md)"
        )
        return
    yield "proposed entry (under extraction: conventions: in the config):"
    yield from dump_yaml(entries).rstrip("\n").splitlines()
    try:
        proposed = _conventions(entries)
    except ValidationError as exc:  # a proposal the config would refuse is a defect here
        yield f"(the proposal does not validate: {exc})"
        return
    again = extract_records(
        spans, route_attribute=route_attribute, conventions=(*conventions, *proposed)
    )
    yield f"with it, records: {len(again)}"
    for record in again:
        yield from _record_lines(record)
    for record in again:
        yield from _diagnosis_lines(record)
    if [r.model_dump() for r in again] == [r.model_dump() for r in records]:
        yield "(with it the records are the same: the entry reads nothing new)"


def explain(
    path: Path,
    trace_id: str | None,
    user: Sequence[UserConvention],
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Print the explanation of each trace in `path` (or of `trace_id`); 1 when the file
    holds no trace (or not that one), each unreadable line named on `err`."""
    try:
        traces, problems = read_traces(path)
    except ExplainError as exc:
        print(f"explain: {exc}", file=err)
        return 1
    for problem in problems:
        print(f"explain: {path}: {problem}", file=err)
    if trace_id is not None:
        wanted = trace_id.lower()
        traces = {t: s for t, s in traces.items() if t == wanted}
        if not traces:
            print(f"explain: {path}: no span of trace {trace_id}", file=err)
            return 1
    if not traces:
        print(f"explain: {path}: no OTLP/JSON trace in it", file=err)
        return 1
    _print(traces, user, out)
    return 0


def _print(traces: dict[str, list[Span]], user: Sequence[UserConvention], out: TextIO) -> None:
    for n, spans in enumerate(traces.values()):
        if n:
            print(file=out)
        for line in explain_trace(spans, user):
            print(line, file=out)


def explain_from_debug(
    url: str,
    trace_id: str | None,
    user: Sequence[UserConvention],
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    deadline_s: float = DEADLINE_S,
) -> int:
    """Print the explanation of each trace whose spans the `/debug/records` of the monitor
    at `url` keeps (or of `trace_id`), newest first; 1, with one line on `err` saying why,
    when the page and its traces cannot be read within `deadline_s` together, or it keeps
    no such trace."""
    try:
        bodies, left_out = fetch_debug_traces(url, trace_id, deadline_s)
        traces: dict[str, list[Span]] = {}
        for kept_id, body in bodies.items():
            problems: list[str] = []
            _read_lines([body], traces, problems)
            if problems:
                raise ExplainError(
                    f"{url.rstrip('/').removesuffix(DEBUG_PATH)}"
                    f"{TRACES_PATH}{kept_id}: {problems[0]}"
                )
    except ExplainError as exc:
        print(f"explain: {exc}", file=err)
        return 1
    for kept, n in left_out.items():
        print(
            f"explain: trace {kept}: {n} of its spans were left out by {DEBUG_PATH}'s byte "
            "cap; the explanation is of the others",
            file=err,
        )
    _print(traces, user, out)
    return 0
