"""`/debug/records` on the metrics port: what the trace stage extracted lately, and which
traces gave no record and why — the way the Collector's zpages show a pipeline's recent
work, so a user can check extraction on their own traffic without reading code.

Off by default (`exporters.prometheus.debug_records: N` turns it on): the page shows
user text, redacted as `redaction` says, behind the metrics port's web config (TLS,
basic auth) when one is set. Memory is bounded: the last N of each kind, every text field
cut at `TEXT_LIMIT` characters.

`GET /debug/records` answers JSON, newest first:
`{"extracted": [{time, source, trace_id, request_id, service, route, missing, suspect, query,
history, context: [{doc_uri, content}], response}], "no_record": [{time, source,
trace_id, service, spans, reason}]}`. Reasons: `unsampled`, `not_rag`, `extract_failed`,
`bad_protobuf`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

from monitor.exporters.extracted import Redact, extracted_text
from monitor.records import EXTRACTION_SUSPECT, RagRecord

TEXT_LIMIT = 2_000
PATH = "/debug/records"


class DebugRecords:
    """A `TraceObserver` keeping the last `size` extractions and non-extractions."""

    def __init__(
        self, size: int, redact: Redact | None, clock: Callable[[], float] = time.time
    ) -> None:
        self._extracted: deque[dict[str, Any]] = deque(maxlen=size)
        self._no_record: deque[dict[str, Any]] = deque(maxlen=size)
        self._redact = redact
        self._clock = clock
        self._lock = threading.Lock()  # the trace stage's thread writes, the loop reads

    def extracted(self, record: RagRecord, source: str) -> None:
        entry = {
            "time": self._clock(),
            "source": source,
            "trace_id": record.trace_id,
            "request_id": record.request_id,
            "service": record.service,
            "route": record.route,
            "missing": sorted(record.missing()),
            "suspect": record.metadata.get(EXTRACTION_SUSPECT),
            **extracted_text(record, self._redact, TEXT_LIMIT),
        }
        with self._lock:
            self._extracted.append(entry)

    def no_record(self, trace_id: str, service: str, source: str, reason: str, spans: int) -> None:
        entry = {
            "time": self._clock(),
            "source": source,
            "trace_id": trace_id,
            "service": service,
            "spans": spans,
            "reason": reason,
        }
        with self._lock:
            self._no_record.append(entry)

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return {
                "extracted": list(reversed(self._extracted)),
                "no_record": list(reversed(self._no_record)),
            }

    async def handle(self, request: web.Request) -> web.Response:
        body = json.dumps(self.snapshot(), ensure_ascii=False, indent=1)
        return web.Response(text=body, content_type="application/json")
