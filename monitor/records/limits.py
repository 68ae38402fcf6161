"""What a record may hold and what it is taken to cost (`record_limits`): `bound_record`
cuts a record to its `SizeLimits` and says what it cut; `record_bytes` is what the queues'
byte bounds count it as."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from monitor.records import USER_ID, ContextDoc, RagRecord, RecordError
from monitor.shared.labels import bounded_label


@dataclass(frozen=True, slots=True)
class SizeLimits:
    """Largest text, in characters, a record takes into evaluation, and most documents
    (`record_limits`).

    Over its limit the query, a history turn and a document are truncated with
    `TRUNCATED` (what is kept still says what was asked and found); documents past the
    context total, or past `max_documents`, are dropped. A response or expected response
    over its limit rejects the record (`response_too_large`): scoring part of an answer
    would misjudge all of it. A `service`, `version` or `route` longer than `label_chars`
    is cut (`bounded_label`): each becomes a label value of every series the record
    counts in. So are a `conversation` id and the `user.id` in `metadata` (`USER_ID`): ids,
    written into every results line (the conversation's also kept by the alert rules), cut
    so that distinct ids stay distinct.
    """

    query_chars: int = 65_536
    document_chars: int = 262_144
    context_chars: int = 2_097_152
    response_chars: int = 262_144
    max_documents: int = 1_000
    label_chars: int = 128


TRUNCATED = " [truncated by rag-monitor: {} characters]"
LABEL_FIELDS: tuple[Literal["service", "version", "route"], ...] = ("service", "version", "route")
# What `bound_record` says it cut: a part of the text, or a label field.
Cut = Literal[
    "query", "context", "documents", "service", "version", "route", "conversation", "user_id"
]
# Bytes a record is taken to hold besides its text (for the queues' byte bounds): a
# document or a history turn is a model object with its own fields, a record has ids,
# names and numbers.
DOCUMENT_BYTES = 512
MESSAGE_BYTES = 256
RECORD_BYTES = 2048


def record_bytes(record: RagRecord) -> int:
    """About what `record` holds in memory: its texts and a share for each document and
    history turn, whose objects weigh far more than a short text."""
    docs = record.retrieved_context
    return (
        RECORD_BYTES
        + len(record.query or "")
        + len(record.response or "")
        + sum(len(doc.content) for doc in docs)
        + DOCUMENT_BYTES * len(docs)
        + sum(len(m.content) for m in record.history)
        + MESSAGE_BYTES * len(record.history)
    )


def bound_record(record: RagRecord, limits: SizeLimits) -> tuple[RagRecord, tuple[Cut, ...]]:
    """`record` within `limits` and what was cut (most records: itself, nothing).
    Raises `RecordError("response_too_large")` for an answer over its limit."""
    for name in ("response", "expected_response"):
        text = getattr(record, name)
        if text is not None and len(text) > limits.response_chars:
            raise RecordError(
                "response_too_large",
                f"{name}: {len(text)} characters, over the limit of {limits.response_chars} "
                "(record_limits.response_chars)",
            )
    update: dict[str, Any] = {}
    cut: list[Cut] = []
    for label in LABEL_FIELDS:
        value = getattr(record, label)
        if value is not None and len(value) > limits.label_chars:
            update[label] = bounded_label(value, limits.label_chars)
            cut.append(label)
    conversation = record.conversation
    if conversation is not None and len(conversation) > limits.label_chars:
        update["conversation"] = bounded_label(conversation, limits.label_chars)
        cut.append("conversation")
    user = record.metadata.get(USER_ID)
    if user is not None and len(user) > limits.label_chars:
        update["metadata"] = {**record.metadata, USER_ID: bounded_label(user, limits.label_chars)}
        cut.append("user_id")
    if record.query is not None and len(record.query) > limits.query_chars:
        update["query"] = _truncated(record.query, limits.query_chars)
    if any(len(m.content) > limits.query_chars for m in record.history):
        update["history"] = tuple(
            m.model_copy(update={"content": _truncated(m.content, limits.query_chars)})
            if len(m.content) > limits.query_chars
            else m
            for m in record.history
        )
    if "query" in update or "history" in update:
        cut.append("query")
    docs = record.retrieved_context
    if len(docs) > limits.max_documents:
        docs = docs[: limits.max_documents]
        update["retrieved_context"] = docs
        cut.append("documents")
    documents = _bounded_docs(docs, limits)
    if documents is not None:
        update["retrieved_context"] = documents
        cut.append("context")
    if not update:
        return record, ()
    return record.model_copy(update=update), tuple(cut)


def _bounded_docs(
    docs: tuple[ContextDoc, ...], limits: SizeLimits
) -> tuple[ContextDoc, ...] | None:
    """The documents within the per-document and total limits; None when all fit."""
    if not any(len(d.content) > limits.document_chars for d in docs) and (
        sum(len(d.content) for d in docs) <= limits.context_chars
    ):
        return None
    out: list[ContextDoc] = []
    room = limits.context_chars
    for doc in docs:
        keep = min(limits.document_chars, room)
        if keep <= 0:
            break  # the rest of the context is over the total: dropped
        if len(doc.content) > keep:
            doc = doc.model_copy(update={"content": _truncated(doc.content, keep)})
            room -= keep
        else:
            room -= len(doc.content)
        out.append(doc)
    return tuple(out)


def _truncated(text: str, keep: int) -> str:
    return text[:keep] + TRUNCATED.format(len(text) - keep)
