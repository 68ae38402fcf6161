"""`rag-monitor explain FILE [--trace-id ID] [--config CONFIG]`: for each trace of an
OTLP/JSON file (one `ExportTraceServiceRequest` per line, as the OpenTelemetry Collector's
file exporter writes it; gzip too), what each span was taken as (its role, the convention
that declared it, the values read), the records the extraction makes of it, what they lack
and why, and — when something is missing — a proposed `extraction.conventions` entry that
reads it, with the record the extraction makes once it is added.

`rag-monitor explain --from-debug URL [--trace-id ID]` explains the traces a running
monitor's `/debug/records` keeps the spans of (URL: its metrics port, e.g.
`http://127.0.0.1:9464`), read over HTTP as the file's lines are read.

Everything said is the extraction's own reading (`monitor.extraction.spans_taken`,
`causes`, `extract_records`): the proposal is checked by extracting the trace again with
it, never by a reading of its own. The proposal reads the spans no convention took:
an attribute holding a JSON list of documents makes a span a retrieval, one holding chat
messages a model call (its output the text attribute beside them), and a span above a
model call with a text attribute the request; the role by an attribute whose short values
tell those spans apart (`kind`), else by the spans' names (`match`)."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from monitor.cli.explain_debug import DEADLINE_S, ExplainError, fetch_debug_traces
from monitor.config import UserConvention, dump_yaml
from monitor.conventions import Source
from monitor.exporters.debug_records import PATH as DEBUG_PATH
from monitor.exporters.debug_records import TRACES_PATH
from monitor.extraction import (
    Convention,
    SpanTaken,
    causes,
    conventions_from_config,
    extract_records,
    spans_taken,
)
from monitor.extraction._sources import (
    completion_text,
    docs_of,
    messages_of,
    output_of,
    text_of,
)
from monitor.extraction._span_values import content_text, loads
from monitor.extraction._trace_tree import is_ancestor, trace_shape
from monitor.records import RagRecord
from monitor.spans import DecodeError, Span, decode_json

TEXT_SHOWN = 160  # characters of a value printed
# Attribute names a proposal never reads: transport, process and code location.
_INFRASTRUCTURE = ("http.", "url.", "net.", "server.", "client.", "code.", "thread.", "otel.")
_INPUT_WORDS = ("input", "query", "question", "prompt", "request", "args", "in")
_OUTPUT_WORDS = ("output", "answer", "response", "result", "completion", "repl", "out")
_KIND_WORDS = ("kind", "type", "step", "role", "category", "operation")


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
    """Add the spans of each OTLP/JSON line to `traces`, a problem per unreadable line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            decoded = decode_json(line)
        except DecodeError as exc:
            problems.append(f"line {number}: {exc.detail}")
            continue
        if decoded.rejected:
            problems.append(f"line {number}: {decoded.message}")
        for span in decoded.spans:
            traces.setdefault(span.trace_id, []).append(span)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= TEXT_SHOWN else text[: TEXT_SHOWN - 1] + "…"


def _span_lines(taken: SpanTaken, depth: int) -> Iterator[str]:
    span = taken.span
    pad = "  " * depth
    if taken.role is None:
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


@dataclass(slots=True)
class _Parts:
    """What a proposal found on one span: its role and the sources of its parts."""

    role: str
    input: dict[str, Any] | None = None
    output: dict[str, Any] | None = None
    documents: dict[str, Any] | None = None


def _readable(span: Span) -> list[tuple[str, Any]]:
    return [
        (key, value)
        for key, value in span.attributes.items()
        if isinstance(value, str) and value.strip() and not key.startswith(_INFRASTRUCTURE)
    ]


def _named(key: str, words: tuple[str, ...]) -> bool:
    last = key.lower().replace("-", "_").replace(".", "_").split("_")
    return any(word in part for part in last for word in words) or key.lower().endswith(words)


def _text_source(key: str, value: Any, attributes: dict[str, Any]) -> dict[str, Any] | None:
    """A source reading `key` as text: the whole value, or the member of a JSON object that
    holds text (`{"replies": [...]}`); None when it holds no text."""
    parsed = loads(value)
    if isinstance(parsed, dict):
        for member, inner in parsed.items():
            if content_text(inner):
                return {"attribute": key, "field": member}
            if completion_text(inner):  # messages (`{"replies": [ChatMessage]}`)
                return {"attribute": key, "encoding": "json", "field": member}
        return None
    if text_of(_source(key, "text"), attributes):
        return {"attribute": key}
    return None


def _source(key: str, encoding: str) -> Source:
    return Source(key, encoding)


