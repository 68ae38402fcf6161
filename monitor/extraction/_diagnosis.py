"""What the extraction made of each span of a trace, and why a trace gave no record or an
incomplete one — said from the same readers the extraction uses (`read_retrieval`,
`read_tool`, `read_generation`, the declared roles), never from a second reading of the
conventions. `rag-monitor explain` prints it; the trace stage's warnings name the cause.

Causes (`CAUSES`), each from evidence in the trace, never by default: `no_convention` (no
span declares a role any convention reads, and none carries a model call's or a
retrieval's content where a convention writes it: the instrumentation is not one the table
knows); `lone_root` (no record from a trace of one span with no content: no instrumentation
recorded the model call; what the stack whose marks the span carries advises, the table's
`advice`, is added, as for a call traced after that span ended); `no_retrieval` (a model
call, but no span carries documents and none were found elsewhere); `document_without_text`
(the same, but the call's messages hold document parts with no text to read: a file id, a
URL, a PDF's bytes); `hosted_retrieval` (the same, but the model call ran a tool its
provider hosts whose results no instrumentation records; the stack's advice added);
`content_not_read` (the call's messages are there, role by role, but no part of them was
read as text: a part shape no entry names, not content capture off); `retrieval_without_text` (a retrieval span whose documents carry no text: ids
and scores only, or content capture off); `content_not_captured` (a model call traced
without its question or answer: the switch named is that of the stack whose marks the
spans carry); `unparsed_field` (the answer is there, in a field of a JSON output no
convention reads, such as a `{"replies": [...]}` object); `spans_after_root` (some spans
name a parent the trace lacks, or ended after its root: they arrived after the root ended
or never); `diagnosis_failed` (working the cause out raised: the records stand); and for a
trace that asks nothing, no fault (`_asks_nothing.py`): `indexing`, `embedding_only`,
`health_check`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.conventions import Convention
from monitor.extraction._asks_nothing import asks_nothing
from monitor.extraction._instrumentations import advice, content_switch, instrumentation_of
from monitor.extraction._log_events import join_log_events
from monitor.extraction._message_parts import span_parts
from monitor.extraction._messages import (
    Blob,
    File,
    Generic,
    Text,
    Uri,
    is_placeholder,
    read_messages,
)
from monitor.extraction._model_call_spans import read_generation, shows_model_call
from monitor.extraction._retrieval_spans import read_retrieval
from monitor.extraction._sources import completion_text
from monitor.extraction._span_roles import declared
from monitor.extraction._span_values import Generation, Retrieval, content_text, loads
from monitor.extraction._structure import call_by_structure
from monitor.extraction._table import reading
from monitor.extraction._tool_results import read_tool
from monitor.extraction._trace_tree import trace_shape
from monitor.records import RagRecord
from monitor.spans import Span

EXPLAIN = (
    "run `rag-monitor explain` on one of its traces (an OTLP/JSON file) to see what each "
    "span was taken as and an extraction.conventions entry that reads it (the README's "
    "'Tracing your app' lists the stacks read)"
)
CAUSES: dict[str, str] = {
    "no_convention": (
        "no span declares a role any convention reads, and none carries a model call's or "
        "a retrieval's content where a convention writes it: declare your instrumentation "
        "in extraction.conventions"
    ),
    "no_retrieval": (
        "no retrieval found: no span carries the documents the model was given (a "
        "retriever with no span of its own, or one whose attributes no convention reads); "
        "trace the retriever, declare its span in extraction.conventions, or set rag.context"
    ),
    "hosted_retrieval": (
        "no retrieval found, and the model call ran a tool its provider hosts (a file or "
        "web search): instrumentations may not record what such a tool returned: set "
        "rag.context on a span of the request to the documents"
    ),
    "document_without_text": (
        "no retrieval found, and the model call's messages hold document parts with no text "
        "to read (a file id, a URL, a PDF's bytes): send the documents' text, or set "
        "rag.context on a span of the request"
    ),
    "content_not_read": (
        "the model call's messages were recorded, role by role, but no part of them was "
        "read as text: their parts are of a shape no convention names (declare it in an "
        "extraction.conventions entry's parts); content capture is on"
    ),
    "retrieval_without_text": (
        "a retrieval span was found but its documents carry no text (ids and scores only, "
        "or content capture off): record the documents' text on it, or set rag.context"
    ),
    "content_not_captured": (
        "content not captured: a model call was traced without its question or answer"
    ),
    "unparsed_field": "the answer is in a field of a JSON output that no convention reads",
    "lone_root": (
        "the trace is one span with nothing under it and no content: no instrumentation "
        "recorded the model call. Usually the model client is not instrumented (its "
        "instrumentation not installed, or enabled after the client was created), its spans "
        "go to another exporter or are sampled apart, or the request made no model call"
    ),
    "spans_after_root": (
        "spans arrived after the trace's root ended (or never): the record was made "
        'without them (dropped_total{reason="late_span"})'
    ),
    "diagnosis_failed": "the cause could not be worked out (a defect of the diagnosis)",
    "indexing": "the trace asks nothing: documents written to a store (indexing)",
    "embedding_only": "the trace asks nothing: embedding calls and no model call that answers",
    "health_check": "the trace asks nothing: a health or readiness probe",
}
# A model call's finish reasons, and those that mean it stopped for a tool call.
FINISH_REASONS = "gen_ai.response.finish_reasons"
_TOOL_FINISH = frozenset({"tool_call", "tool_calls"})
# The output attributes searched for an answer in an unread field, by what their names say.
_OUTPUT_WORDS = ("output", "response", "completion", "result", "repl", "answer")


@dataclass(frozen=True, slots=True)
class Cause:
    """Why a trace gave no record (`part` None) or a record without `part`."""

    key: str
    part: str | None
    detail: str

    def text(self) -> str:
        return f"{CAUSES[self.key]} ({self.detail})" if self.detail else CAUSES[self.key]


@dataclass(slots=True)
class SpanTaken:
    """What one span was taken as: `role` (`model`, `retrieval`, `tool`, `container`,
    ...; None: nothing), `convention` (the entry that declared its role; None when its
    content decided, or nothing did), and the values read from it (`read`). A span no
    convention reads whose values hold a model call's messages by their shape (`structure`:
    `_structure.call_by_structure`) keeps no role, so that explain still proposes an entry
    for it, but its messages are read."""

    span: Span
    role: str | None
    convention: str | None
    read: dict[str, Any] = field(default_factory=dict)
    structure: bool = False


def _taken(span: Span) -> SpanTaken:
    found = declared(span)
    role, convention = (found[0], found[1].name) if found is not None else (None, None)
    taken = SpanTaken(span, role, convention)
    retrieval = read_retrieval(span)
    if retrieval is not None:
        taken.role = taken.role or "retrieval"
        taken.read = _retrieval_read(retrieval)
        return taken
    tool = read_tool(span)
    if tool is not None:
        taken.role = taken.role or "tool"
        taken.read = _retrieval_read(tool)
        return taken
    generation = read_generation(span)
    if generation is None and shows_model_call(span):
        generation = read_generation(span, shown=True)
    if generation is not None:
        taken.role = taken.role or "model"
        taken.read = _generation_read(generation)
    elif taken.role is None:
        by_shape = call_by_structure(span)
        if by_shape is not None:
            taken.structure = True
            taken.read = _generation_read(by_shape)
    return taken


def _retrieval_read(retrieval: Retrieval) -> dict[str, Any]:
    read: dict[str, Any] = {"query": retrieval.query}
    read["documents"] = [{"doc_uri": d.doc_uri, "content": d.content} for d in retrieval.docs]
    if retrieval.tool is not None:
        read["tool"] = retrieval.tool
    return read


def _generation_read(generation: Generation) -> dict[str, Any]:
    return {
        "messages": [{"role": r, "content": t} for r, t in generation.messages],
        "output": generation.output,
        "model": generation.model,
        "content_from": sorted(generation.conventions),
    }


def spans_taken(spans: Sequence[Span], conventions: Sequence[Convention] = ()) -> list[SpanTaken]:
    """What each span of one trace is taken as, in time order, read by the user's
    `conventions` before the shipped ones."""
    with reading(conventions):
        joined = join_log_events(spans)
        if not joined:
            return []
        ordered, _, _ = trace_shape(joined)
        return [_taken(span) for span in ordered]


def _late(spans: Sequence[Span]) -> tuple[str | None, str | None]:
    """Signs that spans came after the root: a span naming a parent the trace lacks (the
    parent never came: strong), and spans that ended after the root (weak: a streamed
    answer may too)."""
    ordered, by_id, root = trace_shape(spans)
    orphans = [s for s in ordered if s is not root and s.parent_span_id not in by_id]
    after = [s for s in ordered if s.end_unix_nano > root.end_unix_nano]
    missing = None
    if root.parent_span_id:
        missing = (
            f"its root {root.name!r} names a parent span {root.parent_span_id} not in the trace"
        )
    elif orphans:
        missing = f"{len(orphans)} span(s) name a parent not in the trace: {orphans[0].name!r}"
    if not after:
        return missing, None
    return missing, f"{len(after)} span(s) ended after the root {root.name!r}: {after[0].name!r}"


def _unparsed_answer(taken: Iterable[SpanTaken]) -> str | None:
    """An attribute of a model call (or a span no role was found for) holding a JSON
    object with text in a member no convention reads: `attribute` and `field`."""
    for t in taken:
        if t.role not in ("model", None):
            continue
        for key, value in t.span.attributes.items():
            if not any(word in key.lower() for word in _OUTPUT_WORDS):
                continue
            parsed = loads(value)
            if not isinstance(parsed, dict):
                continue
            for member, inner in parsed.items():
                if content_text(inner) or completion_text(inner):
                    return f"{key} holds it under {member!r}: declare field: {member}"
    return None


def _ran_hosted_tool(call: SpanTaken) -> bool:
    """A model call that answered in text yet finished for a tool call no span shows: a
    tool its provider ran (an instrumentation that keeps only the text of a response whose
    output held a hosted tool's call says `tool_call`)."""
    reasons = call.span.attributes.get(FINISH_REASONS)
    reasons = [reasons] if isinstance(reasons, str) else reasons
    if not isinstance(reasons, list | tuple):
        return False
    return bool(call.read.get("output")) and any(r in _TOOL_FINISH for r in reasons)


def causes(
    spans: Sequence[Span],
    records: Sequence[RagRecord],
    conventions: Sequence[Convention] = (),
) -> list[Cause]:
    """Why `spans` (one trace) gave no record, or why each of its `records` lacks a part:
    at most one cause per missing part (and one for no record), the most specific found."""
    taken = spans_taken(spans, conventions)
    if not taken:
        return []
    with reading(conventions):
        instrumentation = instrumentation_of([t.span for t in taken])
        switch = content_switch(instrumentation)
    missing_parent, ended_after = _late([t.span for t in taken])
    found: list[Cause] = []
    if not records:
        quiet = asks_nothing([t.span for t in taken])
        if quiet is not None:
            return [Cause(quiet[0], None, quiet[1])]
        late = missing_parent or ended_after
        if late is not None:
            found.append(Cause("spans_after_root", None, late))
        roles = [t for t in taken if t.role is not None]
        if len(taken) == 1 and not roles and late is None:
            said = advice([taken[0].span], "lone_root")
            detail = f"span {taken[0].span.name!r}" + (f"; {said}" if said else "")
            found.append(Cause("lone_root", None, detail))
        elif not roles:
            names = ", ".join(sorted({t.span.name for t in taken})[:5])
            found.append(Cause("no_convention", None, f"{len(taken)} span(s): {names}"))
        elif not any(t.role in ("model", "retrieval", "tool") for t in roles):
            found.append(Cause("no_convention", None, "no span is a model call or a retrieval"))
        return found
    missing = set().union(*(r.missing() for r in records))
    calls = [t for t in taken if t.role == "model"]
    for part in ("query", "response", "context"):
        if part not in missing:
            continue
        if missing_parent is not None:
            found.append(Cause("spans_after_root", part, missing_parent))
            continue
        if part == "context":
            retrievals = [t for t in taken if t.role in ("retrieval", "tool")]
            hosted = next((t for t in calls if _ran_hosted_tool(t)), None)
            if retrievals:
                found.append(
                    Cause(
                        "retrieval_without_text",
                        part,
                        f"span {retrievals[0].span.name!r}",
                    )
                )
            elif hosted is not None:
                said = advice([hosted.span], "hosted_retrieval")
                detail = f"span {hosted.span.name!r}" + (f"; {said}" if said else "")
                found.append(Cause("hosted_retrieval", part, detail))
            elif (unread := _unread_documents(calls)) is not None:
                found.append(Cause("document_without_text", part, unread))
            else:
                found.append(Cause("no_retrieval", part, ""))
            continue
        unparsed = _unparsed_answer(taken) if part == "response" else None
        if unparsed is not None:
            found.append(Cause("unparsed_field", part, unparsed))
            continue
        if ended_after is not None:
            found.append(Cause("spans_after_root", part, ended_after))
            continue
        unread = _roles_without_text(calls, part)
        if unread is not None:
            found.append(Cause("content_not_read", part, unread))
            continue
        where = f"span {calls[0].span.name!r}, " if calls else ""
        found.append(Cause("content_not_captured", part, f"{where}{instrumentation}: {switch}"))
    return found


def _unread_documents(calls: Sequence[SpanTaken]) -> str | None:
    """A model call whose messages hold document parts with no text to read."""
    for call in calls:
        for part in span_parts(call.span, "model_input"):
            if (
                isinstance(part, Blob | File | Uri | Generic)
                and part.modality == "document"
                and not (part.text and part.text.strip())
            ):
                kind = type(part).__name__.lower()
                named = part.name or getattr(part, "file_id", None) or getattr(part, "uri", None)
                return f"span {call.span.name!r}: a {kind} part {named or ''}".rstrip()
    return None


def _roles_without_text(calls: Sequence[SpanTaken], part: str) -> str | None:
    """A model call whose recorded messages have roles but no text read (`part`: the
    question is the input's, the answer the output's); placeholders in their place are
    content withheld, not a failed read."""
    where = "model_input" if part == "query" else "model_output"
    for call in calls:
        for value in span_parts(call.span, where, raw_values=True):
            messages = read_messages(value)
            withheld = any(
                isinstance(p, Text) and is_placeholder(p.content) for m in messages for p in m.parts
            )
            if messages and not withheld and not any(m.text for m in messages):
                roles = ", ".join(m.role for m in messages[:4])
                return f"span {call.span.name!r}: messages of roles {roles}"
    return None
