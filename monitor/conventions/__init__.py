"""The conventions table, as data: what an entry is (`_entry.py`: for one tracing convention
or SDK, which attribute names a span's role, where each part of a call is and how it is
encoded, which log records it sends), the shipped entries (`_shipped.py`, with the GenAI
operation names they read in `_operations.py`), what stacks trace that asks nothing
(`_not_requests.py`: writes to a store, probe paths), and the log
records the receivers take, as those entries declare them (`_log_records.py`).

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
from monitor.conventions._shipped import SHIPPED

__all__ = [
    "CONTAINER",
    "EMBEDDINGS",
    "ENCODINGS",
    "FIELDS",
    "GENKIT",
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
    "PROBE_PATHS",
    "PROMPT",
    "RETRIEVAL",
    "SCORED_NODES",
    "SHIPPED",
    "STORE_WRITES",
    "TEXT",
    "TOOL",
    "TOOL_MESSAGES",
    "Convention",
    "Kind",
    "Source",
    "log_events_of",
]
