"""What was extracted from a trace, as text a person can read: query, history, context
documents and response, each passed through redaction first. Used by the opt-in
`extracted` field of results lines and by `/debug/records`. Evaluators' explanations
quote and paraphrase that text too (the unsupported sentences, a judge's reasoning):
`shown_results` leaves them out of results lines and evaluation events unless the
operator asked for them. Nothing else in the monitor writes user text out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from monitor.records import RagRecord
from monitor.results import EvalResult

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


def shown_results(
    results: Mapping[str, EvalResult], *, explanations: bool, redact: Redact | None
) -> dict[str, EvalResult]:
    """`results` as they may leave the process: each explanation, which carries the
    record's text, redacted with `explanations` and left out (None) without. An error
    says what went wrong with the evaluation and is kept."""
    shown = {}
    for name, result in results.items():
        text = result.explanation
        if text is not None:
            text = (redact(text) if redact is not None else text) if explanations else None
            result = dataclasses.replace(result, explanation=text)
        shown[name] = result
    return shown
