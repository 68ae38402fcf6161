"""Labels fed back for audited records (`audit.reference: labels`): JSON objects
`{"request_id": "...", "label": "pass" | "fail"}`, from a JSON-lines file read as it grows
(`LabelFile`) or posted to `POST /audit/labels` on the metrics port (`LabelEndpoint`: one
object or a list). Each label goes to a `LabelSink` (the audit sink), which answers what
became of it; a label that is not an object of that shape is refused here, counted as
`malformed` with the problem named."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any, Protocol

from aiohttp import web

from monitor.audit._ticker import Ticker
from monitor.audit.access import LabelAccess
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
PATH = "/audit/labels"
MAX_BODY_BYTES = 1 << 20
POLL_S = 1.0
VERDICTS = {"pass": False, "fail": True}  # label → defect


class LabelSink(Protocol):
    def label(self, request_id: str, defect: bool, source: str) -> str | None:
        """Join a label to its audited record: None once joined, else why not."""

    def malformed(self, source: str, problem: str) -> None:
        """Count a label that could not be read."""

    def unreadable(self, source: str, problem: str) -> None:
        """Count a read of a label source that failed."""


def parse_label(item: Any) -> tuple[str, bool] | str:
    """`(request_id, defect)`, or what is wrong with `item`."""
    if not isinstance(item, dict):
        return f"a label is a JSON object, not {type(item).__name__}"
    request_id = item.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        return "request_id: missing or not a non-empty string"
    label = item.get("label")
    if not isinstance(label, str) or label not in VERDICTS:
        # A list or object is named by its type: it may be nested deeper than dumps goes.
        got = type(label).__name__ if isinstance(label, list | dict) else json.dumps(label)[:40]
        return f'label: must be "pass" or "fail", got {got}'
    unknown = sorted(set(item) - {"request_id", "label"})
    if unknown:
        return f"unknown keys: {', '.join(unknown)[:80]}"
    return request_id, VERDICTS[label]


def _apply(sink: LabelSink, item: Any, source: str) -> str | None:
    parsed = parse_label(item)
    if isinstance(parsed, str):
        sink.malformed(source, parsed)
        return parsed
    return sink.label(*parsed, source)


class LabelEndpoint:
    """`POST /audit/labels`: a JSON object or a list of them, from a sender `access` admits
    (401 without a credential, 403 with a wrong one). Answers 200 with how many joined and,
    per refused label, its index and why; 400 when the body is not JSON or is nested too
    deeply (the whole body counted as one malformed label); 413 past `MAX_BODY_BYTES`. Each
    refused post is counted by reason and logged."""

    def __init__(self, sink: LabelSink, telemetry: Telemetry, access: LabelAccess) -> None:
        self._sink = sink
        self._access = access
        self._refused = telemetry.counter("audit_label_posts_refused")
        self._quiet = RateLimitedLog(log)

    def _refuse(self, request: web.Request, reason: str, status: int, problem: str) -> web.Response:
        self._refused.labels(reason).inc()
        self._quiet.warning(
            f"post-{reason}",
            "audit: labels posted from %s refused (%s): %s",
            request.remote,
            reason,
            problem,
        )
        if status in (400, 413):  # a body that holds no label it could read
            self._sink.malformed("http", problem)
        headers = {"WWW-Authenticate": 'Bearer realm="rag-monitor"'} if status == 401 else None
        return web.json_response({"error": problem}, status=status, headers=headers)

    async def handle(self, request: web.Request) -> web.Response:
        denied = self._access.refusal(request.headers.get("Authorization"))
        if denied is not None:
            status, problem = (
                (401, "a label sender presents Authorization: Bearer <token>")
                if denied == "no_credential"
                else (403, "the bearer token is not the one audit.labels.token_env holds")
            )
            return self._refuse(request, denied, status, problem)
        too_large = f"body over {MAX_BODY_BYTES} bytes"
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return self._refuse(request, "too_large", 413, too_large)
        body = await request.content.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            return self._refuse(request, "too_large", 413, too_large)
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return self._refuse(request, "not_json", 400, f"body is not JSON: {exc}")
        except RecursionError:
            problem = "body is nested too deeply (a label is an object of two strings)"
            return self._refuse(request, "too_deep", 400, problem)
        items = data if isinstance(data, list) else [data]
        refused = []
        for index, item in enumerate(items):
            why = _apply(self._sink, item, "http")
            if why is not None:
                refused.append({"index": index, "error": why})
        return web.json_response({"joined": len(items) - len(refused), "refused": refused})


class LabelFile:
    """Reads a JSON-lines file of labels as it grows, every `POLL_S`: complete lines only
    (a line still being written waits for its newline); a file that shrinks was replaced
    and is read from its start."""

    def __init__(self, path: str, sink: LabelSink) -> None:
        self._path = path
        self._sink = sink
        self._offset = 0
        self._line = 0
        self._partial = b""
        self._quiet = RateLimitedLog(log)
        self._ticker = Ticker(POLL_S, self._read_off_the_loop)

    async def start(self) -> None:
        self._ticker.start()

    async def shutdown(self, deadline_s: float) -> None:
        await self._ticker.stop()
        await self._read_off_the_loop()  # what was written before the stop is kept

    async def _read_off_the_loop(self) -> None:
        await asyncio.to_thread(self.read)

    def read(self) -> int:
        """Reads what was appended since the last read; returns the labels read."""
        try:
            size = os.stat(self._path).st_size
            if size < self._offset:
                self._quiet.warning("shrunk", "%s shrank: read again from its start", self._path)
                self._offset, self._line, self._partial = 0, 0, b""
            if size == self._offset:
                return 0
            with open(self._path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read(size - self._offset)
        except OSError as exc:
            self._sink.unreadable("file", f"cannot read labels from {self._path}: {exc}")
            return 0
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        read = 0
        for line in lines:
            self._line += 1
            if not line.strip():
                continue
            read += 1
            try:
                item = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                self._sink.malformed("file", f"{self._path} line {self._line}: not JSON ({exc})")
                continue
            parsed = parse_label(item)
            if isinstance(parsed, str):
                self._sink.malformed("file", f"{self._path} line {self._line}: {parsed}")
            else:
                self._sink.label(*parsed, "file")
        return read
