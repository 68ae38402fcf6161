"""A request's fingerprint: what the alert rules take as "the same question".

Verdicts on the same question (a client retrying, a script sending one request two
thousand times, a popular question asked by many users) fail or pass together: they are
one piece of evidence, not many (`monitor/evidence/units.py` counts them as one clustered
unit, as a conversation's). The fingerprint is a hash of the normalised query and of the
normalised text of the retrieved documents, so requests that differ only in case, spacing,
punctuation or numbers (a timestamp, a counter in the prompt) share it. It is 16 hex
characters whatever the record's size, and says nothing of the text (a 64-bit hash).
Only a prefix of each text is read (`MAX_READ_CHARS`): the work is bounded. The evaluation
worker that extracts a record computes it there, and the record carries it to the ingest
process (`RagRecord.memo`), which reads it for as long as the record holds the same texts.
"""

from __future__ import annotations

import hashlib
import re

from monitor.records import RagRecord

# Characters of the query and of each document read into the fingerprint, at most.
MAX_READ_CHARS = 4_096
# Documents read into the fingerprint, at most.
MAX_DOCUMENTS = 16
_NUMBER = re.compile(r"\d+")
_NOT_WORD = re.compile(r"[\W_]+")


def normalised(text: str) -> str:
    """`text` in lower case, numbers as `0`, punctuation and runs of spaces as one space."""
    text = _NUMBER.sub("0", text[:MAX_READ_CHARS].casefold())
    return _NOT_WORD.sub(" ", text).strip()


def request_fingerprint(record: RagRecord) -> str | None:
    """The fingerprint of `record`'s question and context (None: it has no query)."""
    memo = record.memo
    known = memo.fingerprint
    if known is not None and known[1] is record.query and known[2] is record.retrieved_context:
        return known[0]
    fingerprint = _fingerprint(record)
    memo.fingerprint = (fingerprint, record.query, record.retrieved_context)
    return fingerprint


def _fingerprint(record: RagRecord) -> str | None:
    if not record.query:
        return None
    digest = hashlib.blake2b(digest_size=8)
    digest.update(normalised(record.query).encode())
    for doc in record.retrieved_context[:MAX_DOCUMENTS]:
        digest.update(b"\x1f")
        digest.update(normalised(doc.content).encode())
    return digest.hexdigest()
