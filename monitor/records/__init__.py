"""The record every receiver produces and every evaluator reads: `RagRecord`.

Input comes in several shapes (docs/contract.md, "Input records"); `parse_record` turns
any of them into one normalised `RagRecord`:

- native: `request` (string, `{"messages": [...]}` or `{"query", "history"}`),
  `retrieved_context` (`[{content, doc_uri, score?, metadata?}]`), `response`,
  optional `expected_response` / `expected_retrieved_context`;
- QA: `question`, `context` (string or list), `answer`, `ground_truth`;
- conversation: `messages` whose last assistant message carries `context.citations`;
- Java evaluator request: `userText`, `dataList`, `responseContent`.

In multi-turn input the query is the last user turn and earlier turns are kept as history.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from monitor.records.memo import Memo
from monitor.shared.nesting import MAX_DEPTH, within_depth
from monitor.shared.utf8 import repaired

Role = Literal["system", "user", "assistant", "tool", "developer"]
Part = Literal["query", "context", "response"]


class RecordError(ValueError):
    """Input that cannot become a record. `reason` is a short, closed-set metric label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# Text of a record: repaired where it enters (`repaired`: a lone surrogate becomes U+FFFD),
# once, so that no exporter (results file, OTLP events, `/debug/records`, judge prompts)
# fails on the record.
Text = Annotated[str, AfterValidator(repaired)]


class ChatMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    role: Role
    content: Text


class ContextDoc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    content: Text
    doc_uri: Text | None = None
    score: float | None = None
    metadata: dict[str, Any] | None = None


MAX_ID_CHARS = 64  # a trace id of 32 bytes; W3C trace ids have 16

# `metadata` key: why the trace stage's extraction of this record looks wrong (its
# reasons: `monitor/extraction/_suspect.py`); such a record is not evaluated unless
# `pipeline.evaluate_suspect_records`.
EXTRACTION_SUSPECT = "extraction_suspect"
# `metadata` key: why some attribute values of the record's trace were not read
# (`monitor.shared.nesting.REASONS`, comma-separated): they were read as text or left out.
UNREAD_VALUES = "unread_values"
# `metadata` key: where the record's context came from (`CONTEXT_SOURCES`), set by the
# extraction; a record given as a record that names none says `record` (or `none`).
CONTEXT_SOURCE = "context_source"
# `metadata` key: what the extraction took as evidence for a context found by structure or
# taken from the prompt (which span's value appears in the prompt; how the prompt split).
CONTEXT_EVIDENCE = "context_evidence"
# `metadata` key: signs that documents split out of a prompt were split wrongly
# (`monitor.extraction.CONTEXT_DOUBTS`, comma-separated); the record is still evaluated.
CONTEXT_DOUBT = "context_doubt"
CONTEXT_SOURCES = (
    "retrieval_span",  # the documents of a span a convention marks as a retrieval
    "tool_result",  # what tool calls returned to the model (tool spans or tool messages)
    # parts of the model call's messages that are documents by kind (document and
    # search-result blocks, hosted retrieval results)
    "message_documents",
    "convention",  # the record-level `rag.context` attribute the app declared
    "structure",  # a span's list of texts that appear in the model call's prompt
    "prompt",  # split out of the model call's prompt, its instruction template left out
    "record",  # a record that arrived as a record, with its own context
    "none",  # no context
)
# `metadata` keys: who sent the record's spans, as far as the monitor can tell: the OTLP
# client's address (set by the receiver, no port), the resource's `service.instance.id`
# (set by the extraction, cut like a label), and a digest of all the resource's
# attributes (`resource_digest`: what tells apart apps behind one collector that set no
# instance id). `sender` joins them.
CLIENT_ADDRESS = "client.address"
INSTANCE_ID = "service.instance.id"
RESOURCE = "sender.resource"
# `metadata` key: the user's id, from the span's `user.id` (cut like a label).
USER_ID = "user.id"
# `metadata` key: the topic of the record's question (`monitor.detector.topics`), set where
# the detector runs when alert rules are configured; a record given as a record may bring
# its own.
TOPIC = "topic"
# `metadata` key: why the record's sampled evaluators never ran (`shutdown_deadline`: the
# monitor stopped first); its results are errors saying so, never a verdict.
NOT_EVALUATED = "not_evaluated"


