"""A record's parts, once the extraction rule has chosen the answering call, its request
and its retrievals: query, history, context, response and metadata (rules 4 to 6 of
`_extraction_rule.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.extraction._doubt import context_doubts
from monitor.extraction._instrumentations import convention_of, instrumentation_of
from monitor.extraction._messages import is_placeholder, parts_text, type_of
from monitor.extraction._prompt_documents import (
    documents_from_prompt,
    question_in,
    varying_question,
)
from monitor.extraction._prompt_layouts import framework_documents
from monitor.extraction._request_spans import (
    Requests,
    container_input,
    container_output,
    writes_request,
)
from monitor.extraction._sources import indexed_docs, text_of
from monitor.extraction._span_values import (
    QUERY_KEYS,
    Doc,
    Generation,
    Retrieval,
    find_text,
    json_docs,
    loads,
    normalized,
)
from monitor.extraction._structure import found_by_structure
from monitor.extraction._suspect import CONTENT_REASONS, INSTRUMENTATION, suspect_reason
from monitor.extraction._table import current
from monitor.extraction._trace_tree import depth_of, feedback_of
from monitor.records import (
    CONTEXT_DOUBT,
    CONTEXT_EVIDENCE,
    CONTEXT_SOURCE,
    EXTRACTION_SUSPECT,
    INSTANCE_ID,
    RESOURCE,
    USER_ID,
    RagRecord,
    resource_digest,
    sender_key,
)
from monitor.records.where import MAX_CHARS
from monitor.shared.labels import bounded_label
from monitor.spans import Span

_CHAT_ROLES = frozenset({"user", "assistant", "tool", "developer"})


@dataclass(slots=True)
class TraceWide:
    query: str | None = None  # `rag.query`
    response: str | None = None  # `rag.response`
    docs: list[Doc] | None = None  # `rag.context`
    feedback: str | None = None
    chain_query: str | None = None  # the topmost chain's input
    chain_response: str | None = None  # the topmost chain's output


def trace_wide(spans: list[Span], by_id: dict[str, Span]) -> TraceWide:
    """The explicit `rag.*` attributes anywhere, and the topmost chain span's input and
    output (used when no request span contains the model calls)."""
    top = TraceWide(feedback=feedback_of(spans))
    chain: Span | None = None
    chain_depth = 1 << 30
    for span in spans:
        a = span.attributes
        if top.query is None:
            top.query = _rag_text(a.get("rag.query"))
        if top.response is None:
            top.response = _rag_text(a.get("rag.response"))
        if top.docs is None:
            top.docs = _rag_context(a)
        if writes_request(span):
            depth = depth_of(span, by_id)
            if depth < chain_depth:
                chain, chain_depth = span, depth
    if chain is not None:
        top.chain_query = find_text(container_input(chain), QUERY_KEYS)
        top.chain_response = container_output(chain)
    return top


def _rag_text(value: Any) -> str | None:
    """A `rag.query` / `rag.response` value: a string, a JSON string literal decoded (SDKs
    that JSON-encode every attribute send `"text"` quoted)."""
    if not isinstance(value, str):
        return None
    decoded = loads(value)
    return decoded if isinstance(decoded, str) else value


def _rag_context(attrs: dict[str, Any]) -> list[Doc] | None:
    if "rag.context" in attrs:
        value = attrs["rag.context"]
        text = _rag_text(value)
        return json_docs(text if text is not None else value) or [Doc(str(text or value))]
    if "rag.context.0" in attrs or "rag.context.0.content" in attrs:
        return indexed_docs(attrs, "rag.context")
    return None


def conversation_of(spans: Sequence[Span | None]) -> str | None:
    """The conversation (session) id: on the first of these spans that carries one, the
    first a convention's `conversation` source gives, in table order (the user's first)."""
    table = current().table
    for span in spans:
        if span is None or table.conversation_keys.isdisjoint(span.attributes):
            continue
        for source in table.conversation:
            text = text_of(source, span.attributes)
            if text:
                return text
    return None


@dataclass(slots=True)
class Context:
    """A record's documents, where they came from (`monitor.records.CONTEXT_SOURCES`), and
    for documents found by structure or taken from the prompt, the evidence."""

    docs: list[Doc]
    source: str
    evidence: str | None = None
    # The record's question when the query was the whole user message around it: what a
    # retrieval found by structure was asked, or what the message labels as the question.
    query: str | None = None
    doubt: str | None = None  # a reason (`DOUBTS`) the prompt was not split at all


def context_of(
    retrievals: list[Retrieval],
    answer: Generation | None,
    trace_spans: list[Span],
    key: tuple[str, str],
    query: str | None,
    sender: str = "",
) -> Context:
    """The documents of the retrievals and tool calls before the answer (a reranker's
    output replacing what it reranked); when none carries text, those found by structure,
    else those in the answering call's prompt without the `query` and the template of the
    service and route `key` (`README.md`, "Documents no convention names")."""
    reranked = [r for r in retrievals if r.reranked and r.docs]
    chosen = reranked[-1:] if reranked else retrievals
    if not chosen and answer is not None and answer.tool_results:
        # No tool span says what the tools returned (or none has content): the tool
        # messages in the answering call's input do.
        chosen = [Retrieval(answer.span, None, answer.tool_results, tool="messages")]
    docs: list[Doc] = []
    seen: set[str] = set()
    ids: list[str] = []
    retrieved = False
    for r in chosen:
        for doc in r.docs:
            if not doc.content:
                if doc.doc_uri:
                    ids.append(doc.doc_uri)
                continue
            if doc.content in seen:
                continue
            seen.add(doc.content)
            docs.append(doc)
            retrieved = retrieved or r.tool is None
    if docs:
        return Context(docs, "retrieval_span" if retrieved else "tool_result")
    if answer is not None and answer.documents:
        # Documents the app handed the model as parts of its messages (document and
        # search-result blocks): what the model was given, named by their source.
        evidence = f"{len(answer.documents)} document parts in the model call's messages"
        return Context(answer.documents, "message_documents", evidence)
    if answer is None or not answer.messages:
        return Context([], "none")
    # A user message that is a template around the question (documents, then `Question:
    # ...`): the question is what it labels.
    whole = query is not None and query == answer.user_query
    labelled = question_in(query) if whole and query else None
    if whole and query and labelled is None:
        labelled = varying_question(query, key, sender=sender)
    joined = _joined_messages(answer, trace_spans)
    if joined and labelled:
        # The messages joined by single newlines: a system message or an earlier turn ends
        # on the line before the question.
        labelled = labelled.splitlines()[-1].strip() or labelled
    asked = labelled or query
    found = found_by_structure(trace_spans, answer, asked)
    if found is not None:
        bare = found.query if _in_whole_prompt(found.query, query, answer) else labelled
        return Context(found.docs, "structure", found.evidence, bare)
    if any(r.tool is not None for r in chosen):
        return Context([], "none", query=labelled)  # the tools returned nothing readable
    if joined and framework_documents(answer.messages[0][1]) is None:
        # The earlier turns' documents and answers cannot be told from the last turn's
        # without a default RAG prompt's header: none is taken rather than guessed.
        evidence = "a chat memory joined into one string around a template of the app's own"
        return Context([], "prompt", evidence, labelled, doubt="prompt_not_split")
    # Documents that reach the model only inside its prompt: the retriever was not traced,
    # or its span holds ids alone (GenAI requires no more).
    split = documents_from_prompt(_this_request(answer.messages), asked, ids, key, sender=sender)
    if not split:
        return Context([], "none", query=labelled)
    evidence = f"{len(split)} documents split from the model call's prompt"
    return Context(split, "prompt", evidence, labelled)


def _this_request(messages: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The prompt as the splitter reads it (the system messages and the last user
    message), with the other turns of this request among the system messages: those after
    the last answer the model gave to a user (documents sent as a user message of their
    own before the question), and assistant turns before any user one (context the app put
    in the model's mouth). Earlier questions and their answers stay history."""
    last_user = max((i for i, (role, _) in enumerate(messages) if role == "user"), default=-1)
    if last_user < 0:
        return messages
    start = 0
    asked = False
    for i, (role, _) in enumerate(messages[:last_user]):
        if role == "user":
            asked = True
        elif role == "assistant" and asked:
            start = i + 1  # an answer: what came before it is history
    extra = [
        ("system", text)
        for i, (role, text) in enumerate(messages[:last_user])
        if role in ("user", "assistant")
        and (i >= start or (role == "assistant" and i < _first_user(messages)))
    ]
    if not extra:
        return messages
    system = [m for m in messages[:last_user] if m[0] == "system"]
    return [*system, *extra, messages[last_user]]


