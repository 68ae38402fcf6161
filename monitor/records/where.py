"""Where a record came from, as a page names it: the values of the dimensions a regression
is attributed to (`monitor.alerts.attribution`).

| dimension | value |
|---|---|
| `version` | the record's `version` (resource attribute `service.version`) |
| `model` | the request model (a model file's path: the file's name, `monitor.shared.labels.model_name`) |
| `route` | the record's route |
| `source` | where its documents came from: a document's `metadata.collection` or `metadata.source`, else its `doc_uri`'s host (`https://kb.example.com/a` → `kb.example.com`, `s3://docs/a` → `docs`) or first path segment (`kb/eiffel.md` → `kb`); the most common among the record's documents |
| `documents` | how many documents were retrieved: `0`, `1`, `2-3`, `4-7`, `8-15`, `16+` |
| `context` | the retrieved documents' length in characters: `0`, `<500`, `500-2k`, `2k-8k`, `8k-32k`, `32k+` |
| `tool` | the first tool whose result is among the documents (`metadata.tool`) |
| `language` | the question's language: its script (`zh`, `ja`, `ko`, `ru`, `ar`, `he`, `hi`, `el`, `th`) or, in Latin script, the language of most of its common words (`en`, `de`, `fr`, `es`, `it`, `pt`, `nl`) |
| `topic` | the question's topic (`metadata.topic`, `monitor.detector.topics`) |

`""` is no value (not known, or not applicable): such records count in every value's rest
and are never a slice of their own. Values are label values of the page's `Where` alert
(`where_value`): characters no label shows replaced (`shown_label`), cut to `MAX_CHARS`. A
record's values are computed once: where the record is extracted (the evaluation worker),
carried with it (`RagRecord.memo`) for as long as what they come from is the same, and
`Where.of` also remembers the last record, which the results file and the alert engine ask
about in turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from monitor.records import TOPIC, RagRecord, sender
from monitor.shared.labels import bounded_label, model_name, shown_label

DIMENSIONS = (
    "version",
    "model",
    "route",
    "source",
    "documents",
    "context",
    "tool",
    "language",
    "topic",
)
# The dimensions a results line carries under `dimensions` (the others are its own fields).
LINE_DIMENSIONS = DIMENSIONS[3:]
MAX_CHARS = 128

_DOCUMENT_BUCKETS = ((0, "0"), (1, "1"), (3, "2-3"), (7, "4-7"), (15, "8-15"))
_CONTEXT_BUCKETS = (
    (0, "0"),
    (499, "<500"),
    (1_999, "500-2k"),
    (7_999, "2k-8k"),
    (31_999, "8k-32k"),
)


@dataclass(frozen=True, slots=True)
class Where:
    """A record's dimension values (in `DIMENSIONS` order), its trace id (for the traces a
    page lists) and its unit (its conversation, else its request: verdicts of one unit are
    not independent)."""

    values: tuple[str, ...]
    trace_id: str | None = None
    unit: str | None = None
    # Who sent the record (`monitor.records.sender`): the attribution's sender screen.
    sender: str | None = None

    @classmethod
    def of(cls, record: RagRecord) -> Where:
        last = _last
        if last[0] is record:
            where: Where = last[1]
            return where
        memo = record.memo
        basis = _basis(record)
        known = memo.where
        if known is not None and known[0] == basis:
            where = cast(Where, known[1])
            who = sender(record)
            if where.sender != who:
                # A copy with another sender (metadata merged in after the values were
                # derived): the values stand, the sender is the new one.
                where = cls(where.values, where.trace_id, where.unit, who)
                memo.where = (basis, where)
        else:
            where = cls._of(record)
            memo.where = (basis, where)
        _last[0], _last[1] = record, where
        return where

    @classmethod
    def _of(cls, record: RagRecord) -> Where:
        docs = record.retrieved_context
        sources: dict[str, int] = {}
        tool = ""
        chars = 0
        for doc in docs:
            chars += len(doc.content)
            metadata = doc.metadata
            source = None
            if metadata:
                source = metadata.get("collection") or metadata.get("source")
                if not tool and isinstance(metadata.get("tool"), str):
                    tool = metadata["tool"]
            if not isinstance(source, str) or not source:
                source = _source_of(doc.doc_uri) if doc.doc_uri else ""
            if source:
                sources[source] = sources.get(source, 0) + 1
        values = (
            record.version or "",
            model_name(record.model) or "",
            record.route,
            max(sources, key=sources.__getitem__) if sources else "",
            _bucket(len(docs), _DOCUMENT_BUCKETS, "16+"),
            _bucket(chars, _CONTEXT_BUCKETS, "32k+") if docs else "0",
            tool,
            language(record.query) if record.query else "",
            record.metadata.get(TOPIC, ""),
        )
        return cls(
            # `where_value` leaves a short printable value as it is: most are.
            tuple(v if len(v) <= MAX_CHARS and v.isprintable() else where_value(v) for v in values),
            record.trace_id,
            record.conversation or record.trace_id or record.request_id,
            sender(record),
        )

    def __reduce__(self) -> tuple[type[Where], tuple[object, ...]]:
        # Built again, not set field by field: a dataclass with slots unpickles by looking
        # its fields up each time, and a record's Where comes back with it from its worker.
        return Where, (self.values, self.trace_id, self.unit, self.sender)

    @classmethod
    def from_line(
        cls,
        version: str | None,
        model: str | None,
        route: str,
        dimensions: Mapping[str, Any] | None,
        trace_id: str | None,
        unit: str | None,
    ) -> Where:
        """A results line's (or verdict row's) values; raises ValueError for a dimension
        value that is not text."""
        given = dict(dimensions or {})
        rest = []
        for name in LINE_DIMENSIONS:
            value = given.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"dimensions.{name}: {value!r} is not text")
            rest.append(where_value(value or ""))
        head = (version or "", model_name(model) or "", route)
        return cls(tuple(where_value(v) for v in head) + tuple(rest), trace_id, unit)

    def line(self) -> dict[str, str]:
        """The `dimensions` of a results line (those it does not carry as its own fields)."""
        return dict(zip(LINE_DIMENSIONS, self.values[3:], strict=True))


def _basis(record: RagRecord) -> tuple[object, ...]:
    """What a record's values come from: a record (a copy) equal in these has the same
    (its sender aside, which `Where.of` checks on its own)."""
    return (
        record.query,
        record.retrieved_context,
        record.version,
        record.model,
        record.route,
        record.metadata.get(TOPIC, ""),
        record.trace_id,
        record.conversation,
        record.request_id,
    )


_last: list[Any] = [None, None]


def where_value(value: str) -> str:
    """`value` as a dimension's value: a label value (`shown_label`, `bounded_label`)."""
    return bounded_label(shown_label(value), MAX_CHARS)


