"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export` and
`LogsService/Export` (GenAI log events); `MetricsService/Export` and logs that are not GenAI
events are accepted and counted as discarded (`otlp_discarded_total{receiver,signal}`), so
an SDK exporting every signal to one endpoint logs no export error.

The method is registered with raw bytes in and out, so that the receiver decodes them
(`_wire.decode`: a small request read on the event loop, a larger one in the receivers'
decode thread); the spans then go to the trace stage on the loop. Status codes: OK (with `partial_success` when
some spans had malformed ids), INVALID_ARGUMENT for an undecodable request,
UNAUTHENTICATED for a missing/wrong `authorization: Bearer <token>` when
`receivers.otlp.auth_token` is set, UNAVAILABLE (which OTLP exporters retry) when the
trace stage's intake is full, and
RESOURCE_EXHAUSTED from gRPC itself for messages over `max_request_bytes` (gRPC refuses
those before the handler runs, so they are not in `records_rejected_total`). gzip message
compression is handled by gRPC.
"""

from __future__ import annotations

import logging

import grpc
from grpc import aio

from monitor.component import TraceConsumer
from monitor.config import Config
from monitor.receivers.otlp._tls import grpc_credentials
from monitor.receivers.otlp._wire import (
    Discarded,
    Offload,
    decode,
    export_response,
    export_success,
    hand_over,
    log_events_for,
    metrics_in,
    peer_address,
    token_ok,
)
from monitor.shared.listen import ListenError, bind_failure
from monitor.spans import DecodeError
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
RECEIVER = "otlp_grpc"
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
METRICS_SERVICE = "opentelemetry.proto.collector.metrics.v1.MetricsService"


class OtlpGrpcReceiver:
    def __init__(
        self,
        config: Config,
        consumer: TraceConsumer,
        offload: Offload,
        telemetry: Telemetry,
    ) -> None:
        otlp = config.receivers.otlp
        self._endpoint = otlp.grpc.endpoint
        self._tls = otlp.tls
        self._token = otlp.auth_token
        self._limit = otlp.max_request_bytes
        self._log_events = log_events_for(config)
        self._consumer = consumer
        self._offload = offload
        self._t = telemetry
        self._warn = RateLimitedLog(log)
        self._discarded = Discarded(telemetry, RECEIVER, self._warn)
        self._server: aio.Server | None = None
        self.port: int | None = None

    async def start(self) -> None:
        if self._server is not None:
            return
        server = aio.server(
            options=[
                ("grpc.max_receive_message_length", self._limit),
                ("grpc.so_reuseport", 0),
            ]
        )
        handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(
            self._export
        )
        logs_handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(
            self._export_logs
        )
        metrics_handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(
            self._export_metrics
        )
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),
                grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": logs_handler}),
                grpc.method_handlers_generic_handler(METRICS_SERVICE, {"Export": metrics_handler}),
            )
        )
        try:
            if self._tls is None:
                port = server.add_insecure_port(self._endpoint)
            else:
                port = server.add_secure_port(self._endpoint, grpc_credentials(self._tls))
        except RuntimeError:  # how gRPC reports a failed bind
            port = 0
        if port == 0:
            reason = bind_failure(self._endpoint)
            raise ListenError("receivers.otlp.grpc.endpoint", self._endpoint, reason)
        await server.start()
        self._server = server
        self.port = port
        tls = "TLS" if self._tls is not None else "plaintext"
        log.info("OTLP/gRPC receiver listening on %s (port %d, %s)", self._endpoint, port, tls)

    async def shutdown(self, deadline_s: float) -> None:
        """Stop taking calls; calls in progress get until `deadline_s` to finish."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(deadline_s)

    async def _refuse(
        self,
        context: aio.ServicerContext[bytes, bytes],
        code: grpc.StatusCode,
        reason: str,
        message: str,
    ) -> None:
        """Count and log, then end the call with `code` (`abort` raises)."""
        self._t.counter("records_rejected").labels(RECEIVER, reason).inc()
        self._warn.warning(
            reason, "OTLP/gRPC request refused (%s %s): %s", code.name, reason, message
        )
        await context.abort(code, message)

    async def _export_logs(
        self, request: bytes, context: aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        """`LogsService/Export`: GenAI log events, joined to their spans by the trace
        stage; other log records are accepted and counted as discarded."""
        return await self._export(request, context, "logs")

    async def _export_metrics(
        self, request: bytes, context: aio.ServicerContext[bytes, bytes]
    ) -> bytes:
        """`MetricsService/Export`: accepted, counted as discarded."""
        return await self._export(request, context, "metrics")

    async def _export(
        self,
        request: bytes,
        context: aio.ServicerContext[bytes, bytes],
        signal: str = "traces",
    ) -> bytes:
        logs = signal == "logs"
        if self._token is not None:
            metadata = dict(context.invocation_metadata() or ())
            presented = metadata.get("authorization")
            if not token_ok(presented if isinstance(presented, str) else None, self._token):
                await self._refuse(
                    context,
                    grpc.StatusCode.UNAUTHENTICATED,
                    "unauthorized",
                    "missing or wrong bearer token",
                )
        if signal != "metrics" and self._consumer.refuses():
            await context.abort(grpc.StatusCode.UNAVAILABLE, "span queue full, retry later")
        try:
            if signal == "metrics":
                metrics = await self._offload(
                    metrics_in, request, gzip=False, as_json=False, limit=self._limit
                )
                self._discarded.add("metrics", metrics)
                return export_success(as_json=False)
            decoded = await decode(
                self._offload,
                request,
                gzip=False,
                as_json=False,
                limit=self._limit,
                logs=logs,
                log_events=self._log_events,
            )
        except DecodeError as exc:
            await self._refuse(context, grpc.StatusCode.INVALID_ARGUMENT, exc.reason, exc.detail)
        except Exception as exc:  # a decoder bug: answer, count, keep serving
            log.debug("OTLP/gRPC decode failed", exc_info=True)
            await self._refuse(
                context, grpc.StatusCode.INTERNAL, "internal_error", f"{type(exc).__name__}: {exc}"
            )
        address = peer_address(context.peer() or "")
        if not hand_over(self._consumer, RECEIVER, decoded, logs=logs, address=address):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "span queue full, retry later")
        if logs:
            self._discarded.add("logs", decoded.rejected)
            return export_success(as_json=False)
        if decoded.rejected:
            self._t.counter("records_rejected").labels(RECEIVER, "invalid_span").inc(
                decoded.rejected
            )
        return export_response(decoded, as_json=False)