def _first_user(messages: list[tuple[str, str]]) -> int:
    return next((i for i, (role, _) in enumerate(messages) if role == "user"), len(messages))


def _joined_messages(answer: Generation, trace_spans: list[Span]) -> bool:
    """Whether the prompt is one string holding every message of the request (its system
    message, its chat memory's turns) joined by newlines: one message, traced by a stack
    whose entry says it joins them (`joins_messages`)."""
    if len(answer.messages) != 1:
        return False
    convention = convention_of(trace_spans)
    return convention is not None and convention.joins_messages


def _query(
    answer: Generation | None,
    retrievals: list[Retrieval],
    top: TraceWide,
    request: Span | None,
    requests: Requests,
) -> str | None:
    if top.query:
        return top.query
    asked = requests.question(request) if request is not None else top.chain_query
    if asked and not (request is not None and _placeholder(request, asked, answer)):
        return asked
    user = answer.user_query if answer is not None else None
    for r in retrievals:
        # A prompt template around the question: the retriever saw the bare question.
        if r.query and (user is None or normalized(r.query) in normalized(user)):
            return r.query
    return user


def _in_whole_prompt(asked: str | None, query: str | None, answer: Generation) -> bool:
    """Whether the question `asked` of a retrieval found by structure is the bare question
    inside `query`, the answering call's whole user message."""
    if asked is None or query is None or query != answer.user_query:
        return False
    bare = normalized(asked)
    return bare != normalized(query) and bare in normalized(query)