class RagRecord(BaseModel):
    """One RAG request: what was asked, what was retrieved, what was answered.

    `query` and `history` are derived from `request`; `response` is None only for
    records assembled from traces that never showed a response.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: Text
    trace_id: str | None = None
    span_id: str | None = None
    service: Text = "unknown"
    # The deployed version of the service (resource attribute `service.version`).
    version: Text | None = None
    route: Text = ""
    # The conversation (session) the request belongs to: `session.id`,
    # `gen_ai.conversation.id` or an attribute the config names. Verdicts of one
    # conversation are judged together by the alert rules (docs/alerts.md).
    conversation: Text | None = None
    timestamp: float | None = None
    query: Text | None = None
    history: tuple[ChatMessage, ...] = ()
    retrieved_context: tuple[ContextDoc, ...] = ()
    response: Text | None = None
    expected_response: Text | None = None
    expected_retrieved_context: tuple[ContextDoc, ...] | None = None
    model: Text | None = None
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    latency_ms: float | None = Field(default=None, ge=0)
    feedback: Literal["positive", "negative"] | None = None
    error: bool = False
    metadata: dict[str, Text] = Field(default_factory=dict)
    _memo: Memo = PrivateAttr(default_factory=Memo)

    @field_validator("trace_id", "span_id")
    @classmethod
    def _hex_id(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # An id travels as a Prometheus exemplar (at most 128 characters with its name).
        if len(value) > MAX_ID_CHARS:
            raise ValueError(f"must be at most {MAX_ID_CHARS} hex characters")
        try:
            bytes.fromhex(value)
        except ValueError:
            raise ValueError("must be a hex string") from None
        return value.lower()

    @property
    def memo(self) -> Memo:
        # Not `self._memo`: that goes through `BaseModel.__getattr__`, some 30 times slower.
        memo: Memo = self.__pydantic_private__["_memo"]  # type: ignore[index]
        return memo

    @property
    def context_text(self) -> list[str]:
        return [doc.content for doc in self.retrieved_context]

    def missing(self) -> frozenset[Part]:
        """Parts of a RAG exchange this record lacks."""
        return _MISSING[
            (not self.query) | (not self.retrieved_context) << 1 | (self.response is None) << 2
        ]

    @property
    def context_source(self) -> str:
        """Where the context came from (`CONTEXT_SOURCES`): the extraction's word, else
        `record` for a record that brought its own context, `none` without one."""
        said = self.metadata.get(CONTEXT_SOURCE)
        if said is not None and said in CONTEXT_SOURCES:
            return said
        return "record" if self.retrieved_context else "none"

    @property
    def sampling_key(self) -> str:
        return self.trace_id or self.request_id


def sender(record: RagRecord) -> str | None:
    """Who sent `record` (`sender_key` of its metadata)."""
    metadata = record.metadata
    return sender_key(
        metadata.get(CLIENT_ADDRESS), metadata.get(INSTANCE_ID), metadata.get(RESOURCE)
    )


def sender_key(address: str | None, instance: str | None, resource: str | None) -> str | None:
    """A sender's key: the client's address, then after a `/` its `service.instance.id` and
    its resource's digest after a `~` (`10.0.0.7/pod-7f9c~3fa9c2d1e0b4`,
    `10.0.0.7/~3fa9c2d1e0b4` without an id; any part alone when the others are not known;
    None: none is, as for records given as records and Kafka's). The id is the sender's
    own word: a `/` or `~` in it is escaped, so that an id cannot read as an address
    (`6.6.6.6/x` from a sender with no address known) or as a digest."""
    claimed = (instance or "").replace("%", "%25").replace("/", "%2F").replace("~", "%7E")
    own = claimed + (f"~{resource}" if resource else "")
    return "/".join(p for p in (address, own) if p) or None


def resource_digest(resource: Mapping[str, Any]) -> str:
    """A short digest of every attribute of a span's resource, names and values: senders
    behind one collector that write no instance id differ in what their SDKs and resource
    detectors add (host, process, SDK, runtime, a collector's pod attributes), whichever
    those are; senders whose resources are the same cannot be told apart."""
    h = hashlib.blake2b(digest_size=6)
    for name in sorted(resource):
        h.update(name.encode("utf-8", "replace"))
        h.update(b"\x00")
        h.update(repr(resource[name]).encode("utf-8", "replace"))
        h.update(b"\x01")
    return h.hexdigest()


_NATIVE_KEYS = frozenset(RagRecord.model_fields) | {"request"}
_validate_record = RagRecord.__pydantic_validator__.validate_python
# `missing()` for every combination of absent parts (bit 0 query, 1 context, 2 response):
# asked for every record, so it allocates nothing.
_PARTS: tuple[Part, ...] = ("query", "context", "response")
_MISSING: tuple[frozenset[Part], ...] = tuple(
    frozenset(part for bit, part in enumerate(_PARTS) if mask >> bit & 1) for mask in range(8)
)


def parse_record(
    data: Any,
    *,
    require_response: bool = True,
    metadata: Mapping[str, str] | None = None,
    max_documents: int | None = None,
) -> RagRecord:
    """Normalise one decoded JSON value into a `RagRecord`. `metadata` (what the receiver
    knows, e.g. Kafka topic and offset) is merged over the record's own. With
    `max_documents`, a list of documents is read no further than one past it: the record
    still shows it had more (`bound_record` drops the rest and says so), without a model
    object built for each of a hundred thousand documents.

    Raises `RecordError` with a closed-set `reason` (`not_object`, `no_response`,
    `invalid_field`, `unknown_shape`) and a message naming the offending field.
    """
    if not isinstance(data, dict):
        raise RecordError("not_object", f"expected a JSON object, got {type(data).__name__}")
    read = None if max_documents is None else max_documents + 1
    if "userText" in data or "responseContent" in data:
        fields = _from_java(data, read)
    elif "question" in data or "answer" in data:
        fields = _from_qa(data, read)
    elif "request" in data or "response" in data or "retrieved_context" in data:
        fields = _from_native(data, read)
    elif "messages" in data:
        fields = _from_conversation(data, read)
    else:
        keys = ", ".join(sorted(data)[:8]) or "none"
        raise RecordError("unknown_shape", f"no known record shape matches keys ({keys})")
    if require_response and fields.get("response") is None:
        raise RecordError("no_response", "response: missing")
    if "request_id" not in fields:  # hashing the whole input is costly: only when needed
        fields["request_id"] = _derived_id(data)
    if metadata:
        own = fields.get("metadata")
        if "metadata" not in fields:
            fields["metadata"] = dict(metadata)
        elif isinstance(own, dict):
            fields["metadata"] = {**own, **metadata}
        # else: a malformed own `metadata` is left for validation to name.
    try:
        # The model's validator itself: `model_validate` adds ~2 µs of Python per call.
        record: RagRecord = _validate_record(fields)
        return record
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "record"
        raise RecordError("invalid_field", f"{where}: {err['msg']}") from None


class RawRecord:
    """A decoded JSON record not validated yet: what sampling reads, read straight from
    the input, and `parse()` for the records that are evaluated. Validating a record
    costs several times what reading these fields does, and most are not sampled.

    For a valid record every property equals the parsed record's; an invalid one is
    found (`RecordError`) only when parsed."""

    __slots__ = ("_key", "data", "metadata")

    def __init__(self, data: dict[str, Any], metadata: Mapping[str, str] | None = None) -> None:
        self.data = data
        # Where the record came from, as its receiver knows it (Kafka topic, partition,
        # offset, ...): merged over the record's own metadata when it is parsed.
        self.metadata = metadata
        self._key: str | None = None

    @property
    def sampling_key(self) -> str:
        if self._key is None:
            trace_id = self.data.get("trace_id")
            request_id = self.data.get("request_id")
            if isinstance(trace_id, str) and trace_id:
                self._key = trace_id.lower()
            elif isinstance(request_id, str):
                self._key = request_id
            else:
                self._key = _derived_id(self.data)
        return self._key

    @property
    def service(self) -> str:
        value = self.data.get("service", "unknown")
        return value if isinstance(value, str) else "unknown"

    @property
    def route(self) -> str:
        value = self.data.get("route", "")
        return value if isinstance(value, str) else ""

    @property
    def feedback(self) -> str | None:
        value = self.data.get("feedback")
        return value if value in ("positive", "negative") else None

    @property
    def error(self) -> bool:
        return self.data.get("error") is True

    def parse(self, max_documents: int | None = None) -> RagRecord:
        """The validated record (see `parse_record`); raises `RecordError`."""
        return parse_record(self.data, metadata=self.metadata, max_documents=max_documents)


def _derived_id(data: dict[str, Any]) -> str:
    """A stable id for records that carry none, so sampling stays deterministic. Raises
    `RecordError` for a record nested too deeply to serialise (orjson reads JSON nested
    deeper than Python's json writes)."""
    try:
        blob = json.dumps(data, sort_keys=True, default=str).encode()
    except RecursionError:
        raise RecordError(
            "invalid_field", "record: nested too deeply to derive an id (give it a request_id)"
        ) from None
    return hashlib.sha256(blob).hexdigest()[:32]


def _expect(value: Any, kind: type | tuple[type, ...], where: str, *index: int | str) -> Any:
    """`value` if it is a `kind`; else `invalid_field` naming `where.index...` (the path
    is only formatted on failure: this runs for every field of every record)."""
    if not isinstance(value, kind):
        path = ".".join((where, *map(str, index)))
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecordError("invalid_field", f"{path}: expected {names}, got {type(value).__name__}")
    return value


def _messages(raw: Any, where: str) -> list[ChatMessage]:
    out = []
    for i, msg in enumerate(_expect(raw, list, where)):
        _expect(msg, dict, where, i)
        content = msg.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        try:
            out.append(ChatMessage(role=msg.get("role"), content=content or ""))
        except ValidationError as exc:
            field = exc.errors()[0]["loc"][0]
            raise RecordError(
                "invalid_field", f"{where}.{i}.{field}: {exc.errors()[0]['msg']}"
            ) from None
    return out


def _split_turns(messages: list[ChatMessage]) -> tuple[str | None, list[ChatMessage]]:
    """The last user turn is the query; everything before it is history."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i].content, messages[:i]
    return None, messages


def _docs(raw: Any, where: str, read: int | None) -> list[dict[str, Any]]:
    """The documents of `raw`, the first `read` of them when given."""
    if raw is None:
        return []
    if isinstance(raw, str):
        return [{"content": raw}]
    docs = []
    items = _expect(raw, list, where)
    for i, item in enumerate(items if read is None else items[:read]):
        if isinstance(item, str):
            docs.append({"content": item})
            continue
        _expect(item, dict, where, i)
        content = _first(item, _CONTENT_KEYS)
        _expect(content, str, where, i, "content")
        doc: dict[str, Any] = {"content": content}
        uri = _first(item, _URI_KEYS)
        if uri is not None:
            doc["doc_uri"] = str(uri)
        score = item.get("score")
        if isinstance(score, (int, float)):
            doc["score"] = float(score)
        metadata = item.get("metadata")
        if isinstance(metadata, dict):
            if not within_depth(metadata, MAX_DEPTH - 1):
                path = ".".join((where, str(i), "metadata"))
                raise RecordError("invalid_field", f"{path}: nested deeper than {MAX_DEPTH}")
            doc["metadata"] = metadata
        docs.append(doc)
    return docs


_CONTENT_KEYS = ("content", "page_content", "text")
_URI_KEYS = ("doc_uri", "id", "url", "title")


def _first(item: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first key present (even if None), as chained `get`s would."""
    for key in keys:
        if key in item:
            return item[key]
    return None


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else _expect(value, str, key)


def _common(data: dict[str, Any], keys: frozenset[str] = _NATIVE_KEYS) -> dict[str, Any]:
    """Native fields (ids, service, tokens, ...) carried over as they are."""
    return {k: v for k, v in data.items() if k in keys}


# What `_common` carries over from each shape (the rest is converted field by field).
_NATIVE_PLAIN = _NATIVE_KEYS - {"request", "retrieved_context", "expected_retrieved_context"}


def _from_native(data: dict[str, Any], read: int | None) -> dict[str, Any]:
    # Keys outside the schema (dataset labels, app-specific fields) are left out, as in the
    # other shapes; a misspelt required key still surfaces as that key missing.
    fields = _common(data, _NATIVE_PLAIN)
    request = data.get("request")
    if isinstance(request, str):
        fields["query"] = request
    elif isinstance(request, dict):
        if "messages" in request:
            query, history = _split_turns(_messages(request["messages"], "request.messages"))
            fields["query"], fields["history"] = query, history
        elif "query" in request:
            fields["query"] = _expect(request["query"], str, "request.query")
            fields["history"] = _messages(request.get("history") or [], "request.history")
        else:
            raise RecordError("invalid_field", "request: expected 'messages' or 'query'")
    elif request is not None:
        _expect(request, (str, dict), "request")
    fields["retrieved_context"] = _docs(data.get("retrieved_context"), "retrieved_context", read)
    if data.get("expected_retrieved_context") is not None:
        fields["expected_retrieved_context"] = _docs(
            data["expected_retrieved_context"], "expected_retrieved_context", read
        )
    _optional_str(data, "response")
    return fields


def _from_qa(data: dict[str, Any], read: int | None) -> dict[str, Any]:
    fields = _common(data)
    fields["query"] = _optional_str(data, "question")
    fields["retrieved_context"] = _docs(
        data.get("context") or data.get("contexts"), "context", read
    )
    fields["response"] = _optional_str(data, "answer")
    truth = data.get("ground_truth")
    if isinstance(truth, list):  # some QA sets list several acceptable answers
        truth = "\n".join(str(t) for t in truth)
    fields["expected_response"] = None if truth is None else _expect(truth, str, "ground_truth")
    return fields


def _from_conversation(data: dict[str, Any], read: int | None) -> dict[str, Any]:
    raw = _expect(data["messages"], list, "messages")
    fields = _common(data)
    last_assistant = None
    for i in range(len(raw) - 1, -1, -1):
        if isinstance(raw[i], dict) and raw[i].get("role") == "assistant":
            last_assistant = i
            break
    if last_assistant is None:
        fields["query"], fields["history"] = _split_turns(_messages(raw, "messages"))
        return fields
    answer = raw[last_assistant]
    fields["response"] = _expect(answer.get("content"), str, "messages", last_assistant, "content")
    context = answer.get("context") or {}
    _expect(context, dict, "messages", last_assistant, "context")
    fields["retrieved_context"] = _docs(
        context.get("citations"), f"messages.{last_assistant}.context.citations", read
    )
    turns = _messages(raw[:last_assistant], "messages")
    fields["query"], fields["history"] = _split_turns(turns)
    return fields


def _from_java(data: dict[str, Any], read: int | None) -> dict[str, Any]:
    fields = _common(data)
    fields["query"] = _optional_str(data, "userText")
    fields["response"] = _optional_str(data, "responseContent")
    fields["retrieved_context"] = _docs(data.get("dataList"), "dataList", read)
    return fields
