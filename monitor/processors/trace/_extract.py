"""A finished trace (all its spans) → one `RagRecord` per user request.

The rule (README.md beside this file, "Extraction", says why and what is tested):
1. LLM spans nested in an LLM span are one model call (`_calls`): prompt from the
   innermost role-tagged messages, output from the outermost text.
2. A request is the outermost chain/agent/workflow span above a call whose input reads
   as a user question (`conventions.request_question`: not a repr, not a model prompt).
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
   documents with ids only take their text from the chat span's system message.
7. A trace with no model call, no retrieval and no `rag.*` is not a RAG request.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

from monitor.processors.trace._conventions import (
    ANSWER_KEYS,
    NOT_CHAIN_OPERATIONS,
    QUERY_KEYS,
    Doc,
    Generation,
    Retrieval,
    as_float,
    find_text,
    indexed,
    json_docs,
    read_generation,
    read_retrieval,
    read_tool,
    request_question,
)
from monitor.records import RagRecord
from monitor.spans import (
    FEEDBACK_KEY,
    GENAI_EVENTS,
    LOG_EVENT_KEY,
    DecodeError,
    Span,
    SpanEvent,
)

_CHAT_ROLES = frozenset({"user", "assistant", "tool", "developer"})
_ABSENT: Any = object()
_BY_TIME = attrgetter("start_unix_nano", "end_unix_nano")
OPERATION_DETAILS = "gen_ai.client.inference.operation.details"


@dataclass(slots=True)
class _Top:
    query: str | None = None  # `rag.query`
    response: str | None = None  # `rag.response`
    docs: list[Doc] | None = None  # `rag.context`
    feedback: str | None = None
    chain_query: str | None = None  # the topmost chain's input
    chain_response: str | None = None  # the topmost chain's output


@dataclass(slots=True)
class _Answer:
    call: Generation  # the model call whose output answers
    request: Span | None  # the request span it answers, if the trace has one


def extract_records(
    spans: Sequence[Span], *, route_attribute: str = "http.route"
) -> list[RagRecord]:
    """All records in one trace's spans (possibly none)."""
    spans = _join_log_events(spans)
    if not spans:
        return []
    ordered, by_id, root = _shape(spans)
    retrievals: list[Retrieval] = []
    tools: list[Retrieval] = []
    generations: list[Generation] = []
    conventions: set[str] = set()
    for span in ordered:
        retrieval = read_retrieval(span)
        if retrieval is not None:
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
    top = _top(ordered, by_id)
    if not retrievals and not generations and (top.query, top.response, top.docs) == (None,) * 3:
        return []  # no model call, no retrieval, no `rag.*`: not a RAG request
    retrievals = _with_tool_results(_outermost(retrievals, by_id), tools, by_id)
    calls = _calls(generations, by_id)
    requests = _Requests(by_id)
    answers = _answers(calls, retrievals, requests)
    common: dict[str, Any] = {
        "trace_id": root.trace_id,
        "service": root.service,
        "route": _route(root, ordered, route_attribute),
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
        record = _record(
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
        )
        return [record]
    records = []
    previous_end = 0
    for item in answers:
        answer, request = item.call, item.request
        start = answer.span.start_unix_nano
        if request is not None:
            # The request's own retrievals (a follow-up may be condensed first).
            window = [
                r
                for r in retrievals
                if r.span.start_unix_nano <= answer.span.end_unix_nano
                and _is_ancestor(request, r.span, by_id)
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
            _record(
                common,
                request_id=f"{root.trace_id}-{answer.span.span_id}",
                span=answer.span,
                answer=answer,
                request=request,
                requests=requests,
                retrievals=window,
                top=_Top(feedback=top.feedback),
                error=answer.span.error
                or (request is not None and request.error)
                or any(r.span.error for r in window),
                latency_ns=last - first,
                conventions=conventions,
            )
        )
    return records


@dataclass(slots=True)  # not frozen: one per trace, and a frozen init costs 3x
class SamplingView:
    """What `Sampler.decide` reads of the records a trace would yield (`Sampleable`)."""

    trace_id: str
    service: str
    route: str
    feedback: str | None
    error: bool

    @property
    def sampling_key(self) -> str:
        return self.trace_id  # as for the records, which all carry the trace id


def sampling_view(
    spans: Sequence[Span], *, route_attribute: str | None = "http.route"
) -> SamplingView:
    """The sampler's input for the records `extract_records` would build, without
    building them: trace id, service and route exactly as the records get them, the
    feedback the records carry, and `error` if any span failed (a record's `error` covers
    the spans it was built from, so the view is never less of a priority than a record).
    Reads the route key and `rag.feedback` per span and decodes no other attribute.
    `route_attribute=None` leaves the route empty, for a sampler whose overrides name no
    route (the route cannot change its decision then). `spans` must not be empty."""
    ordered, _, root = _shape(spans)
    return SamplingView(
        root.trace_id,
        root.service,
        "" if route_attribute is None else _route(root, ordered, route_attribute),
        _feedback(ordered),
        any(s.error for s in ordered),
    )


def _shape(spans: Sequence[Span]) -> tuple[list[Span], dict[str, Span], Span]:
    """Spans by time, by id, and the root: the earliest span without a parent in the trace."""
    ordered = sorted(spans, key=_BY_TIME)
    by_id = {s.span_id: s for s in ordered}
    for span in ordered:
        if span.is_root or span.parent_span_id not in by_id:
            return ordered, by_id, span
    raise ValueError("no root span: the parent links form a cycle")


def _route(root: Span, spans: list[Span], key: str) -> str:
    """The route attribute of the root, else of the earliest span that has it, else the
    root's resource attribute."""
    value = root.attribute(key, _ABSENT)
    if value is _ABSENT:
        for span in spans:
            value = span.attribute(key, _ABSENT)
            if value is not _ABSENT:
                break
        else:
            value = root.resource.get(key)
    return "" if value is None else str(value)


def _feedback(spans: list[Span]) -> str | None:
    """`rag.feedback` of the earliest span where it is "positive" or "negative"."""
    for span in spans:
        value = span.attribute(FEEDBACK_KEY)
        if value in ("positive", "negative"):
            return str(value)
    return None


def _depth(span: Span, by_id: dict[str, Span]) -> int:
    depth = 0
    while span.parent_span_id in by_id and depth < 1000:
        span = by_id[span.parent_span_id]
        depth += 1
    return depth


def _top(spans: list[Span], by_id: dict[str, Span]) -> _Top:
    """The explicit `rag.*` attributes anywhere, and the topmost chain span's input and
    output (used when no request span contains the model calls)."""
    top = _Top(feedback=_feedback(spans))
    chain: Span | None = None
    chain_depth = 1 << 30
    for span in spans:
        a = span.attributes
        if top.query is None and isinstance(a.get("rag.query"), str):
            top.query = a["rag.query"]
        if top.response is None and isinstance(a.get("rag.response"), str):
            top.response = a["rag.response"]
        if top.docs is None:
            top.docs = _rag_context(a)
        if "input.value" in a or "traceloop.entity.input" in a or "output.value" in a:
            kind = a.get("openinference.span.kind")
            op = a.get("gen_ai.operation.name")
            if kind in (None, "CHAIN", "AGENT") and not (
                isinstance(op, str) and op in NOT_CHAIN_OPERATIONS
            ):
                depth = _depth(span, by_id)
                if depth < chain_depth:
                    chain, chain_depth = span, depth
    if chain is not None:
        a = chain.attributes
        top.chain_query = find_text(
            a.get("input.value", a.get("traceloop.entity.input")), QUERY_KEYS
        )
        top.chain_response = _output_text(chain)
    return top


def _output_text(span: Span) -> str | None:
    a = span.attributes
    return find_text(a.get("output.value", a.get("traceloop.entity.output")), ANSWER_KEYS)


class _Requests:
    """Which request span each span belongs to: its outermost ancestor that is a request
    a user made (`conventions.request_question`), memoised per span."""

    def __init__(self, by_id: dict[str, Span]) -> None:
        self._by_id = by_id
        self._questions: dict[str, str | None] = {}

    def question(self, span: Span) -> str | None:
        if span.span_id not in self._questions:
            self._questions[span.span_id] = request_question(span)
        return self._questions[span.span_id]

    def of(self, span: Span) -> Span | None:
        found = None
        hops = 0
        while span.parent_span_id in self._by_id and hops < 1000:
            span = self._by_id[span.parent_span_id]
            if self.question(span):
                found = span
            hops += 1
        return found


def _rag_context(attrs: dict[str, Any]) -> list[Doc] | None:
    if "rag.context" in attrs:
        return json_docs(attrs["rag.context"]) or [Doc(str(attrs["rag.context"]))]
    if "rag.context.0" in attrs or "rag.context.0.content" in attrs:
        docs = []
        for group in indexed(attrs, "rag.context."):
            if "" in group:
                docs.append(Doc(str(group[""])))
            elif "content" in group:
                docs.append(
                    Doc(
                        str(group["content"]),
                        None if group.get("doc_uri") is None else str(group["doc_uri"]),
                        as_float(group.get("score")),
                    )
                )
        return docs
    return None


def _is_ancestor(candidate: Span, span: Span, by_id: dict[str, Span]) -> bool:
    hops = 0
    while span.parent_span_id in by_id and hops < 1000:
        span = by_id[span.parent_span_id]
        if span is candidate:
            return True
        hops += 1
    return False


def _outermost(retrievals: list[Retrieval], by_id: dict[str, Span]) -> list[Retrieval]:
    """Nested retrieval spans (a framework retriever over a vector-DB client) describe one
    retrieval: keep the outermost one that has document text (or the outermost)."""
    if len(retrievals) < 2:
        return retrievals
    keep = []
    for r in retrievals:
        shadowed = False
        for other in retrievals:
            if other is r or other.reranked or r.reranked:
                continue
            other_has_text = any(d.content for d in other.docs)
            r_has_text = any(d.content for d in r.docs)
            if _is_ancestor(other.span, r.span, by_id) and (other_has_text or not r_has_text):
                shadowed = True  # an outer span already says it
            elif _is_ancestor(r.span, other.span, by_id) and other_has_text and not r_has_text:
                shadowed = True  # the inner span has the text this one lacks
            if shadowed:
                break
        if not shadowed:
            keep.append(r)
    return keep


def _with_tool_results(
    retrievals: list[Retrieval], tools: list[Retrieval], by_id: dict[str, Span]
) -> list[Retrieval]:
    """Tool results join the retrievals, in call order. A tool with a retrieval span inside
    (a retriever tool under an instrumented retriever) is that retrieval, said better by
    the retrieval span; nested tool spans (a framework's over an MCP client's) are one call,
    the outermost."""
    if not tools:
        return retrievals
    keep = [
        t
        for t in tools
        if not any(_is_ancestor(t.span, r.span, by_id) for r in retrievals)
        and not any(o is not t and _is_ancestor(o.span, t.span, by_id) for o in tools)
    ]
    return sorted([*retrievals, *keep], key=lambda r: _BY_TIME(r.span))


def _norm(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def _calls(generations: list[Generation], by_id: dict[str, Span]) -> list[Generation]:
    """Nested LLM spans are one model call (LlamaIndex's `predict` → `chat` → `complete`,
    a framework's chat-model span over the provider SDK's span): one `Generation` per
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
        inner_first = sorted(group, key=lambda g: _depth(g.span, by_id), reverse=True)
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
    calls: list[Generation], retrievals: list[Retrieval], requests: _Requests
) -> list[_Answer]:
    """One model call per user request, in the order they finished. Calls under the same
    request span are one request whatever their prompts say (a condense call, an agent's
    planning turn, the answering call): the one that ended last answers. Calls outside
    any request span are grouped by the user message they answer."""
    rewritten = {_norm(r.query) for r in retrievals if r.query}
    prompts = {id(c): _norm(c.user_query) for c in calls if c.user_query}
    latest: dict[object, _Answer] = {}
    for call in calls:
        if call.output is None or not call.output.strip():
            continue  # a tool call or a failed call, not an answer
        if _norm(call.output) in rewritten:
            continue  # a query rewriter: its output is what the retriever searched for
        output = _norm(call.output)
        if any(p == output for i, p in prompts.items() if i != id(call)):
            continue  # a prompt builder traced as an LLM span: its output is a call's prompt
        request = requests.of(call.span)
        key: object = request.span_id if request is not None else _norm(call.user_query)
        current = latest.get(key)
        if current is None or call.span.end_unix_nano >= current.call.span.end_unix_nano:
            latest[key] = _Answer(call, request)
    return sorted(latest.values(), key=lambda a: a.call.span.end_unix_nano)


def _context(retrievals: list[Retrieval], answer: Generation | None) -> list[Doc]:
    reranked = [r for r in retrievals if r.reranked and r.docs]
    chosen = reranked[-1:] if reranked else retrievals
    if not chosen and answer is not None and answer.tool_results:
        # No tool span says what the tools returned (or none has content): the tool
        # messages in the answering call's input do.
        chosen = [Retrieval(answer.span, None, answer.tool_results, tool="messages")]
    docs: list[Doc] = []
    seen: set[str] = set()
    ids_only: list[Doc] = []
    for r in chosen:
        for doc in r.docs:
            if not doc.content:
                ids_only.append(doc)
                continue
            if doc.content in seen:
                continue
            seen.add(doc.content)
            docs.append(doc)
    if not docs and ids_only and answer is not None:
        system = "\n".join(text for role, text in answer.messages if role == "system")
        if system.strip():
            ids = [d.doc_uri for d in ids_only if d.doc_uri]
            meta: dict[str, Any] = {"source": "system_message"}
            if ids:
                meta["doc_ids"] = ids
            docs.append(Doc(system, None, None, meta))
    return docs


def _query(
    answer: Generation | None,
    retrievals: list[Retrieval],
    top: _Top,
    request: Span | None,
    requests: _Requests,
) -> str | None:
    if top.query:
        return top.query
    if request is not None:
        return requests.question(request)
    if top.chain_query:
        return top.chain_query
    user = answer.user_query if answer is not None else None
    for r in retrievals:
        # A prompt template around the question: the retriever saw the bare question.
        if r.query and (user is None or _norm(r.query) in _norm(user)):
            return r.query
    return user


def _history(answer: Generation | None) -> list[dict[str, str]]:
    if answer is None:
        return []
    last_user = max(
        (i for i, (role, _) in enumerate(answer.messages) if role == "user"), default=-1
    )
    return [
        {"role": role, "content": text}
        for role, text in answer.messages[: max(last_user, 0)]
        if role in _CHAT_ROLES
    ]


def _record(
    common: dict[str, Any],
    *,
    request_id: str,
    span: Span,
    answer: Generation | None,
    request: Span | None,
    requests: _Requests,
    retrievals: list[Retrieval],
    top: _Top,
    error: bool,
    latency_ns: int,
    conventions: set[str],
) -> RagRecord:
    docs = top.docs if top.docs is not None else _context(retrievals, answer)
    # The request's output is what the user got (frameworks parse the model's raw output:
    # DSPy's fields, output parsers, an agent's final answer); else the answering call's.
    response = top.response
    if response is None and request is not None:
        response = _output_text(request)
    if response is None:
        response = answer.output if answer is not None and answer.output else top.chain_response
    query = _query(answer, retrievals, top, request, requests)
    metadata = {"span_name": span.name}
    if request is not None:
        metadata["request_span_name"] = request.name
    searched = next(
        (
            r.query
            for r in retrievals
            if r.query and not r.reranked and _norm(r.query) != _norm(query)
        ),
        None,
    )
    if searched is not None:
        # What the retriever was asked when it was not the user's words (a follow-up
        # condensed into a standalone question, a rewritten query).
        metadata["retrieval_query"] = searched
    if conventions:
        metadata["conventions"] = ",".join(sorted(conventions))
    for key in ("session.id", "user.id", "gen_ai.conversation.id"):
        for source in (span, request):
            if source is not None and isinstance(source.attributes.get(key), str):
                metadata[key] = source.attributes[key]
                break
    return RagRecord.model_validate(
        {
            **common,
            "request_id": request_id,
            "span_id": span.span_id,
            "query": query,
            "history": _history(answer),
            "retrieved_context": [
                {
                    "content": d.content,
                    "doc_uri": d.doc_uri,
                    "score": d.score,
                    "metadata": d.metadata,
                }
                for d in docs
                if d.content is not None
            ],
            "response": response,
            "model": answer.model if answer is not None else None,
            "input_tokens": answer.input_tokens if answer is not None else None,
            "output_tokens": answer.output_tokens if answer is not None else None,
            "latency_ms": max(latency_ns, 0) / 1e6 if latency_ns else None,
            "error": error,
            "metadata": metadata,
        }
    )


# -- sampled traces, extracted where the trace stage's `Extractor` runs them ---------------


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
    this process, or in the evaluation worker processes (`CpuPool`), so that the ingest
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


def _join_log_events(spans: Sequence[Span]) -> list[Span]:
    """Fold the event spans made from OTLP GenAI log events (`monitor.spans.LOG_EVENT_KEY`)
    into the span they belong to: their events join its events, in time order, and a
    `gen_ai.client.inference.operation.details` event's attributes (the call's input and
    output messages) fill the ones the span lacks. Event spans whose span never arrived
    are left out."""
    events = [s for s in spans if s.name in GENAI_EVENTS and s.attribute(LOG_EVENT_KEY)]
    if not events:
        return list(spans)
    own = [s for s in spans if not (s.name in GENAI_EVENTS and s.attribute(LOG_EVENT_KEY))]
    by_id = {s.span_id: s for s in own}
    joined: dict[str, list[SpanEvent]] = {}
    for event_span in events:
        if event_span.parent_span_id in by_id:
            joined.setdefault(event_span.parent_span_id, []).extend(event_span.events)
    out = []
    for span in own:
        extra = joined.get(span.span_id)
        if not extra:
            out.append(span)
            continue
        attributes = dict(span.attributes)
        for event in extra:
            if event.name == OPERATION_DETAILS:
                for key, value in event.attributes.items():
                    attributes.setdefault(key, value)
        out.append(
            Span(
                span.trace_id,
                span.span_id,
                span.parent_span_id,
                span.name,
                span.start_unix_nano,
                span.end_unix_nano,
                attributes=attributes,
                events=sorted([*span.events, *extra], key=attrgetter("time_unix_nano")),
                error=span.error,
                service=span.service,
                parent_is_remote=span.parent_is_remote,
                resource=span.resource,
            )
        )
    return out
