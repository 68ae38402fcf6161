"""A finished trace (all its spans) → one `RagRecord` per user request.

The rule (README.md beside this file, "Extraction", says why and what is tested):
1. LLM spans nested in an LLM span are one model call (`_calls`): prompt from the
   innermost role-tagged messages, output from the outermost text.
2. A request is the outermost chain/agent/workflow span above a call whose input reads
   as a user question (`_request_spans.request_question`: not a repr, not a model prompt).
3. All calls under one request are one record, answered by the last call with text
   (`_answers`); calls under no request are grouped by the user message they answer.
   A query rewriter (output = a later retrieval's query) and a prompt builder traced as
   a model call (output = another call's prompt) never answer.
4. Query: `rag.query` > the request's question > topmost chain input > the retriever's
   query inside the prompt > last user message. A retrieval query in other words goes
   to `metadata.retrieval_query` (a chat engine's condensed follow-up).
5. Response: `rag.response` > the request's text output > the answering call's output.
6. Context: retrieval spans before the answer by time, in retrieval order (the request's
   own when a trace holds several); a reranker's output replaces what it reranked;
   with no document text, the documents are found by structure, else split out of the
   prompt (`_structure.py`, `_prompt_documents.py`); the record says which
   (`context_source`).
7. A trace with no model call, no retrieval and no `rag.*` is not a RAG request; a store
   written to (indexing) is no retrieval (`_asks_nothing.py`). A span
   that declares no kind but carries a model call's GenAI request, response or usage
   attributes is a model call when no span is one by its kind or holds a chat in its
   values (`_structure.call_by_structure`): a trace with any sign of a
   model call always gives a record, marked suspect when its question or answer is
   missing (content capture off), never silently `not_rag`.
8. A record whose parts look wrong is marked with why (`_suspect.py`).
9. An attribute value that cannot be read (nested deeper than `monitor.shared.nesting.MAX_DEPTH`,
   or not a valid protobuf value) costs that value alone: it is read as its text or left
   out, and the trace's records name why in `metadata.unread_values`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.conventions import Convention
from monitor.extraction._asks_nothing import is_indexing
from monitor.extraction._log_events import join_log_events
from monitor.extraction._model_call_spans import read_generation, shows_model_call
from monitor.extraction._record_parts import (
    TraceWide,
    build_record,
    conversation_of,
    trace_wide,
)
from monitor.extraction._request_spans import Requests
from monitor.extraction._retrieval_spans import read_retrieval
from monitor.extraction._span_roles import declared
from monitor.extraction._span_values import Generation, Retrieval, normalized
from monitor.extraction._structure import call_by_structure
from monitor.extraction._suspect import tool_arguments
from monitor.extraction._table import reading
from monitor.extraction._tool_results import read_tool
from monitor.extraction._trace_tree import (
    BY_TIME,
    ancestors,
    depth_of,
    is_ancestor,
    route_of,
    trace_shape,
    version_of,
)
from monitor.records import UNREAD_VALUES, RagRecord
from monitor.shared.nesting import noting_unread
from monitor.spans import Span


@dataclass(slots=True)
class _Answer:
    call: Generation  # the model call whose output answers
    request: Span | None  # the request span it answers, if the trace has one


def extract_records(
    spans: Sequence[Span],
    *,
    route_attribute: str = "http.route",
    max_documents: int | None = None,
    conventions: Sequence[Convention] = (),
    address: str | None = None,
) -> list[RagRecord]:
    """All records in one trace's spans (possibly none), read by the user's `conventions`
    before the shipped ones. With `max_documents`, a record is built with no more than one
    document past it (see `monitor.records.parse_record`). `address`: the client's that
    sent the spans, where the receiver knows it (the prompt template's sender)."""
    with noting_unread() as unread, reading(conventions):
        records = _trace_records(spans, route_attribute, max_documents, address)
    for span in spans:  # values the decoders left out, at receipt or when first read
        unread.update(span.unread)
    if not unread or not records:
        return records
    reasons = ",".join(sorted(unread))
    return [
        r.model_copy(update={"metadata": {**r.metadata, UNREAD_VALUES: reasons}}) for r in records
    ]


def _trace_records(
    spans: Sequence[Span], route_attribute: str, max_documents: int | None, address: str | None
) -> list[RagRecord]:
    spans = join_log_events(spans)
    if not spans:
        return []
    ordered, by_id, root = trace_shape(spans)
    retrievals: list[Retrieval] = []
    tools: list[Retrieval] = []
    generations: list[Generation] = []
    conventions: set[str] = set()
    arguments: list[str] = []  # what tools were called with (a sign of a wrong extraction)
    for span in ordered:
        found = declared(span)
        if found is not None:
            conventions.add(found[1].name)
        arguments += tool_arguments(span)
        retrieval = read_retrieval(span)
        if retrieval is not None:
            if not is_indexing(span):  # documents written to a store answer nothing
                retrievals.append(retrieval)
            continue
        tool = read_tool(span)
        if tool is not None:
            tools.append(tool)
            continue
        generation = read_generation(span)
        if generation is not None:
            generations.append(generation)
            conventions |= generation.conventions
    if not generations:
        # No span is a model call by its kind or by a convention's messages: one that
        # declares nothing but holds a chat in its values is one (`_structure.py`).
        generations = [g for g in map(call_by_structure, ordered) if g is not None]
    if not generations:
        # ... or one that shows a model call's attributes (content capture off).
        shown = (read_generation(s, shown=True) for s in ordered if shows_model_call(s))
        generations = [g for g in shown if g is not None]
    top = trace_wide(ordered, by_id)
    if not retrievals and not generations and (top.query, top.response, top.docs) == (None,) * 3:
        return []  # no model call, no retrieval, no `rag.*`: not a RAG request
    retrievals = _with_tool_results(_outermost(retrievals, by_id), tools, by_id)
    calls = _calls(generations, by_id)
    requests = Requests(by_id)
    answers = _answers(calls, retrievals, requests)
    common: dict[str, Any] = {
        "trace_id": root.trace_id,
        "service": root.service,
        "version": version_of(root),
        "route": route_of(root, ordered, route_attribute),
        "timestamp": root.start_unix_nano / 1e9 if root.start_unix_nano else None,
        "feedback": top.feedback,
    }
    if len(answers) <= 1:
        if answers:
            answer: Generation | None = answers[0].call
            request = answers[0].request
        else:
            answer = calls[-1] if calls else None
            involved = [c.span for c in calls] + [r.span for r in retrievals]
            request = next((r for r in map(requests.of, involved) if r is not None), None)
        window = [
            r
            for r in retrievals
            if answer is None or r.span.start_unix_nano <= answer.span.end_unix_nano
        ]
        record = build_record(
            common,
            request_id=root.trace_id,
            span=answer.span if answer is not None else root,
            answer=answer,
            request=request,
            requests=requests,
            retrievals=window or retrievals,
            top=top,
            error=any(s.error for s in ordered),
            latency_ns=root.end_unix_nano - root.start_unix_nano,
            conventions=conventions,
            arguments=arguments,
            trace_spans=ordered,
            trace_conversation=conversation_of(ordered),
            max_documents=max_documents,
            address=address,
        )
        return [record]
    records = []
    previous_end = 0
    conversation = conversation_of(ordered)
    for item in answers:
        answer, request = item.call, item.request
        start = answer.span.start_unix_nano
        if request is not None:
            # The request's own retrievals (a follow-up may be condensed first).
            window = [
                r
                for r in retrievals
                if r.span.start_unix_nano <= answer.span.end_unix_nano
                and is_ancestor(request, r.span, by_id)
            ]
            first = request.start_unix_nano
            last = max(request.end_unix_nano, answer.span.end_unix_nano)
        else:
            window = [
                r
                for r in retrievals
                if previous_end <= r.span.start_unix_nano <= start and requests.of(r.span) is None
            ]
            first = min([start, *(r.span.start_unix_nano for r in window)])
            last = answer.span.end_unix_nano
            previous_end = answer.span.end_unix_nano
        records.append(
            build_record(
                common,
                request_id=f"{root.trace_id}-{answer.span.span_id}",
                span=answer.span,
                answer=answer,
                request=request,
                requests=requests,
                retrievals=window,
                top=TraceWide(feedback=top.feedback),
                error=answer.span.error
                or (request is not None and request.error)
                or any(r.span.error for r in window),
                latency_ns=last - first,
                conventions=conventions,
                arguments=arguments,
                trace_spans=ordered,
                trace_conversation=conversation,
                max_documents=max_documents,
                address=address,
            )
        )
    return records


def _outermost(retrievals: list[Retrieval], by_id: dict[str, Span]) -> list[Retrieval]:
    """Nested retrieval spans (a framework retriever over a vector-DB client) describe one
    retrieval: keep the outermost one that has document text (or the outermost).

    Each retrieval walks up its own ancestors once (`ancestors`), never every other
    retrieval's: a trace of thousands of sibling retrievals costs in proportion to them."""
    if len(retrievals) < 2:
        return retrievals
    plain = [r for r in retrievals if not r.reranked]
    # The retrievals on each span (by identity, as `is_ancestor` compares), those with text.
    on_span = Counter(id(r.span) for r in plain)
    with_text_on_span = Counter(id(r.span) for r in plain if _has_text(r))
    # Spans above a retrieval that has text.
    above_text = {id(s) for r in plain if _has_text(r) for s in ancestors(r.span, by_id)}
    keep = []
    for r in retrievals:
        if not r.reranked and _shadowed(r, by_id, on_span, with_text_on_span, above_text):
            continue
        keep.append(r)
    return keep


def _has_text(retrieval: Retrieval) -> bool:
    return any(d.content for d in retrieval.docs)


def _shadowed(
    r: Retrieval,
    by_id: dict[str, Span],
    on_span: Counter[int],
    with_text_on_span: Counter[int],
    above_text: set[int],
) -> bool:
    """Whether an outer retrieval already says what `r` does (it has text, or `r` has none),
    or an inner one has the text `r` lacks."""
    has_text = _has_text(r)
    if not has_text and id(r.span) in above_text:
        return True  # the inner span has the text this one lacks
    counts = with_text_on_span if has_text else on_span
    for span in ancestors(r.span, by_id):
        # Another retrieval than `r` on that span (`r` itself only through a cycle).
        if counts[id(span)] - (span is r.span) > 0:
            return True  # an outer span already says it
    return False


def _with_tool_results(
    retrievals: list[Retrieval], tools: list[Retrieval], by_id: dict[str, Span]
) -> list[Retrieval]:
    """Tool results join the retrievals, in call order. A tool with a retrieval span inside
    (a retriever tool under an instrumented retriever) is that retrieval, said better by
    the retrieval span; nested tool spans (a framework's over an MCP client's) are one call,
    the outermost. Each span walks up its own ancestors once (`ancestors`)."""
    if not tools:
        return retrievals
    above_retrieval = {id(s) for r in retrievals for s in ancestors(r.span, by_id)}
    tools_on_span = Counter(id(t.span) for t in tools)
    keep = [
        t
        for t in tools
        if id(t.span) not in above_retrieval
        and not any(tools_on_span[id(s)] - (s is t.span) > 0 for s in ancestors(t.span, by_id))
    ]
    return sorted([*retrievals, *keep], key=lambda r: BY_TIME(r.span))


def _calls(generations: list[Generation], by_id: dict[str, Span]) -> list[Generation]:
    """Nested LLM spans are one model call (a framework's `predict` → `chat` → `complete`,
    its chat-model span over the provider SDK's span): one `Generation` per
    outermost LLM span, in start order. Its output is the outermost text output (what the
    framework handed back); its messages are the innermost span's role-tagged messages,
    else the innermost that has any (wrappers carry a template or a repr); model and token
    counts come from the innermost span that has them (the provider's own)."""
    if len(generations) < 2:
        return generations
    ids = {g.span.span_id: g for g in generations}
    groups: dict[str, list[Generation]] = {}
    for gen in generations:
        outer_id = gen.span.span_id
        span = gen.span
        hops = 0
        while span.parent_span_id in by_id and hops < 1000:
            span = by_id[span.parent_span_id]
            if span.span_id in ids:
                outer_id = span.span_id
            hops += 1
        groups.setdefault(outer_id, []).append(gen)
    calls = []
    for outer_id, group in groups.items():
        if len(group) == 1:
            calls.append(group[0])
            continue
        outer = ids[outer_id]
        inner_first = sorted(group, key=lambda g: depth_of(g.span, by_id), reverse=True)
        with_messages = [g for g in inner_first if g.messages]
        source = next((g for g in with_messages if g.structured), None) or next(
            iter(with_messages), outer
        )
        by_position = [outer, *(g for g in group if g is not outer)]
        calls.append(
            Generation(
                span=outer.span,
                messages=source.messages,
                output=next((g.output for g in by_position if g.output and g.output.strip()), None),
                model=next((g.model for g in inner_first if g.model), None),
                input_tokens=next(
                    (g.input_tokens for g in inner_first if g.input_tokens is not None), None
                ),
                output_tokens=next(
                    (g.output_tokens for g in inner_first if g.output_tokens is not None), None
                ),
                conventions=set().union(*(g.conventions for g in group)),
                structured=source.structured,
                tool_results=next((g.tool_results for g in inner_first if g.tool_results), []),
            )
        )
    return calls


def _answers(
    calls: list[Generation], retrievals: list[Retrieval], requests: Requests
) -> list[_Answer]:
    """One model call per user request, in the order they finished. Calls under the same
    request span are one request whatever their prompts say (a condense call, an agent's
    planning turn, the answering call): the one that ended last answers. Calls outside
    any request span are grouped by the user message they answer."""
    rewritten = {normalized(r.query) for r in retrievals if r.query}
    prompts = {id(c): normalized(c.user_query) for c in calls if c.user_query}
    # How many calls were prompted with each text: a call's output that is another call's
    # prompt, found in one look-up rather than a scan of every call.
    prompted = Counter(prompts.values())
    latest: dict[object, _Answer] = {}
    for call in calls:
        if call.output is None or not call.output.strip():
            continue  # a tool call or a failed call, not an answer
        if normalized(call.output) in rewritten:
            continue  # a query rewriter: its output is what the retriever searched for
        output = normalized(call.output)
        if prompted[output] - (prompts.get(id(call)) == output) > 0:
            continue  # a prompt builder traced as an LLM span: its output is a call's prompt
        request = requests.of(call.span)
        key: object = request.span_id if request is not None else normalized(call.user_query)
        current = latest.get(key)
        if current is None or call.span.end_unix_nano >= current.call.span.end_unix_nano:
            latest[key] = _Answer(call, request)
    return sorted(latest.values(), key=lambda a: a.call.span.end_unix_nano)