def _placeholder(request: Span, question: str | None, answer: Generation | None) -> bool:
    """A request span that only marks a run (`Execution Started` in, `Execution Completed`
    out): the model was never sent its input, and did not return its output (neither
    holds the other). Either alone is no sign: a follow-up is condensed, an output parsed."""
    if answer is None or not answer.messages or not (answer.output and answer.output.strip()):
        return False
    output = container_output(request)
    if question is None or output is None:
        return False
    asked = normalized(question)
    if any(asked in normalized(text) for _, text in answer.messages):
        return False
    said, returned = normalized(output), normalized(answer.output)
    return said not in returned and returned not in said


def _answer_text(response: str | None) -> str | None:
    """An answer that is a provider's content blocks as JSON (every item a part of a shape
    the table names: a citations block, text blocks) read for their text; any other
    answer as it is (an app's own JSON answer stays)."""
    if response is None or response.lstrip()[:1] not in ("[", "{"):
        return response
    parsed = loads(response)
    items = parsed if isinstance(parsed, list) else [parsed]
    table = current().table
    if not items or not all(
        isinstance(i, dict)
        and (
            ((t := type_of(i)) is not None and t in table.part_types)
            or any(k in table.part_keys for k in i)
        )
        for i in items
    ):
        return response
    return parts_text(items) or response


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


