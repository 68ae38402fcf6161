"""The `extraction.conventions` entry `rag-monitor explain` proposes for a trace: read
from the spans no convention took, in their attributes and in their events alike (an
event's fields are read as a span's attributes are, and its sources name the event).

Every value is read by the extraction's own decoders (`messages_of`, `docs_of`,
`text_of`, `output_of`): a place holding chat messages with a user message makes a span a
model call (its output the output-named text beside them, in the same place or another
event of the span); a JSON list of documents makes a span a retrieval, unless the span
is above a model call or above another such span (it passes on documents it was given:
a query engine's response, a synthesizer's source nodes); a span above a model call with
a question-named text is the request, its answer the output-named text beside it. The
role is told by an attribute whose short values tell those spans apart (`kind`), else by
the spans' names (`match`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.conventions import Source
from monitor.extraction import SpanTaken
from monitor.extraction._sources import docs_of, messages_of, output_of, text_of
from monitor.extraction._span_values import as_float, content_text, loads, role_of
from monitor.extraction._trace_tree import is_ancestor, trace_shape
from monitor.spans import LOG_EVENT_KEY, Span, SpanEvent

# Attribute names a proposal never reads: transport, process and code location.
_INFRASTRUCTURE = ("http.", "url.", "net.", "server.", "client.", "code.", "thread.", "otel.")
_INPUT_WORDS = ("input", "query", "question", "prompt", "request", "args", "in")
_OUTPUT_WORDS = ("output", "answer", "response", "result", "completion", "repl", "out")
_KIND_WORDS = ("kind", "type", "step", "role", "category", "operation")


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a span's values are: its attributes (`event` None) or one event's fields."""

    event: str | None
    fields: dict[str, Any]

    def source(self, key: str, **more: str) -> dict[str, Any]:
        """A config source reading `key` here."""
        where = {"event": self.event} if self.event is not None else {}
        return {**where, "attribute": key, **more}


@dataclass(slots=True)
class _Parts:
    """What a proposal found on one span: its role and the sources of its parts."""

    role: str
    input: dict[str, Any] | None = None
    output: dict[str, Any] | None = None
    documents: dict[str, Any] | None = None


def _places(span: Span) -> list[_Place]:
    """The span's attributes, then the first event of each name."""
    places = [_Place(None, span.attributes)]
    seen: set[str] = set()
    for event in span.events:
        if event.name and event.name not in seen:
            seen.add(event.name)
            places.append(_Place(event.name, event.attributes))
    return places


def _readable(place: _Place) -> list[tuple[str, str]]:
    """The place's string values that hold something (not `null`, not blank)."""
    return [
        (key, value)
        for key, value in place.fields.items()
        if isinstance(value, str)
        and value.strip() not in ("", "null", "None")
        and not key.startswith(_INFRASTRUCTURE)
    ]


def _segments(key: str) -> list[str]:
    return key.lower().replace("-", "_").replace(".", "_").split("_")


def _named(key: str, words: tuple[str, ...]) -> bool:
    """A segment of `key` holds one of `words` (the short ones, `in` and `out`, only as
    whole segments: `kind` says no input)."""
    return any(
        word == part if len(word) < 3 else word in part for part in _segments(key) for word in words
    )


def _last_named(key: str, words: tuple[str, ...]) -> bool:
    """The key's last dotted segment says it (`query.query_str`, not `query.image_path`)."""
    return _named(key.rsplit(".", 1)[-1], words)


def _place_named(place: _Place, key: str, words: tuple[str, ...]) -> tuple[bool, ...]:
    """How well the key says it, best first: its last segment, any segment, or only the
    event holding it (`beacon.question`'s `text`); all false: not at all."""
    key_named = _named(key, words)
    return _last_named(key, words), key_named, not key_named and _named(place.event or "", words)


def _is_chat(key: str, place: _Place) -> bool:
    """The value is chat messages with a user message: as the message reader reads
    them, or a list of role-tagged objects whose parts it does not read yet."""
    parsed = loads(place.fields[key])
    if not isinstance(parsed, list | dict):
        return False  # the message reader takes any text as one user message
    if any(role == "user" for role, _ in messages_of(Source(key, "messages"), place.fields)):
        return True
    if not (isinstance(parsed, list) and parsed):
        return False
    roles = [role_of(m.get("role")) if isinstance(m, dict) else None for m in parsed]
    return all(roles) and "user" in roles