def _bucket(value: int, buckets: tuple[tuple[int, str], ...], top: str) -> str:
    for upper, name in buckets:
        if value <= upper:
            return name
    return top


def _source_of(uri: str) -> str:
    """A document URI's source: its host (without user), or the first segment of a path
    without a scheme."""
    scheme = uri.find("://")
    if scheme > 0:
        host = uri[scheme + 3 :].partition("/")[0]
        return host.rpartition("@")[2].lower()
    head, slash, _ = uri.lstrip("/").partition("/")
    return head if slash and ":" not in head else ""


# -- language -------------------------------------------------------------------------------

_SCRIPTS = (
    ("ja", re.compile(r"[\u3040-\u30ff]")),  # kana before Han: Japanese writes both
    ("zh", re.compile(r"[\u4e00-\u9fff]")),
    ("ko", re.compile(r"[\uac00-\ud7af]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
    ("he", re.compile(r"[\u0590-\u05ff]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
    ("th", re.compile(r"[\u0e00-\u0e7f]")),
)
_COMMON = {
    "en": "the is are was what how why when where which who does do can of to in and for my "
    "with it this that you your i on be have not",
    "de": "der die das ist und nicht ich wie was wer wann warum wo ein eine mit für auf den "
    "dem zu es sie kann ich mein",
    "fr": "le la les est et pas je comment que qui quand pourquoi où un une avec pour sur des "
    "du ce il elle mon ma",
    "es": "el la los las es y no yo cómo qué quién cuándo por dónde un una con para en del "
    "se mi su",
    "it": "il lo la gli le è e non io come che chi quando perché dove un una con per su del "
    "della mi",
    "pt": "o a os as é e não eu como que quem quando por onde um uma com para em do da meu minha",
    "nl": "de het is en niet ik hoe wat wie wanneer waarom waar een met voor op van mijn je",
}
_VOTES: dict[str, tuple[str, ...]] = {}
for _name, _words in _COMMON.items():
    for _word in _words.split():
        _VOTES[_word] = (*_VOTES.get(_word, ()), _name)
_LATIN_WORD = re.compile(r"[a-zà-ÿ]+")


def language(text: str) -> str:
    """The language of `text` as far as its script and common words tell (`""`: not
    told)."""
    sample = text[:400]
    if not sample.isascii():
        for name, pattern in _SCRIPTS:
            if pattern.search(sample):
                return name
    votes: dict[str, int] = {}
    for word in _LATIN_WORD.findall(sample.lower()):
        for name in _VOTES.get(word, ()):
            votes[name] = votes.get(name, 0) + 1
    best, count, second = "", 0, 0
    for name, n in votes.items():
        if n > count:
            best, count, second = name, n, count
        elif n > second:
            second = n
    return best if count > second else ""