def build_record(
    common: dict[str, Any],
    *,
    request_id: str,
    span: Span,
    answer: Generation | None,
    request: Span | None,
    requests: Requests,
    retrievals: list[Retrieval],
    top: TraceWide,
    error: bool,
    latency_ns: int,
    conventions: set[str],
    arguments: list[str],
    trace_spans: list[Span],
    max_documents: int | None = None,
    address: str | None = None,
    trace_conversation: str | None = None,
) -> RagRecord:
    """A record of the trace. `trace_conversation` is `conversation_of(trace_spans)`, read
    once for the trace's records (each would otherwise read every span of the trace)."""
    query = _query(answer, retrievals, top, request, requests)
    if top.docs is not None:
        context = Context(top.docs, "convention" if top.docs else "none")
    else:
        key = (str(common.get("service") or ""), str(common.get("route") or ""))
        # The template's sender as the sender screen keys it (`monitor.records.sender`):
        # the address the receiver saw, which a forger does not choose, then the instance
        # id and the resource's digest.
        sender = sender_key(address, _instance(span), resource_digest(span.resource)) or ""
        context = context_of(retrievals, answer, trace_spans, key, query, sender)
        query = context.query or query
    docs = context.docs
    if max_documents is not None:
        docs = docs[: max_documents + 1]  # one past: the bound's cut shows
    # The request's output is what the user got (frameworks parse the model's raw output:
    # a program's output fields, output parsers, an agent's final answer); else the
    # answering call's.
    response = top.response
    if response is None and request is not None:
        if not _placeholder(request, requests.question(request), answer):
            response = container_output(request)
    if response is None:
        response = answer.output if answer is not None and answer.output else top.chain_response
    # What stands where content was withheld is no content; a provider's content blocks
    # handed back as the answer (a citations block) are read for their text.
    query = None if is_placeholder(query) else query
    response = None if is_placeholder(response) else _answer_text(response)
    kept = [d for d in docs if not is_placeholder(d.content)]
    if docs and not kept:
        context = Context([], "none")  # placeholders only: no document was captured
    docs = kept
    metadata = {"span_name": span.name}
    if request is not None:
        metadata["request_span_name"] = request.name
    searched = next(
        (
            r.query
            for r in retrievals
            if r.query and not r.reranked and normalized(r.query) != normalized(query)
        ),
        None,
    )
    if searched is not None:
        # What the retriever was asked when it was not the user's words (a follow-up
        # condensed into a standalone question, a rewritten query).
        metadata["retrieval_query"] = searched
    if conventions:
        metadata["conventions"] = ",".join(sorted(conventions))
    metadata[CONTEXT_SOURCE] = context.source
    if context.evidence is not None:
        metadata[CONTEXT_EVIDENCE] = context.evidence
    if context.source == "prompt" and answer is not None:
        system = [text for role, text in answer.messages if role == "system"]
        texts = [d.content for d in docs if d.content]
        doubts = context_doubts(query, texts, response, system)
        if context.doubt is not None:
            doubts = (context.doubt, *doubts)
        if doubts:
            metadata[CONTEXT_DOUBT] = ",".join(doubts)
    suspect = suspect_reason(
        query,
        docs if top.docs is None else [],
        response,
        answer is not None,
        arguments,
        model_output=answer.output if answer is not None else None,
    )
    if suspect is not None:
        metadata[EXTRACTION_SUSPECT] = suspect
    if suspect in CONTENT_REASONS:
        metadata[INSTRUMENTATION] = instrumentation_of(trace_spans)
    for source in (span, request):
        if source is not None and isinstance(source.attributes.get(USER_ID), str):
            metadata[USER_ID] = source.attributes[USER_ID]
            break
    instance = _instance(span)
    if instance:
        metadata[INSTANCE_ID] = instance
    if span.resource:
        metadata[RESOURCE] = resource_digest(span.resource)
    return RagRecord.model_validate(
        {
            **common,
            "conversation": conversation_of([span, request]) or trace_conversation,
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


def _instance(span: Span) -> str | None:
    """The resource's `service.instance.id`, cut like a label (None: none)."""
    instance = span.resource.get(INSTANCE_ID)
    return bounded_label(instance, MAX_CHARS) if isinstance(instance, str) and instance else None