def _text_source(key: str, place: _Place) -> tuple[dict[str, Any], str] | None:
    """A source reading `key` as text, with the text: the whole value, or the member of a
    JSON object that holds text (`{"replies": [...]}`); None when it holds no text, or
    only a number, a truth value or a role name."""
    value = place.fields[key]
    parsed = loads(value)
    if isinstance(parsed, dict):
        for member, inner in parsed.items():
            text = content_text(inner)
            if text:
                return place.source(key, field=member), text
            text = output_of(Source(key, "messages", field=member), place.fields)
            if text:  # messages (`{"replies": [ChatMessage]}`)
                return place.source(key, encoding="json", field=member), text
        return None
    text = text_of(Source(key), place.fields)
    if not text or as_float(text) is not None or text in ("True", "False") or role_of(text):
        return None
    return place.source(key), text


def _best_text(
    places: list[_Place], words: tuple[str, ...], skip: set[tuple[str | None, str]]
) -> dict[str, Any] | None:
    """The source of the text named by `words` in any place (not in `skip`): one whose
    last segment says it first, then the longest text."""
    found: list[tuple[tuple[bool, ...], int, dict[str, Any]]] = []
    for place in places:
        for key, _ in _readable(place):
            named = _place_named(place, key, words)
            if (place.event, key) in skip or not any(named) or _is_chat(key, place):
                continue
            read = _text_source(key, place)
            if read is not None:
                found.append((named, len(read[1]), read[0]))
    if not found:
        return None
    return max(found, key=lambda f: (f[0], f[1]))[2]


def _model_parts(span: Span) -> _Parts | None:
    places = _places(span)
    for place in places:
        for key, _ in _readable(place):
            if _is_chat(key, place):
                parts = _Parts("model", input=place.source(key, encoding="messages"))
                parts.output = _output_messages(places, {(place.event, key)})
                if parts.output is None:
                    parts.output = _best_text(places, _OUTPUT_WORDS, {(place.event, key)})
                return parts
    return None


def _output_messages(
    places: list[_Place], skip: set[tuple[str | None, str]]
) -> dict[str, Any] | None:
    """An output-named JSON list of assistant messages (`gen_ai.output.messages`)."""
    for place in places:
        for key, value in _readable(place):
            if (place.event, key) in skip or not any(_place_named(place, key, _OUTPUT_WORDS)):
                continue
            if isinstance(loads(value), list) and not _is_chat(key, place):
                messages = messages_of(Source(key, "messages"), place.fields)
                if any(role == "assistant" for role, _ in messages):
                    return place.source(key, encoding="json")
    return None


def _retrieval_parts(span: Span) -> _Parts | None:
    places = _places(span)
    for place in places:
        for key, value in _readable(place):
            if not isinstance(loads(value), list) or _is_chat(key, place):
                continue
            docs = docs_of(Source(key, "json"), place.fields)
            if docs and any(d.content for d in docs):
                parts = _Parts("retrieval", documents=place.source(key, encoding="json"))
                parts.input = _best_text(places, _INPUT_WORDS, {(place.event, key)})
                return parts
    return None


def _request_parts(span: Span) -> _Parts | None:
    places = _places(span)
    question = _best_text(places, _INPUT_WORDS, set())
    if question is None:
        return None
    asked = (question.get("event"), question["attribute"])
    return _Parts("request", input=question, output=_best_text(places, _OUTPUT_WORDS, {asked}))


def _kind_attribute(found: dict[str, tuple[Span, _Parts]]) -> str | None:
    """An attribute every proposed span carries, whose short values tell their roles apart
    (the same value never for two roles)."""
    spans = [span for span, _ in found.values()]
    common = set.intersection(*(set(s.attributes) for s in spans)) if spans else set()
    for key in sorted(common, key=lambda k: (not _named(k, _KIND_WORDS), k)):
        roles: dict[Any, str] = {}
        good = True
        for span, parts in found.values():
            value = span.attributes[key]
            if not (isinstance(value, str) and 0 < len(value) <= 64 and " " not in value):
                good = False
                break
            if roles.setdefault(value, parts.role) != parts.role:
                good = False
                break
        if good and len(set(roles.values())) == len({p.role for _, p in found.values()}):
            if len(roles) == len(set(roles.values())):
                return key
    return None


def _prefix(found: dict[str, tuple[Span, _Parts]], *kind: str) -> str:
    """The entries' names' head: the one head of the attributes read (and of the kind
    attribute), else `app`."""
    keys = [
        source["attribute"]
        for _, parts in found.values()
        for source in (parts.input, parts.output, parts.documents)
        if source is not None and "event" not in source
    ] + list(kind)
    heads = {key.split(".")[0] for key in keys}
    name = heads.pop() if len(heads) == 1 else "app"
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in name) or "app"


