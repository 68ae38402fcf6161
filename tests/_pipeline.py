"""The front half of the pipeline for receiver tests: real receivers feeding the real trace
stage, whose records land in `RecordingStage` (a stand-in for the evaluation stage with
its `put_many` signature) so that the exact records can be checked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from monitor.component import RecordConsumer, SampledRecord
from monitor.config import Config
from monitor.processors.sampler import Sampler
from monitor.processors.trace import TraceStage
from monitor.receivers.otlp import OtlpReceivers
from monitor.receivers.otlp.grpc import OtlpGrpcReceiver
from monitor.receivers.otlp.http import OtlpHttpReceiver
from monitor.records import RagRecord
from monitor.telemetry import Telemetry
from tests._wait import wait_until_async


class RecordingStage:
    """Keeps what `put_many` receives and finishes it at once; `block` holds `put_many`."""

    def __init__(self) -> None:
        self.records: list[tuple[str, RagRecord]] = []
        self.items: list[SampledRecord] = []
        self.block = asyncio.Event()
        self.block.set()

    async def put_many(self, items: Sequence[SampledRecord]) -> int:
        await self.block.wait()
        for item in items:
            self.items.append(item)
            self.records.append((item.source, item.record))
            if item.on_done is not None:
                item.on_done(True)
        return len(items)

    async def wait_until(self, done: Callable[[], bool], timeout_s: float = 15) -> None:
        await wait_until_async(done, timeout_s, "records at the recording stage")

    async def wait_for(self, trace_id: str) -> list[tuple[str, RagRecord]]:
        def found() -> list[tuple[str, RagRecord]]:
            return [(s, r) for s, r in self.records if r.trace_id == trace_id]

        await self.wait_until(lambda: bool(found()))
        return found()


def trace_stage(config: Config, consumer: RecordConsumer, telemetry: Telemetry) -> TraceStage:
    return TraceStage(
        config.trace_assembly,
        Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators}),
        consumer,
        telemetry,
        route_attribute=config.receivers.otlp.route_attribute,
        route_in_sampling=any(o.route is not None for o in config.sampling.overrides),
    )


class Served:
    """OTLP receivers and the trace stage behind them, started and stopped together."""

    def __init__(self, config: Config, stage: RecordingStage, telemetry: Telemetry) -> None:
        self.trace = trace_stage(config, stage, telemetry)
        self.receivers = OtlpReceivers(config, self.trace, telemetry)

    @property
    def grpc(self) -> OtlpGrpcReceiver | None:
        return self.receivers.grpc

    @property
    def http(self) -> OtlpHttpReceiver | None:
        return self.receivers.http

    async def start(self) -> None:
        await self.trace.start()
        await self.receivers.start()

    async def shutdown(self, deadline_s: float) -> None:
        """As the service stops them: receivers, then the trace stage (which releases
        the traces it holds)."""
        await self.receivers.shutdown(deadline_s)
        await self.trace.shutdown(deadline_s)


async def started(config: Config, stage: RecordingStage, telemetry: Telemetry) -> Served:
    served = Served(config, stage, telemetry)
    await served.start()
    return served
