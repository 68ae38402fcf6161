"""OTLP/HTTP receiver: `POST /v1/traces` and `/v1/logs` (GenAI log events), protobuf or
JSON, optionally gzip; `POST /v1/metrics` and logs that are not GenAI events are accepted
and counted as discarded (`otlp_discarded_total{receiver,signal}`), so an SDK exporting
every signal to one endpoint logs no export error.

Replies per the OTLP/HTTP spec, in the request's encoding: 200 with an
`ExportTraceServiceResponse` (with `partial_success.rejected_spans` and a message when
some spans had malformed ids), 400 for an undecodable body (`google.rpc.Status` naming
the problem), 401 for a missing/wrong bearer token when `receivers.otlp.auth_token` is
set, 413 over `receivers.otlp.max_request_bytes` (checked on the wire size and again while
decompressing, so a gzip bomb stops at the cap), 415 for other content types or
encodings, and 503 with `Retry-After` when the span queue is full. Every refusal is
counted in `records_rejected_total{receiver="otlp_http",reason}` (or
`dropped_total{stage="assemble",reason="queue_full"}` by the trace stage) and the
receiver keeps serving.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from monitor.component import TraceConsumer
from monitor.config import Config
from monitor.receivers.otlp._connections import ConnectionGuard
from monitor.receivers.otlp._tls import http_ssl_context
from monitor.receivers.otlp._wire import (
    Discarded,
    Offload,
    TooLarge,
    decode,
    export_response,
    export_success,
    hand_over,
    log_events_for,
    metrics_in,
    status_body,
    token_ok,
)
from monitor.shared.listen import ListenError, reason_of
from monitor.spans import DecodeError
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
RECEIVER = "otlp_http"
PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
METRICS_PATH = "/v1/metrics"
RETRY_AFTER_S = 2
_PROTOBUF = frozenset({"application/x-protobuf", "application/protobuf"})
_JSON = "application/json"
_INVALID_ARGUMENT, _UNAUTHENTICATED, _RESOURCE_EXHAUSTED, _UNAVAILABLE, _INTERNAL = 3, 16, 8, 14, 13


class OtlpHttpReceiver:
    def __init__(
        self,
        config: Config,
        consumer: TraceConsumer,
        offload: Offload,
        telemetry: Telemetry,
    ) -> None:
        otlp = config.receivers.otlp
        host, _, port = otlp.http.endpoint.rpartition(":")
        self._host = host.strip("[]")
        self._port = int(port)
        self._token = otlp.auth_token
        self._tls = otlp.tls
        self._limit = otlp.max_request_bytes
        self._log_events = log_events_for(config)
        self._read_timeout = otlp.http.read_timeout_s
        self._idle_timeout = otlp.http.idle_timeout_s
        self._guard = ConnectionGuard(
            telemetry,
            read_header_timeout_s=otlp.http.read_header_timeout_s,
            max_connections=otlp.http.max_connections,
        )
        self._consumer = consumer
        self._offload = offload
        self._t = telemetry
        self._warn = RateLimitedLog(log)
        self._discarded = Discarded(telemetry, RECEIVER, self._warn)
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self.port: int | None = None

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=self._limit, middlewares=[self._guard.middleware])
        app.router.add_post(PATH, self._export)
        app.router.add_post(LOGS_PATH, self._export_logs)
        app.router.add_post(METRICS_PATH, self._export_metrics)
        # Bodies are decompressed here, with a cap, not by the server.
        runner = web.AppRunner(
            app,
            access_log=None,
            auto_decompress=False,
            keepalive_timeout=self._idle_timeout,
            # After refusing a request, read the rest of its body for at most this long
            # before closing (aiohttp's default is 10 s, a gift to slow senders).
            lingering_time=1.0,
        )
        await runner.setup()
        ssl_context = http_ssl_context(self._tls) if self._tls is not None else None
        assert runner.server is not None
        try:
            server = await asyncio.get_running_loop().create_server(
                self._guard.protocol_factory(runner.server),
                self._host,
                self._port,
                ssl=ssl_context,
                reuse_address=True,
            )
        except OSError as exc:
            await runner.cleanup()
            address = f"{self._host}:{self._port}"
            raise ListenError("receivers.otlp.http.endpoint", address, reason_of(exc)) from None
        self._runner, self._server = runner, server
        self.port = server.sockets[0].getsockname()[1]
        self._guard.start()
        log.info("OTLP/HTTP receiver listening on %s:%d%s", self._host, self.port, PATH)

    async def shutdown(self, deadline_s: float) -> None:
        """Stop taking requests; requests in progress get until `deadline_s` to finish
        (then their connections are closed)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        await self._guard.shutdown(deadline_s)
        runner, self._runner = self._runner, None
        if runner is not None:
            if runner.server is not None:
                # Idle keep-alive connections close now, busy ones when their request is
                # answered or at the deadline; `cleanup` then finds none left to wait for.
                runner.server.pre_shutdown()
                await runner.server.shutdown(deadline_s)
            await runner.cleanup()

    def _reject(
        self, status: int, code: int, reason: str, message: str, *, as_json: bool
    ) -> web.Response:
        self._t.counter("records_rejected").labels(RECEIVER, reason).inc()
        self._warn.warning(reason, "OTLP/HTTP request refused (%d %s): %s", status, reason, message)
        return web.Response(
            status=status,
            body=status_body(code, message, as_json=as_json),
            content_type=_JSON if as_json else "application/x-protobuf",
            headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
        )

    async def _export_logs(self, request: web.Request) -> web.Response:
        """`POST /v1/logs`: GenAI log events, joined to their spans by the trace stage;
        other log records are accepted and counted as discarded."""
        return await self._export(request, "logs")

    async def _export_metrics(self, request: web.Request) -> web.Response:
        """`POST /v1/metrics`: accepted, counted as discarded."""
        return await self._export(request, "metrics")

    async def _export(self, request: web.Request, signal: str = "traces") -> web.Response:
        media = request.content_type
        as_json = media == _JSON
        if not token_ok(request.headers.get("Authorization"), self._token):
            return self._reject(
                401,
                _UNAUTHENTICATED,
                "unauthorized",
                "missing or wrong bearer token",
                as_json=as_json,
            )
        if media not in _PROTOBUF and not as_json:
            return self._reject(
                415,
                _INVALID_ARGUMENT,
                "unsupported_media_type",
                f"Content-Type {media!r}: expected application/x-protobuf or application/json",
                as_json=False,
            )
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", ""):
            return self._reject(
                415,
                _INVALID_ARGUMENT,
                "unsupported_encoding",
                f"Content-Encoding {encoding!r}: expected gzip or none",
                as_json=as_json,
            )
        if request.content_length is not None and request.content_length > self._limit:
            return self._too_large(f"body of {request.content_length} bytes", as_json)
        if signal != "metrics" and self._consumer.refuses():
            return self._unavailable(as_json)
        # The chunks as they arrived, joined once: no copy per chunk, none for a body that
        # came in one piece.
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self._read_timeout):
                async for chunk, _ in request.content.iter_chunks():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > self._limit:
                        return self._too_large(f"body over {self._limit} bytes", as_json)
        except TimeoutError:
            self._guard.closed.labels("read_timeout").inc()
            response = self._reject(
                408,
                _UNAVAILABLE,
                "read_timeout",
                f"body not received within receivers.otlp.http.read_timeout_s="
                f"{self._read_timeout:g}",
                as_json=as_json,
            )
            response.force_close()
            return response
        logs = signal == "logs"
        try:
            if signal == "metrics":
                metrics = await self._offload(
                    metrics_in,
                    b"".join(chunks),
                    gzip=encoding == "gzip",
                    as_json=as_json,
                    limit=self._limit,
                )
                self._discarded.add("metrics", metrics)
                return self._success(export_success(as_json=as_json), as_json)
            decoded = await decode(
                self._offload,
                b"".join(chunks),
                gzip=encoding == "gzip",
                as_json=as_json,
                limit=self._limit,
                logs=logs,
                log_events=self._log_events,
            )
        except TooLarge as exc:
            return self._too_large(str(exc), as_json)
        except DecodeError as exc:
            return self._reject(400, _INVALID_ARGUMENT, exc.reason, exc.detail, as_json=as_json)
        except Exception as exc:  # a decoder bug: answer, count, keep serving
            log.debug("OTLP/HTTP decode failed", exc_info=True)
            return self._reject(
                500, _INTERNAL, "internal_error", f"{type(exc).__name__}: {exc}", as_json=as_json
            )
        if not hand_over(self._consumer, RECEIVER, decoded, logs=logs, address=request.remote):
            return self._unavailable(as_json)
        if logs:
            self._discarded.add("logs", decoded.rejected)
            return self._success(export_success(as_json=as_json), as_json)
        if decoded.rejected:
            self._t.counter("records_rejected").labels(RECEIVER, "invalid_span").inc(
                decoded.rejected
            )
        return self._success(export_response(decoded, as_json=as_json), as_json)

    def _success(self, body: bytes, as_json: bool) -> web.Response:
        return web.Response(body=body, content_type=_JSON if as_json else "application/x-protobuf")

    def _too_large(self, what: str, as_json: bool) -> web.Response:
        return self._reject(
            413,
            _RESOURCE_EXHAUSTED,
            "too_large",
            f"{what}: over receivers.otlp.max_request_bytes={self._limit}",
            as_json=as_json,
        )

    def _unavailable(self, as_json: bool) -> web.Response:
        return web.Response(
            status=503,
            body=status_body(_UNAVAILABLE, "span queue full, retry later", as_json=as_json),
            content_type=_JSON if as_json else "application/x-protobuf",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
