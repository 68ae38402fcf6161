"""Traces that ask nothing: no user question, so no record and nothing wrong with their
extraction. A RAG service traces them beside its requests:

- `indexing`: documents written to a store — a retrieval span whose database operation is a
  write (`<store> add` / `delete` in `db.operation.name`), or a span declared an indexer —
  with the embedding calls under it;
- `embedding_only`: embedding calls and no model call that answers (a startup dimension
  probe, each document embedded in a trace of its own, an embedder span alone, an index
  build, an embeddings endpoint called by a REST client: an HTTP client span alone);
- `health_check`: a trace whose root serves a probe path (`/health`, `/healthz`,
  `/actuator/health/liveness`, `/readyz`, ...).

The stacks seen tracing each are in the extraction README ("Traces that ask nothing").
The trace stage counts them in `traces_not_rag_total{reason}` and warns about none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from monitor.conventions import EMBED_METHODS, EMBED_PATHS, PROBE_PATHS, STORE_WRITES
from monitor.extraction._span_roles import EMBEDDINGS, INDEXING, RETRIEVAL, span_role
from monitor.extraction._trace_tree import trace_shape
from monitor.spans import Span

ASKS_NOTHING: Final = ("indexing", "embedding_only", "health_check")
_OPERATION_KEYS = ("db.operation.name", "db.operation")
_PATH_KEYS = ("http.route", "url.path", "http.target")
_URL_KEYS = ("url.full", "http.url", *_PATH_KEYS)


def is_indexing(span: Span) -> bool:
    """A span that writes documents to a store: declared an indexer, or a retrieval span
    whose database operation is a write."""
    role = span_role(span)
    if role == INDEXING:
        return True
    if role != RETRIEVAL:
        return False
    a = span.attributes
    operation = next((a[k] for k in _OPERATION_KEYS if isinstance(a.get(k), str)), None)
    return isinstance(operation, str) and operation.strip().lower() in STORE_WRITES


def _embeds(span: Span) -> bool:
    """An HTTP client call to an embeddings endpoint (the table's `EMBED_PATHS` and
    `EMBED_METHODS`): a framework whose embedding model has no span of its own."""
    a = span.attributes
    urls = [a[k] for k in _URL_KEYS if isinstance(a.get(k), str)]
    urls += [w for w in span.name.split() if w.startswith("/")]
    for url in urls:
        last = str(url).split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1].lower()
        if last in EMBED_PATHS or last.endswith(EMBED_METHODS):
            return True
    return False


def _probe_path(root: Span) -> str | None:
    a = root.attributes
    paths = [a[k] for k in _PATH_KEYS if isinstance(a.get(k), str)]
    paths += [w for w in root.name.split() if w.startswith("/")]  # `GET /healthz`
    for path in paths:
        last = path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1].lower()
        if last in PROBE_PATHS:
            return str(path)
    return None


def asks_nothing(spans: Sequence[Span]) -> tuple[str, str] | None:
    """For a trace that gave no record: the reason it asks nothing (`ASKS_NOTHING`) and the
    span that shows it, or None when it may be a request whose extraction failed."""
    if not spans:
        return None
    ordered, _, root = trace_shape(spans)
    indexing = next((s for s in ordered if is_indexing(s)), None)
    if indexing is not None:
        return "indexing", f"span {indexing.name!r}"
    embedding = next((s for s in ordered if span_role(s) == EMBEDDINGS or _embeds(s)), None)
    if embedding is not None:
        return "embedding_only", f"span {embedding.name!r}"
    path = _probe_path(root)
    if path is not None:
        return "health_check", f"span {root.name!r} serves {path}"
    return None
