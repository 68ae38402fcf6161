"""The front half of the pipeline for receiver tests: real receivers feeding the real trace
stage, whose records land in `RecordingStage` (a stand-in for the evaluation stage as the
trace stage sees it, which extracts sampled traces in place: `unpack`) so that the exact
records can be checked."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from harness.wait import CONDITION_S, wait_until_async
from monitor.component import OnDone, RecordConsumer, SampledRecord, SampledTrace
from monitor.config import Config
from monitor.extraction import TraceRecords, extract_within
from monitor.processors.sampler import Sampler
from monitor.processors.trace import TraceStage
from monitor.receivers.otlp import OtlpReceivers
from monitor.receivers.otlp.grpc import OtlpGrpcReceiver
from monitor.receivers.otlp.http import OtlpHttpReceiver
from monitor.records import RagRecord
from monitor.records.limits import SizeLimits
from monitor.telemetry import Telemetry


class _Countdown:
    """Calls `on_done` once `n` calls came, with whether all were True."""

    def __init__(self, on_done: OnDone, n: int) -> None:
        self._on_done, self._left, self._ok = on_done, n, True

    def __call__(self, ok: bool) -> None:
        self._left -= 1
        self._ok &= ok
        if not self._left:
            self._on_done(self._ok)


def unpack(
    item: SampledRecord | SampledTrace,
    route_attribute: str = "http.route",
    limits: SizeLimits | None = None,
) -> list[SampledRecord]:
    """What the evaluation stage makes of an item before scoring it, done in place: a
    record as it is; a trace's records, extracted and bounded, with the trace's metadata,
    once its `on_extracted` was told; finishing them all finishes the trace (at once when
    it gives none)."""
    if isinstance(item, SampledRecord):
        return [item]
    outcome = extract_within(item.spans, route_attribute, limits or SizeLimits())
    if isinstance(outcome, TraceRecords) and item.metadata:
        metadata = dict(item.metadata)
        records = [
            r.model_copy(update={"metadata": {**r.metadata, **metadata}}) for r in outcome.records
        ]
        outcome = dataclasses.replace(outcome, records=records)  # its causes kept
    item.on_extracted(outcome)
    records = outcome.records if isinstance(outcome, TraceRecords) else []
    if not records:
        if item.on_done is not None:
            item.on_done(True)
        return []
    done = _Countdown(item.on_done, len(records)) if item.on_done is not None else None
    return [SampledRecord(record, item.source, item.sampled, done) for record in records]


class RecordingStage:
    """Keeps what it takes and finishes it at once (the evaluation stage as the trace
    stage sees it); between `hold` and `release` it holds what it takes instead, and is
    full once it holds `capacity` items."""

    def __init__(self, capacity: int = 4) -> None:
        self.records: list[tuple[str, RagRecord]] = []
        self.items: list[SampledRecord] = []
        self.capacity = capacity
        self._holding = False
        self._held: list[SampledRecord | SampledTrace] = []
        self._room = asyncio.Event()

    @property
    def full(self) -> bool:
        return len(self._held) >= self.capacity

    def take(self, items: Sequence[SampledRecord | SampledTrace]) -> int:
        if self._holding:
            self._held.extend(items)
        else:
            self._finish(items)
        return len(items)

    async def room(self) -> bool:
        while self.full:
            self._room.clear()
            await self._room.wait()
        return True

    def hold(self) -> None:
        self._holding = True

    def release(self) -> None:
        """Stop holding: what was held is taken in."""
        held, self._held, self._holding = self._held, [], False
        self._finish(held)
        self._room.set()

    def _finish(self, items: Sequence[SampledRecord | SampledTrace]) -> None:
        for item in (record for given in items for record in unpack(given)):
            self.items.append(item)
            self.records.append((item.source, item.record))
            if item.on_done is not None:
                item.on_done(True)

    async def wait_until(self, done: Callable[[], bool], timeout_s: float = CONDITION_S) -> None:
        await wait_until_async(done, timeout_s, "records at the recording stage")

    async def wait_for(self, trace_id: str) -> list[tuple[str, RagRecord]]:
        def found() -> list[tuple[str, RagRecord]]:
            return [(s, r) for s, r in self.records if r.trace_id == trace_id]

        await self.wait_until(lambda: bool(found()))
        return found()


def trace_stage(
    config: Config, consumer: RecordConsumer, telemetry: Telemetry, **options: Any
) -> TraceStage:
    """The trace stage `config` makes, as the pipeline wires it; `options` (a clock, an
    observer, limits) go to `TraceStage`."""
    return TraceStage(
        config.trace_assembly,
        Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators}),
        consumer,
        telemetry,
        route_attribute=config.receivers.otlp.route_attribute,
        route_in_sampling=any(o.route is not None for o in config.sampling.overrides),
        **options,
    )


class Served:
    """OTLP receivers and the trace stage behind them, started and stopped together."""

    def __init__(
        self, config: Config, stage: RecordingStage, telemetry: Telemetry, **options: Any
    ) -> None:
        """`options` go to `TraceStage` (`trace_stage`)."""
        self.trace = trace_stage(config, stage, telemetry, **options)
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


async def started(
    config: Config, stage: RecordingStage, telemetry: Telemetry, **options: Any
) -> Served:
    served = Served(config, stage, telemetry, **options)
    await served.start()
    return served


def receiver_config(
    idle_timeout_s: float = 30,
    max_open_traces: int = 10_000,
    late_spans_wait_s: float | None = None,
    missing_parent_wait_s: float | None = None,
    **otlp: Any,
) -> Config:
    """Both OTLP receivers on ports of their own (0), with the trace stage's bounds.
    `late_spans_wait_s=0` releases a whole trace as its root ends, for tests whose spans
    all come before their root's (the default's wait is real time, seconds a trace);
    `missing_parent_wait_s=0` cuts a trace whose root is lost at the idle timeout."""
    assembly: dict[str, float] = {
        "idle_timeout_s": idle_timeout_s,
        "max_open_traces": max_open_traces,
    }
    if late_spans_wait_s is not None:
        assembly["late_spans_wait_s"] = late_spans_wait_s
    if missing_parent_wait_s is not None:
        assembly["missing_parent_wait_s"] = missing_parent_wait_s
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {
                    "grpc": {"endpoint": "127.0.0.1:0"},
                    "http": {"endpoint": "127.0.0.1:0"},
                    **otlp,
                }
            },
            "trace_assembly": assembly,
        }
    )


def metric_value(telemetry: Telemetry, name: str, **labels: str) -> float:
    """The monitor's own metric `name` with `labels` (0 when the series is absent)."""
    return telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0
