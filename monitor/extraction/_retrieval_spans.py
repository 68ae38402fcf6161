"""Retrieval spans: the query and the documents, in retrieval order, of a retriever,
reranker or vector-DB span, where the conventions table says each convention writes them
(`query`, `documents`, a reranker's `reranked`), and in span events: Spring AI's
query-response log line and OpenLLMetry's `db.query.result` events."""

from __future__ import annotations

from typing import Any

from monitor.extraction._model_call_spans import spring_ai_texts
from monitor.extraction._sources import docs_of, is_absent, present, raw, text_of
from monitor.extraction._span_roles import RETRIEVAL, reading_order, sources, span_role
from monitor.extraction._span_values import (
    QUERY_KEYS,
    Doc,
    Retrieval,
    as_float,
    content_text,
    find_text,
    loads,
)
from monitor.spans import Span


def _query(span: Span) -> str | None:
    a = span.attributes
    for source in sources(span, "query"):
        value = raw(source, a)
        if is_absent(value):
            continue
        text = find_text(value, QUERY_KEYS) if source.encoding == "json" else text_of(source, a)
        if text:
            return text
    return None


def read_retrieval(span: Span) -> Retrieval | None:
    """The query and documents of a retrieval span, or None if it is not one: a span
    declared a retrieval, or one that declares nothing but carries documents where a
    convention writes them on any span (OpenInference's, GenAI's, OpenLLMetry's scored
    nodes), or `db.query.result` events."""
    a = span.attributes
    declared = span_role(span) == RETRIEVAL
    for convention in reading_order(span) if declared else ():
        for source in convention.reranked:
            if present(source, a):
                return Retrieval(span, _query(span), docs_of(source, a) or [], reranked=True)
    docs: list[Doc] | None = None
    for source in sources(span, "documents", undeclared_only=not declared):
        docs = docs_of(source, a)
        if docs is not None:
            break
    if declared or docs is not None:
        return Retrieval(span, _query(span), docs or _spring_ai_documents(span))
    results = [e for e in span.events if e.name.endswith("query.result")] if span.events else []
    if results:
        return Retrieval(
            span, a.get("db.query.text") or None, [_event_doc(e.attributes) for e in results]
        )
    return None


def _spring_ai_documents(span: Span) -> list[Doc]:
    """A Spring AI vector store span's documents, from its query-response log line
    (`spring.ai.vectorstore.observations.log-query-response`), in order."""
    for event in span.events if span.events else []:
        if event.name == "spring_ai.vector_store.response":
            return [Doc(text) for text in spring_ai_texts(event.attributes.get("body"))]
    return []


def _event_doc(attrs: dict[str, Any]) -> Doc:
    """An OpenLLMetry `db.query.result` event: `<prefix>.{document,id,score,distance,metadata}`."""
    fields: dict[str, Any] = {}
    for key, value in attrs.items():
        fields[key.rpartition(".")[2]] = value
    metadata = loads(fields.get("metadata"))
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    if "distance" in fields:
        metadata["distance"] = fields["distance"]
    uri = fields.get("id")
    return Doc(
        content=content_text(fields.get("document")),
        doc_uri=None if uri is None else str(uri),
        score=as_float(fields.get("score")),
        metadata=metadata or None,
    )