def _unread(taken: SpanTaken) -> bool:
    """No convention took the span, or took it as a model call without its output."""
    return taken.role is None or (taken.role == "model" and not taken.read.get("output"))


def _found(spans: Sequence[Span], taken: Sequence[SpanTaken]) -> dict[str, tuple[Span, _Parts]]:
    """The role and sources of each span a proposal reads, by span id."""
    _, by_id, _ = trace_shape(spans)
    found: dict[str, tuple[Span, _Parts]] = {}
    for t in taken:
        parts = _model_parts(t.span) if _unread(t) else None
        if parts is not None:
            found[t.span.span_id] = (t.span, parts)
    # A framework's wrapper above the provider's call (`predict` above `chat`) is the same
    # call: the innermost is read, as the extraction reads one call.
    wrappers = [
        s for s, _ in found.values() if any(is_ancestor(s, o, by_id) for o, _ in found.values())
    ]
    for span in wrappers:
        del found[span.span_id]
    models = [t.span for t in taken if t.role == "model"]
    models += [span for span, _ in found.values()]
    holders: dict[str, tuple[Span, _Parts]] = {}
    for t in taken:
        if t.role is None and t.span.span_id not in found:
            parts = _retrieval_parts(t.span)
            if parts is not None:
                holders[t.span.span_id] = (t.span, parts)
    # A span that holds documents and is above a model call or another holder passes on
    # what it was given: the innermost holders beside the model calls are the retrievals.
    for span_id, (span, parts) in holders.items():
        above = [m for m in models if is_ancestor(span, m, by_id)]
        above += [h for h, _ in holders.values() if h is not span and is_ancestor(span, h, by_id)]
        if not above:
            found[span_id] = (span, parts)
    requests: dict[str, tuple[Span, _Parts]] = {}
    for t in taken:
        if t.role is not None or t.span.span_id in found:
            continue
        if any(is_ancestor(t.span, m, by_id) for m in models):
            parts = _request_parts(t.span)
            if parts is not None:
                requests[t.span.span_id] = (t.span, parts)
    # The outermost request is the user's; those inside it pass the question on.
    for span_id, (span, parts) in requests.items():
        if not any(is_ancestor(r, span, by_id) for r, _ in requests.values()):
            found[span_id] = (span, parts)
    return found


def with_log_records(spans: Sequence[Span]) -> list[Span]:
    """The trace's spans with the log records of each (the event spans a logs request
    gave) among its events, whatever their names; records of a span not in the trace are
    left out."""
    own = [s for s in spans if not s.attribute(LOG_EVENT_KEY)]
    ids = {s.span_id for s in own}
    records: dict[str, list[SpanEvent]] = {}
    for span in spans:
        if span.attribute(LOG_EVENT_KEY) and span.parent_span_id in ids:
            records.setdefault(span.parent_span_id, []).extend(span.events)
    return [_with_events(s, records[s.span_id]) if s.span_id in records else s for s in own]


def _with_events(span: Span, more: list[SpanEvent]) -> Span:
    return Span(
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.name,
        span.start_unix_nano,
        span.end_unix_nano,
        attributes=span.attributes,
        events=sorted([*span.events, *more], key=lambda e: e.time_unix_nano),
        error=span.error,
        service=span.service,
        parent_is_remote=span.parent_is_remote,
        resource=span.resource,
    )


def propose(spans: Sequence[Span], taken: Sequence[SpanTaken]) -> list[dict[str, Any]]:
    """`extraction.conventions` entries (as the config writes them) for the spans no
    convention took, one per role; none when no such span suggests a part."""
    found = _found(spans, taken)
    if not found:
        return []
    kind = _kind_attribute(found)
    prefix = _prefix(found) if kind is None else _prefix(found, kind)
    entries: list[dict[str, Any]] = []
    for role in ("request", "retrieval", "model"):
        mine = [(span, parts) for span, parts in found.values() if parts.role == role]
        if not mine:
            continue
        entry: dict[str, Any] = {"name": f"{prefix}-{role}"}
        if kind is not None:
            values = sorted({str(span.attributes[kind]) for span, _ in mine})
            entry["kind"] = {"attribute": kind, "values": {v: role for v in values}}
        else:
            entry["match"] = {"span_names": sorted({s.name for s, _ in mine}), "role": role}
        for part in ("input", "output", "documents"):
            sources = []
            for _, parts in mine:
                source = getattr(parts, part)
                if source is not None and source not in sources:
                    sources.append(source)
            if sources:
                entry[part] = sources
        entries.append(entry)
    return entries
