"""The conventions table, as data: what an entry is (`_entry.py`: for one tracing convention
or SDK, which attribute names a span's role, where each part of a call is and how it is
encoded, which log records it sends), the shipped entries (`_shipped.py`, with the GenAI
operation names they read in `_operations.py`), what stacks trace that asks nothing
(`_not_requests.py`: writes to a store, probe paths), and the log
records the receivers take, as those entries declare them (`_log_records.py`); and the
vocabularies of the verdicts an app writes into its own traces (`_verdicts.py`).

It imports nothing of the monitor: the span decoders (`monitor.spans`) and the extraction
(`monitor.extraction`, which reads the table in order, the user's entries first) both
read it.
"""

from monitor.conventions._entry import (
    CONTAINER,
    EMBEDDINGS,
    ENCODINGS,
    FIELDS,
    GENKIT,
    INDEXED,
    INDEXING,
    JSON,
    LISTED,
    LISTED_ROLES,
    MESSAGES,
    MODEL,
    OTHER,
    PROMPT,
    RETRIEVAL,
    SCORED_NODES,
    TEXT,
    TOOL,
    TOOL_MESSAGES,
    Convention,
    Kind,
    Source,
)
from monitor.conventions._log_records import (
    LOG_EVENTS,
    LOG_LINE_EVENTS,
    OUTPUT_EVENTS,
    log_events_of,
)
from monitor.conventions._not_requests import PROBE_PATHS, STORE_WRITES
from monitor.conventions._parts import (
    BLOB,
    DOCUMENT,
    FILE,
    GENERIC,
    PART_KINDS,
    PART_TYPE_MEMBERS,
    REASONING,
    SERVER_TOOL_CALL,
    SERVER_TOOL_CALL_RESPONSE,
    TEXT_PART,
    TOOL_CALL,
    TOOL_CALL_RESPONSE,
    URI,
    PartShape,
)
from monitor.conventions._shipped import SHIPPED
from monitor.conventions._verdicts import (
    BLOCKED,
    EVALUATION,
    FLAGGED,
    GUARDRAIL,
    OWN_MARK,
    PASSED,
    VERDICT_EVENTS,
    VOCABULARIES,
    Vocabulary,
    verdict_events_of,
)

__all__ = [
    "BLOB",
    "BLOCKED",
    "CONTAINER",
    "DOCUMENT",
    "EMBEDDINGS",
    "ENCODINGS",
    "EVALUATION",
    "FIELDS",
    "FILE",
    "FLAGGED",
    "GENERIC",
    "GENKIT",
    "GUARDRAIL",
    "INDEXED",
    "INDEXING",
    "JSON",
    "LISTED",
    "LISTED_ROLES",
    "LOG_EVENTS",
    "LOG_LINE_EVENTS",
    "MESSAGES",
    "MODEL",
    "OTHER",
    "OUTPUT_EVENTS",
    "OWN_MARK",
    "PART_KINDS",
    "PART_TYPE_MEMBERS",
    "PASSED",
    "PROBE_PATHS",
    "PROMPT",
    "REASONING",
    "RETRIEVAL",
    "SCORED_NODES",
    "SERVER_TOOL_CALL",
    "SERVER_TOOL_CALL_RESPONSE",
    "SHIPPED",
    "STORE_WRITES",
    "TEXT",
    "TEXT_PART",
    "TOOL",
    "TOOL_CALL",
    "TOOL_CALL_RESPONSE",
    "TOOL_MESSAGES",
    "URI",
    "VERDICT_EVENTS",
    "VOCABULARIES",
    "Convention",
    "Kind",
    "PartShape",
    "Source",
    "Vocabulary",
    "log_events_of",
    "verdict_events_of",
]
