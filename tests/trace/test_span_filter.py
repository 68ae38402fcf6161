"""The trace stage given OTLP requests with their spans unbuilt, as the receivers hand
them in (it builds the spans of the traces some evaluator may sample, `_filter.py`),
against the same stage given every span built: for requests that carry whole traces,
every count — spans received, traces released, traces unsampled by service, records and
which traces they come from — is the same, and the traces an error forces are
evaluated."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from opentelemetry.trace import Status, StatusCode, Tracer

from harness.otlp import WATER, emit_openinference, finished_spans, otlp_bytes
from harness.pipeline import trace_stage, unpack
from monitor.component import Delivery, SampledRecord, SampledTrace
from monitor.config import Config
from monitor.spans import decode_protobuf, read_protobuf
from monitor.telemetry import Telemetry, create_telemetry

TRACES = 60


class Finishing:
    """The next stage: takes every record and finishes it at once."""

    full = False

    def __init__(self) -> None:
        self.records: list[SampledRecord] = []

    def take(self, items: Sequence[SampledRecord | SampledTrace]) -> int:
        for item in (record for given in items for record in unpack(given)):
            self.records.append(item)
            if item.on_done is not None:
                item.on_done(True)
        return len(items)

    async def room(self) -> bool:
        return True


def _bodies(seed: int) -> tuple[list[bytes], set[str]]:
    """Two export requests holding whole traces of two services, some with a failed
    span; and the ids of the traces with one."""
    rng = random.Random(seed)
    failed: set[str] = set()

    def emit(tracer: Tracer) -> None:
        for _ in range(TRACES // 2):
            if rng.random() < 0.2:
                with tracer.start_as_current_span("RetrievalQA") as root:
                    root.set_attribute("rag.query", WATER.query)
                    root.set_attribute("rag.response", WATER.answer)
                    with tracer.start_as_current_span("llm") as llm:
                        llm.set_status(Status(StatusCode.ERROR, "model timed out"))
                    failed.add(f"{root.get_span_context().trace_id:032x}")
            else:
                emit_openinference(tracer, WATER, lambda: None)

    requests = [otlp_bytes(finished_spans(s, emit)) for s in ("rag-api", "rag-batch")]
    return requests, failed


def _value(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}", labels) or 0.0


@dataclass(frozen=True)
class Counts:
    spans: float
    released: dict[str, float]  # by trigger
    unsampled: dict[str, float]  # by service
    records: list[tuple[str | None, list[str]]]  # (trace id, evaluators sampled)


async def _counts(bodies: list[bytes], rate: float, *, unbuilt: bool) -> Counts:
    """`unbuilt`: each request handed in as the receivers do, its spans still
    serialized; else every span built first."""
    telemetry = create_telemetry()
    consumer = Finishing()
    # Released as soon as whole (the wait for late spans: tests/trace/test_late_spans.py).
    assembly = {"late_spans_wait_s": 0}
    config = Config.model_validate({"sampling": {"rate": rate}, "trace_assembly": assembly})
    stage = trace_stage(config, consumer, telemetry)
    await stage.start()
    try:
        for body in bodies:
            delivery = (
                Delivery("otlp_http", unbuilt=read_protobuf(body))
                if unbuilt
                else Delivery("otlp_http", decode_protobuf(body, lazy=True).spans)
            )
            assert stage.consume([delivery])
        assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == TRACES
    finally:
        await stage.shutdown(5)
    return Counts(
        spans=_value(telemetry, "spans_received_total", receiver="otlp_http"),
        released={
            trigger: _value(telemetry, "traces_assembled_total", trigger=trigger)
            for trigger in ("root_ended", "idle_timeout", "evicted", "shutdown")
        },
        unsampled={
            service: _value(telemetry, "traces_unsampled_total", service=service)
            for service in ("rag-api", "rag-batch")
        },
        records=sorted((r.record.trace_id, sorted(r.sampled)) for r in consumer.records),
    )


@pytest.mark.parametrize("rate", [0.0, 0.3])
async def test_counts_and_records_are_those_of_every_span_built(rate: float) -> None:
    bodies, failed = _bodies(seed=int(rate * 10))
    filtered = await _counts(bodies, rate, unbuilt=True)
    assert filtered == await _counts(bodies, rate, unbuilt=False)
    evaluated = {trace_id for trace_id, _ in filtered.records}
    assert failed and failed <= evaluated  # always.error forces them
    if rate == 0.0:
        assert evaluated == failed
