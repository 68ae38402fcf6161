"""HTTP connection limits for the OTLP/HTTP receiver, against slow and idle clients.

aiohttp keeps a connection open for as long as its client keeps trickling bytes of a
request header. The guard wraps each connection's protocol and closes one whose request
headers have not arrived whole within `read_header_timeout_s` of their first byte (or of
the connection opening, for its first request); the
receiver itself bounds the body read (`read_timeout_s`, answered 408); aiohttp closes
keep-alive connections idle for `idle_timeout_s`; and at most `max_connections` are open
at once (a connection beyond that is closed as it opens). Each cut is counted in
`http_connections_closed_total{reason}`, and so is a client that resets or closes its
connection in the middle of a request (`client_reset`): the request is dropped with one
log line per minute at most, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from monitor.telemetry import RateLimitedLog, Telemetry

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
log = logging.getLogger("monitor.receivers.otlp.http")
REASONS = ("read_header_timeout", "read_timeout", "too_many_connections", "client_reset")


@dataclass(slots=True, eq=False)
class _Connection:
    transport: asyncio.BaseTransport
    reading_since: float | None = None  # first byte of a request whose headers are not in
    in_request: bool = False  # headers parsed, a handler is running


class ConnectionGuard:
    def __init__(
        self,
        telemetry: Telemetry,
        *,
        read_header_timeout_s: float,
        max_connections: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._header_timeout = read_header_timeout_s
        self._max = max_connections
        self._clock = clock
        self._open: dict[asyncio.BaseTransport, _Connection] = {}
        self._task: asyncio.Task[None] | None = None
        self.closed = telemetry.counter("http_connections_closed")
        for reason in REASONS:
            self.closed.labels(reason)
        self._warn = RateLimitedLog(log)

    def protocol_factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], Any]:
        return lambda: _GuardedProtocol(self, inner())

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Marks the request's headers as in (for every route, unknown ones too)."""
        connection = self._open.get(request.transport) if request.transport else None
        if connection is not None:
            connection.reading_since = None
            connection.in_request = True
        try:
            return await handler(request)
        except ConnectionError as exc:
            # The client reset or closed the connection before its request was read.
            self.closed.labels("client_reset").inc()
            self._warn.warning(
                "client_reset",
                "OTLP/HTTP client %s cut its connection in the middle of a request to %s "
                "(%s); the request is dropped (http_connections_closed_total)",
                request.remote,
                request.path,
                exc,
            )
            response = web.Response(status=400)
            response.force_close()
            return response
        finally:
            if connection is not None:
                connection.in_request = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._sweeper(), name="otlp-http-guard")

    async def shutdown(self, deadline_s: float) -> None:
        """Stop the sweeper (a cancelled sleep: returns at once, whatever the deadline)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def sweep(self) -> int:
        """Close connections whose request headers are overdue; returns how many."""
        now = self._clock()
        late = [
            c
            for c in self._open.values()
            if c.reading_since is not None and now - c.reading_since > self._header_timeout
        ]
        for connection in late:
            self.closed.labels("read_header_timeout").inc()
            connection.transport.close()
        return len(late)

    async def _sweeper(self) -> None:
        interval = max(0.05, min(1.0, self._header_timeout / 4))
        while True:
            await asyncio.sleep(interval)
            self.sweep()

    def _opened(self, transport: asyncio.BaseTransport) -> _Connection | None:
        if len(self._open) >= self._max:
            self.closed.labels("too_many_connections").inc()
            transport.close()
            return None
        # The header clock starts when the connection opens, so that a client that
        # connects and says nothing does not hold a slot either.
        connection = _Connection(transport, reading_since=self._clock())
        self._open[transport] = connection
        return connection

    def _data(self, connection: _Connection) -> None:
        if connection.reading_since is None and not connection.in_request:
            connection.reading_since = self._clock()

    def _lost(self, connection: _Connection) -> None:
        self._open.pop(connection.transport, None)


class _GuardedProtocol(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the guard watching its bytes."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self._connection: _Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._connection = self._guard._opened(transport)
        if self._connection is not None:
            self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._connection is not None:
            self._guard._data(self._connection)
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._connection is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._connection is not None:
            self._guard._lost(self._connection)
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._connection is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._connection is not None:
            self._inner.resume_writing()
