"""`OtlpReceivers`: the OTLP/gRPC and OTLP/HTTP receivers plus their shared ingest.

One component for the service to start and stop: `start()` starts the ingest task, then
the enabled servers; `shutdown()` (idempotent, safe without `start()`) stops the servers
first, so no new spans arrive, then lets the ingest assemble what is queued and release
open traces to the evaluation stage — which must still be accepting at that point.
"""

from __future__ import annotations

from monitor.config import Config
from monitor.receivers.otlp.ingest import OtlpIngest, RecordConsumer
from monitor.receivers.otlp_grpc import OtlpGrpcReceiver
from monitor.receivers.otlp_http import OtlpHttpReceiver
from monitor.telemetry import Telemetry


class OtlpReceivers:
    def __init__(self, config: Config, stage: RecordConsumer, telemetry: Telemetry) -> None:
        otlp = config.receivers.otlp
        self.ingest = OtlpIngest(config, stage, telemetry)
        self.grpc = OtlpGrpcReceiver(config, self.ingest, telemetry) if otlp.grpc.enabled else None
        self.http = OtlpHttpReceiver(config, self.ingest, telemetry) if otlp.http.enabled else None
        self._shutdown_s = config.pipeline.shutdown_timeout_s

    @property
    def enabled(self) -> bool:
        return self.grpc is not None or self.http is not None

    async def start(self) -> None:
        await self.ingest.start()
        try:
            if self.grpc is not None:
                await self.grpc.start()
            if self.http is not None:
                await self.http.start()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        if self.grpc is not None:
            await self.grpc.shutdown()
        if self.http is not None:
            await self.http.shutdown()
        await self.ingest.shutdown(self._shutdown_s)