def _parts_of(span: Span, below_model: bool) -> _Parts | None:
    """The role and sources a span's own attributes suggest, read by the extraction's
    decoders: documents (a JSON list the document reader takes), messages (JSON the message
    reader takes, with a user message: read first, as chat messages are documents-shaped
    too), text."""
    a = span.attributes
    readable = _readable(span)
    structured = [(k, v) for k, v in readable if isinstance(loads(v), list | dict)]
    for key, _ in structured:
        messages = messages_of(_source(key, "messages"), a)
        if any(role == "user" for role, _ in messages):
            parts = _Parts("model", input={"attribute": key, "encoding": "messages"})
            for out_key, out_value in readable:
                if out_key == key or not _named(out_key, _OUTPUT_WORDS):
                    continue
                if output_of(_source(out_key, "messages"), a) and isinstance(
                    loads(out_value), list
                ):
                    parts.output = {"attribute": out_key, "encoding": "json"}
                else:
                    parts.output = _text_source(out_key, out_value, a)
                if parts.output is not None:
                    break
            return parts
    for key, value in structured:
        docs = docs_of(_source(key, "json"), a)
        if isinstance(loads(value), list) and docs and any(d.content for d in docs):
            parts = _Parts("retrieval", documents={"attribute": key, "encoding": "json"})
            query = next((k for k, v in readable if k != key and _named(k, _INPUT_WORDS)), None)
            if query is not None:
                parts.input = {"attribute": query}
            return parts
    if not below_model:
        return None
    question = next((k for k, _ in readable if _named(k, _INPUT_WORDS)), None)
    if question is None:
        return None
    parts = _Parts("request", input={"attribute": question})
    answer = next((k for k, _ in readable if k != question and _named(k, _OUTPUT_WORDS)), None)
    if answer is not None:
        parts.output = _text_source(answer, a[answer], a)
    return parts


def _kind_attribute(found: dict[str, tuple[Span, _Parts]]) -> str | None:
    """An attribute every proposed span carries, whose short values tell their roles apart
    (the same value never for two roles)."""
    spans = [span for span, _ in found.values()]
    common = set.intersection(*(set(s.attributes) for s in spans)) if spans else set()
    for key in sorted(common, key=lambda k: (not _named(k, _KIND_WORDS), k)):
        roles: dict[Any, str] = {}
        good = True
        for span, parts in found.values():
            value = span.attributes[key]
            if not (isinstance(value, str) and 0 < len(value) <= 64 and " " not in value):
                good = False
                break
            if roles.setdefault(value, parts.role) != parts.role:
                good = False
                break
        if good and len(set(roles.values())) == len({p.role for _, p in found.values()}):
            if len(roles) == len(set(roles.values())):
                return key
    return None


def _prefix(found: dict[str, tuple[Span, _Parts]]) -> str:
    keys = [
        source["attribute"]
        for _, parts in found.values()
        for source in (parts.input, parts.output, parts.documents)
        if source is not None
    ]
    heads = {key.split(".")[0] for key in keys}
    name = heads.pop() if len(heads) == 1 else "app"
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in name) or "app"


def propose(spans: Sequence[Span], taken: Sequence[SpanTaken]) -> list[dict[str, Any]]:
    """`extraction.conventions` entries (as the config writes them) for the spans no
    convention took, one per role; none when no such span suggests a part."""
    _, by_id, _ = trace_shape(spans)
    models = [t.span for t in taken if t.role == "model"]
    found: dict[str, tuple[Span, _Parts]] = {}
    for t in taken:
        if t.role is not None and not (t.role == "model" and not t.read.get("output")):
            continue
        parts = _parts_of(t.span, below_model=False)
        if parts is not None:
            found[t.span.span_id] = (t.span, parts)
    models += [span for span, parts in found.values() if parts.role == "model"]
    for t in taken:
        if t.role is not None or t.span.span_id in found:
            continue
        above = any(is_ancestor(t.span, m, by_id) for m in models)
        parts = _parts_of(t.span, below_model=above) if above else None
        if parts is not None:
            found[t.span.span_id] = (t.span, parts)
    if not found:
        return []
    kind = _kind_attribute(found)
    prefix = _prefix(found)
    entries: list[dict[str, Any]] = []
    for role in ("request", "retrieval", "model"):
        mine = [(span, parts) for span, parts in found.values() if parts.role == role]
        if not mine:
            continue
        entry: dict[str, Any] = {"name": f"{prefix}-{role}"}
        if kind is not None:
            values = sorted({str(span.attributes[kind]) for span, _ in mine})
            entry["kind"] = {"attribute": kind, "values": {v: role for v in values}}
        else:
            entry["match"] = {"span_names": sorted({s.name for s, _ in mine}), "role": role}
        for part in ("input", "output", "documents"):
            sources = []
            for _, parts in mine:
                source = getattr(parts, part)
                if source is not None and source not in sources:
                    sources.append(source)
            if sources:
                entry[part] = sources
        entries.append(entry)
    return entries


def _conventions(entries: Sequence[dict[str, Any]]) -> tuple[Convention, ...]:
    return conventions_from_config([UserConvention.model_validate(e) for e in entries])


def explain_trace(
    spans: Sequence[Span],
    user: Sequence[UserConvention] = (),
    route_attribute: str = "http.route",
) -> Iterator[str]:
    """The lines `explain` prints for one trace."""
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
    why = causes(spans, records, conventions)
    for cause in why:
        lacks = f"the record has no {cause.part}" if cause.part else "no record"
        yield f"{lacks}: {cause.text()}"
    if records and not why:
        return
    entries = propose(spans, taken)
    if not entries:
        yield (
            "no entry proposed: no span the conventions leave unread carries documents, chat "
            "messages or a question in an attribute (docs/tracing.md)"
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
    when the page cannot be read within `deadline_s` a request, or keeps no such trace."""
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
