"""A finished trace (all its spans) → one `RagRecord` per answered RAG request.

How the parts are found, whatever the span tree looks like:
- answers are the LLM spans that produced text, minus query rewriters (an LLM whose
  output is the query a later retrieval used); LLM spans asking the same user question
  (an agent's tool round-trips, nested framework + SDK spans) are one answer, the one
  that ended last. Many CHAIN spans add nothing: only the topmost chain's input and
  output are read, as the request's query and final answer.
- context is taken from the retrieval spans before each answer (by time, not by tree
  position: the chat span is often a sibling of the retriever, which may sit several
  levels deep), in retrieval order; a reranker's output replaces what it reranked.
  Documents that carry only ids (GenAI requires no more) get their text from the chat
  span's system message, the only place the context then exists.
- the explicit fallback `rag.query` / `rag.response` / `rag.context` wins over inference.
A trace with none of these signals is not a RAG request and yields no record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from monitor.receivers.otlp.conventions import (
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
)
from monitor.receivers.otlp.decode import Span
from monitor.records import RagRecord

_CHAT_ROLES = frozenset({"user", "assistant", "tool", "developer"})
_ABSENT: Any = object()
_BY_TIME = attrgetter("start_unix_nano", "end_unix_nano")


@dataclass(slots=True)
class _Top:
    query: str | None = None  # `rag.query`, else the topmost chain's input
    response: str | None = None  # the topmost chain's output
    explicit_response: str | None = None  # `rag.response`
    docs: list[Doc] | None = None  # `rag.context`
    feedback: str | None = None


def extract_records(
    spans: Sequence[Span], *, route_attribute: str = "http.route"
) -> list[RagRecord]:
    """All records in one trace's spans (possibly none)."""
    if not spans:
        return []
    ordered, by_id, root = _shape(spans)
    retrievals: list[Retrieval] = []
    generations: list[Generation] = []
    conventions: set[str] = set()
    for span in ordered:
        retrieval = read_retrieval(span)
        if retrieval is not None:
            retrievals.append(retrieval)
            continue
        generation = read_generation(span)
        if generation is not None:
            generations.append(generation)
            conventions |= generation.conventions
    top = _top(ordered, by_id)
    signals = (top.query, top.response, top.explicit_response, top.docs)
    if not retrievals and not generations and all(v is None for v in signals):
        return []
    retrievals = _outermost(retrievals, by_id)
    answers = _answers(generations, retrievals)
    common: dict[str, Any] = {
        "trace_id": root.trace_id,
        "service": root.service,
        "route": _route(root, ordered, route_attribute),
        "timestamp": root.start_unix_nano / 1e9 if root.start_unix_nano else None,
        "feedback": top.feedback,
    }
    if len(answers) <= 1:
        answer = answers[0] if answers else (generations[-1] if generations else None)
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
            retrievals=window or retrievals,
            top=top,
            error=any(s.error for s in ordered),
            latency_ns=root.end_unix_nano - root.start_unix_nano,
            conventions=conventions,
        )
        return [record]
    records = []
    previous_end = 0
    for answer in answers:
        start = answer.span.start_unix_nano
        window = [r for r in retrievals if previous_end <= r.span.start_unix_nano <= start]
        first = min([start, *(r.span.start_unix_nano for r in window)])
        records.append(
            _record(
                common,
                request_id=f"{root.trace_id}-{answer.span.span_id}",
                span=answer.span,
                answer=answer,
                retrievals=window,
                top=_Top(feedback=top.feedback),
                error=answer.span.error or any(r.span.error for r in window),
                latency_ns=answer.span.end_unix_nano - first,
                conventions=conventions,
            )
        )
        previous_end = answer.span.end_unix_nano
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


# Attribute keys `sampling_view` reads on every span (decoders can settle absence early).
VIEW_KEYS = ("rag.feedback",)


def _feedback(spans: list[Span]) -> str | None:
    """`rag.feedback` of the earliest span where it is "positive" or "negative"."""
    for span in spans:
        value = span.attribute("rag.feedback")
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
    """The request's own query/answer: `rag.*` anywhere, else the topmost chain span."""
    top = _Top(feedback=_feedback(spans))
    chain: Span | None = None
    chain_depth = 1 << 30
    for span in spans:
        a = span.attributes
        if top.query is None and isinstance(a.get("rag.query"), str):
            top.query = a["rag.query"]
        if top.explicit_response is None and isinstance(a.get("rag.response"), str):
            top.explicit_response = a["rag.response"]
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
        if top.query is None:
            top.query = find_text(a.get("input.value", a.get("traceloop.entity.input")), QUERY_KEYS)
        if top.response is None:
            top.response = find_text(
                a.get("output.value", a.get("traceloop.entity.output")), ANSWER_KEYS
            )
    return top


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


def _norm(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def _answers(generations: list[Generation], retrievals: list[Retrieval]) -> list[Generation]:
    """One generation per answered user question, in the order they finished."""
    rewritten = {_norm(r.query) for r in retrievals if r.query}
    latest: dict[str, Generation] = {}
    for gen in generations:
        if gen.output is None or not gen.output.strip():
            continue  # a tool call or a failed call, not an answer
        if _norm(gen.output) in rewritten:
            continue  # a query rewriter: its output is what the retriever searched for
        key = _norm(gen.user_query)
        current = latest.get(key)
        if current is None or gen.span.end_unix_nano >= current.span.end_unix_nano:
            latest[key] = gen
    return sorted(latest.values(), key=lambda g: g.span.end_unix_nano)


def _context(retrievals: list[Retrieval], answer: Generation | None) -> list[Doc]:
    reranked = [r for r in retrievals if r.reranked and r.docs]
    chosen = reranked[-1:] if reranked else retrievals
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


def _query(answer: Generation | None, retrievals: list[Retrieval], top: _Top) -> str | None:
    if top.query:
        return top.query
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
    retrievals: list[Retrieval],
    top: _Top,
    error: bool,
    latency_ns: int,
    conventions: set[str],
) -> RagRecord:
    docs = top.docs if top.docs is not None else _context(retrievals, answer)
    response = top.explicit_response
    if response is None:
        response = answer.output if answer is not None and answer.output else top.response
    metadata = {"span_name": span.name}
    if conventions:
        metadata["conventions"] = ",".join(sorted(conventions))
    for key in ("session.id", "user.id", "gen_ai.conversation.id"):
        if isinstance(span.attributes.get(key), str):
            metadata[key] = span.attributes[key]
    return RagRecord.model_validate(
        {
            **common,
            "request_id": request_id,
            "span_id": span.span_id,
            "query": _query(answer, retrievals, top),
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
