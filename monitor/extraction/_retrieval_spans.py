"""Retrieval spans: the query and the documents, in retrieval order, of a retriever,
reranker or vector-DB span, where the conventions table says each convention writes them
(`query`, `documents`, a reranker's `reranked`): in the span's attributes, or in its
events (one document each, or a content log line listing them)."""

from __future__ import annotations

from monitor.extraction._sources import docs_of, is_absent, present, raw, text_of
from monitor.extraction._span_roles import (
    RETRIEVAL,
    content_events,
    reading_order,
    sources,
    span_role,
)
from monitor.extraction._span_values import QUERY_KEYS, Doc, Retrieval, find_text
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


def _event_docs(span: Span, undeclared_only: bool) -> list[Doc] | None:
    """The documents in the span's events, in event order; None when no event holds any."""
    found: list[Doc] | None = None
    for event_sources, fields in content_events(span, "documents", undeclared_only=undeclared_only):
        for source, _ in event_sources:
            docs = docs_of(source, fields)
            if docs is not None:
                found = [*(found or []), *docs]
                break
    return found


def read_retrieval(span: Span) -> Retrieval | None:
    """The query and documents of a retrieval span, or None if it is not one: a span
    declared a retrieval, or one that declares nothing but carries documents where a
    convention writes them on any span (the table's `undeclared` document sources: indexed
    documents, scored nodes, `db.query.result` events)."""
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
    if not docs and span.events:
        docs = _event_docs(span, undeclared_only=not declared) or docs
    if declared or docs is not None:
        return Retrieval(span, _query(span), docs or [])
    return None
