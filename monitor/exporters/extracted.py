"""What was extracted from a trace, as text a person can read: query, history, context
documents and response, each passed through redaction first. Used by the opt-in
`extracted` field of results lines and by `/debug/records`; nothing else in the monitor
writes user text out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.records import RagRecord

Redact = Callable[[str], str]


def extracted_text(
    record: RagRecord, redact: Redact | None, limit: int | None = None
) -> dict[str, Any]:
    """The record's text parts, redacted, each cut at `limit` characters if given."""

    def text(value: str | None) -> str | None:
        if value is None:
            return None
        if redact is not None:
            value = redact(value)
        if limit is not None and len(value) > limit:
            value = value[: limit - 1] + "…"
        return value

    return {
        "query": text(record.query),
        "history": [{"role": m.role, "content": text(m.content)} for m in record.history],
        "context": [
            {"doc_uri": doc.doc_uri, "content": text(doc.content)}
            for doc in record.retrieved_context
        ],
        "response": text(record.response),
    }
