"""Retrieval spans: the query and the documents, in retrieval order, of a retriever,
reranker or vector-DB span, in each convention (OpenInference `RETRIEVER` / `RERANKER`,
GenAI `retrieval`, OpenLLMetry's retriever tasks and `db.query.result` events)."""

from __future__ import annotations

from typing import Any

from monitor.extraction._model_call_spans import spring_ai_texts
from monitor.extraction._span_roles import RETRIEVAL, span_role
from monitor.extraction._span_values import (
    QUERY_KEYS,
    Doc,
    Retrieval,
    as_doc,
    as_float,
    as_str,
    content_text,
    find_text,
    indexed,
    json_docs,
    loads,
)
from monitor.spans import Span


def _indexed_docs(attrs: dict[str, Any], prefix: str) -> list[Doc]:
    """OpenInference `<prefix>.N.document.{content,id,score,metadata}`."""
    docs = []
    for group in indexed(attrs, prefix):
        content = group.get("document.content")
        uri = group.get("document.id")
        metadata = loads(group.get("document.metadata"))
        metadata = metadata if isinstance(metadata, dict) else None
        if uri is None and metadata is not None:
            uri = metadata.get("source")
        if content is None and uri is None:
            continue
        docs.append(
            Doc(
                content=content_text(content),
                doc_uri=None if uri is None else str(uri),
                score=as_float(group.get("document.score")),
                metadata=metadata,
            )
        )
    return docs


def read_retrieval(span: Span) -> Retrieval | None:
    """The query and documents of a retrieval span, or None if it is not one."""
    a = span.attributes
    kind = as_str(a.get("openinference.span.kind"))
    if kind == "RERANKER":
        return Retrieval(
            span, a.get("reranker.query"), _indexed_docs(a, "reranker.output_documents."), True
        )
    if kind == "RETRIEVER" or "retrieval.documents.0.document.content" in a:
        query = find_text(a.get("input.value"), QUERY_KEYS)
        return Retrieval(span, query, _indexed_docs(a, "retrieval.documents."))
    if span_role(span) == RETRIEVAL or "gen_ai.retrieval.documents" in a:
        query = a.get("gen_ai.retrieval.query.text", a.get("db.vector.query.content"))
        docs = json_docs(a.get("gen_ai.retrieval.documents")) or _spring_ai_documents(span)
        if "genkit:input" in a:  # a RetrieverRequest in, a RetrieverResponse out
            request = loads(a["genkit:input"])
            asked = request.get("query") if isinstance(request, dict) else None
            query = content_text(asked.get("content")) if isinstance(asked, dict) else query
            docs = docs or json_docs(a.get("genkit:output")) or []
        # OpenLLMetry 0.62's entity input/output; LangSmith's run inputs and outputs
        for source, result in (
            ("traceloop.entity.input", "traceloop.entity.output"),
            ("gen_ai.prompt", "gen_ai.completion"),
        ):
            if source in a or result in a:
                query = query or find_text(a.get(source), QUERY_KEYS)
                docs = docs or json_docs(a.get(result)) or []
        return Retrieval(span, query if isinstance(query, str) else None, docs)
    output = a.get("traceloop.entity.output")
    if isinstance(output, str) and '"node' in output and "score" in output:
        nodes = _scored_nodes(output)
        if nodes is not None:  # OpenLLMetry's LlamaIndex retriever: a task returning nodes
            return Retrieval(span, find_text(a.get("traceloop.entity.input"), QUERY_KEYS), nodes)
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


def _scored_nodes(value: Any) -> list[Doc] | None:
    """A list of scored nodes (`{"node": {"text", "metadata", ...}, "score"}`, each maybe a
    JSON string: LlamaIndex's NodeWithScore as OpenLLMetry serializes it), else None."""
    value = loads(value)
    if not isinstance(value, list) or not value:
        return None
    docs = []
    for item in value:
        item = loads(item)
        if not (isinstance(item, dict) and isinstance(item.get("node"), dict)):
            return None
        doc = as_doc(item)
        if doc is None or doc.content is None:
            return None
        docs.append(doc)
    return docs


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
