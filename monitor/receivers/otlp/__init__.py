"""The OTLP receivers: `TraceService/Export` over gRPC and `POST /v1/traces` over HTTP.

`OtlpReceivers` is one component for the service to start and stop: both servers share
one decode thread (decompression, JSON, log events and large bodies are decoded there
while the request awaits them; a small protobuf body is read on the loop,
`_wire.LOOP_READ_BYTES`), then hand each request's spans to the trace stage on the loop
as one `Delivery`. When the trace stage refuses (the evaluation stage is full)
they answer with a retryable status (HTTP 503 + `Retry-After`, gRPC `UNAVAILABLE`), so
senders retry instead of the monitor buffering without bound.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from monitor.component import TraceConsumer
from monitor.config import Config
from monitor.receivers.otlp.grpc import OtlpGrpcReceiver
from monitor.receivers.otlp.http import OtlpHttpReceiver
from monitor.telemetry import Telemetry

__all__ = ["OtlpReceivers"]

T = TypeVar("T")


class _DecodeThread:
    """One thread for the receivers' CPU work (decompression, decoding)."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="otlp-decode")

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        call = functools.partial(fn, *args, **kwargs)
        if self._executor is None:
            return call()
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def shutdown(self) -> None:
        """Calls not started are cancelled; the one running finishes in its thread."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


class OtlpReceivers:
    def __init__(
        self,
        config: Config,
        consumer: TraceConsumer,
        telemetry: Telemetry,
    ) -> None:
        otlp = config.receivers.otlp
        self._decoder = _DecodeThread()
        self.grpc = (
            OtlpGrpcReceiver(config, consumer, self._decoder.run, telemetry)
            if otlp.grpc.enabled
            else None
        )
        self.http = (
            OtlpHttpReceiver(config, consumer, self._decoder.run, telemetry)
            if otlp.http.enabled
            else None
        )

    @property
    def enabled(self) -> bool:
        return self.grpc is not None or self.http is not None

    async def start(self) -> None:
        self._decoder.start()
        try:
            if self.grpc is not None:
                await self.grpc.start()
            if self.http is not None:
                await self.http.start()
        except BaseException:
            await self.shutdown(0)
            raise

    async def shutdown(self, deadline_s: float) -> None:
        """Stop both servers (no new spans arrive), giving calls in progress until
        `deadline_s`; what they accepted is in the trace stage, which drains it when the
        service stops it next."""
        started = time.monotonic()
        if self.grpc is not None:
            await self.grpc.shutdown(deadline_s)
        if self.http is not None:
            await self.http.shutdown(max(0.0, deadline_s - (time.monotonic() - started)))
        self._decoder.shutdown()
