"""Every component obeys one lifecycle (`monitor/component.py`): `async start()` and
`async shutdown(deadline_s: float) -> None`, and no `close` or `stop`. Those cheap to
build also run it: `shutdown` without `start` is safe, then start, one item through,
shutdown under a deadline, and a second shutdown (idempotent)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Hashable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest

from harness.judge_stub import Reply, StubJudge
from harness.servers import webhook
from harness.wait import wait_until_async
from monitor.component import (
    ACCEPTED,
    GENERATOR,
    Accepted,
    Alert,
    Delivery,
    Evaluated,
    SampledRecord,
    SampledTrace,
)
from monitor.config import AbsoluteRule, Budget, Config, EvaluatorConfig
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.processors.sampler import Sampler
from monitor.records import ContextDoc, RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry

# Where each component lives, by what it is. A component moved by a later change is
# followed here.
COMPONENTS = {
    "otlp_receivers": "monitor.receivers.otlp:OtlpReceivers",
    "otlp_grpc_receiver": "monitor.receivers.otlp.grpc:OtlpGrpcReceiver",
    "otlp_http_receiver": "monitor.receivers.otlp.http:OtlpHttpReceiver",
    "kafka_receiver": "monitor.receivers.kafka:KafkaReceiver",
    "trace_stage": "monitor.processors.trace:TraceStage",
    "evaluation_stage": "monitor.processors.evaluation:EvaluationStage",
    "process_pool": "monitor.pool:ProcessPool",
    "metrics_sink": "monitor.exporters.prometheus:MetricsSink",
    "results_file_sink": "monitor.exporters.results_file:ResultsFileSink",
    "alert_engine": "monitor.alerts.engine:AlertEngine",
    "otlp_events_sink": "monitor.exporters.otlp_events:OtlpEventsSink",
    "replay_summary_sink": "monitor.receivers.replay_summary:SummarySink",
    "metrics_port": "monitor.exporters.metrics_port:HealthServer",
    "judge_client": "monitor.judge.client:JudgeClient",
    "alert_sender": "monitor.exporters.alertmanager:AlertSender",
}
DEADLINE_S = 5.0
WAIT_S = 30.0  # bounds only a failing test

RECORD = RagRecord(
    request_id="r1",
    trace_id="0af7651916cd43dd8448eb211c80319c",
    service="shop",
    query="When did the bridge open?",
    retrieved_context=(ContextDoc(content="The bridge opened in 1931."),),
    response="It opened in 1931.",
    expected_response="The bridge opened in 1931.",
)
RESULTS = {"f1": EvalResult(name="f1", score=0.2, normalized=0.2, passed=False)}


def _load(path: str) -> type[Any]:
    module, _, name = path.partition(":")
    cls: type[Any] = getattr(importlib.import_module(module), name)
    return cls


@pytest.mark.parametrize("path", COMPONENTS.values(), ids=COMPONENTS.keys())
def test_the_lifecycle_signature(path: str) -> None:
    cls = _load(path)
    assert inspect.iscoroutinefunction(cls.start), "start must be async"
    assert list(inspect.signature(cls.start).parameters) == ["self"]
    assert inspect.iscoroutinefunction(cls.shutdown), "shutdown must be async"
    shutdown = inspect.signature(cls.shutdown)
    assert list(shutdown.parameters) == ["self", "deadline_s"]
    deadline = shutdown.parameters["deadline_s"]
    assert deadline.default is inspect.Parameter.empty, "the caller always gives the deadline"
    assert deadline.annotation in (float, "float")
    assert shutdown.return_annotation in (None, "None"), "shutdown returns nothing"
    assert [verb for verb in ("close", "stop") if hasattr(cls, verb)] == []


class _Component(Protocol):
    async def start(self) -> None: ...

    async def shutdown(self, deadline_s: float) -> None: ...


async def _run(
    make: Callable[[], _Component],
    feed: Callable[[Any], Awaitable[object] | object],
    fed: Callable[[Any], object],
    what: str,
) -> Any:
    """Shutdown without start; start, `feed`, wait for `fed`, shutdown twice."""
    await make().shutdown(DEADLINE_S)
    component = make()
    await component.start()
    try:
        outcome = feed(component)
        if inspect.isawaitable(outcome):
            await outcome
        await wait_until_async(lambda: fed(component), WAIT_S, what)
    finally:
        await component.shutdown(DEADLINE_S)
    await component.shutdown(DEADLINE_S)
    return component


def _config(**sections: Any) -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {
                    "grpc": {"endpoint": "127.0.0.1:0"},
                    "http": {"endpoint": "127.0.0.1:0"},
                }
            },
            "exporters": {"prometheus": {"endpoint": "127.0.0.1:0"}},
            "evaluators": [{"name": "f1"}],
            **sections,
        }
    )


def _counted(telemetry: Telemetry, name: str) -> float:
    """The sum of a metric's samples over every label set."""
    return sum(
        sample.value
        for family in telemetry.registry.collect()
        for sample in family.samples
        if sample.name == f"rag_monitor_{name}"
    )


class _Deliveries:
    """The trace stage as a receiver sees it: takes every delivery."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []

    def refuses(self) -> bool:
        return False

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted:
        self.deliveries.extend(deliveries)
        return ACCEPTED

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        return bool(self.consume(deliveries))

    def flush(self) -> None:
        return None

    def holds(self, origins: Collection[Hashable]) -> int:
        return 0

    def suspend(self, origins: Collection[Hashable]) -> None:
        return None

    def resume(self, origins: Collection[Hashable]) -> None:
        return None

    def abandon(self, origins: Collection[Hashable]) -> None:
        return None


class _Records:
    """The evaluation stage as the trace stage sees it: takes every trace and record."""

    def __init__(self) -> None:
        self.items: list[SampledRecord | SampledTrace] = []

    @property
    def full(self) -> bool:
        return False

    def take(self, items: Sequence[SampledRecord | SampledTrace]) -> int:
        self.items.extend(items)
        return len(items)

    async def room(self) -> bool:
        return True


# -- receivers ---------------------------------------------------------------------------


def _post_json_trace(port: int) -> int:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "rag",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
    }
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as response:
        return int(response.status)


async def _otlp_receivers(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.receivers.otlp import OtlpReceivers

    consumer = _Deliveries()

    async def feed(receivers: OtlpReceivers) -> None:
        assert receivers.http is not None and receivers.http.port is not None
        assert await asyncio.to_thread(_post_json_trace, receivers.http.port) == 200

    receivers = await _run(
        lambda: OtlpReceivers(_config(), consumer, telemetry),
        feed,
        lambda _: consumer.deliveries,
        "a span through OTLP/HTTP",
    )
    assert [len(d.spans) for d in consumer.deliveries] == [1]
    assert receivers.http is not None and receivers.http.port is not None
    with pytest.raises(OSError):  # the port is closed
        await asyncio.to_thread(_post_json_trace, receivers.http.port)


# -- stages --------------------------------------------------------------------------------


async def _trace_stage(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.processors.trace import TraceStage

    config = _config()
    consumer = _Records()

    def make() -> TraceStage:
        sampler = Sampler(config.sampling, {"f1": None})
        return TraceStage(config.trace_assembly, sampler, consumer, telemetry)

    async def feed(stage: TraceStage) -> None:
        assert await stage.put([Delivery("test", records=[RECORD])])

    await _run(make, feed, lambda _: consumer.items, "a record through the trace stage")
    assert [
        item.record.request_id for item in consumer.items if isinstance(item, SampledRecord)
    ] == ["r1"]


async def _evaluation_stage(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.processors.budget import BudgetGate
    from monitor.processors.evaluation import EvaluationStage
    from monitor.receivers.replay_summary import SummarySink

    entry = EvaluatorConfig(name="f1")
    summary = SummarySink()

    def make() -> EvaluationStage:
        evaluator = build(entry, BuildContext())
        return EvaluationStage([(evaluator, entry)], BudgetGate(Budget()), [summary], telemetry)

    async def feed(stage: EvaluationStage) -> None:
        assert await stage.put_many([SampledRecord(RECORD, "test", frozenset({"f1"}))]) == 1

    stage = await _run(make, feed, lambda _: summary.records, "a record evaluated")
    assert stage.abandoned == 0


# -- sinks ---------------------------------------------------------------------------------


async def _metrics_sink(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.exporters.prometheus import MetricsSink

    await _run(
        lambda: MetricsSink(telemetry),
        lambda sink: sink.emit([Evaluated(RECORD, RESULTS)]),
        lambda _: _counted(telemetry, "evaluations_total"),
        "the evaluation counted",
    )
    assert _counted(telemetry, "evaluations_total") == 1


async def _results_file_sink(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.exporters.results_file import ResultsFileSink

    path = tmp_path / "results.jsonl"
    written: list[asyncio.Future[bool]] = []
    await _run(
        lambda: ResultsFileSink(path, telemetry),
        lambda sink: written.extend(sink.emit([Evaluated(RECORD, RESULTS)])),
        lambda _: written and written[0].done(),
        "the results line written",
    )
    assert written[0].result() is True
    assert [json.loads(line)["request_id"] for line in path.read_text().splitlines()] == ["r1"]


async def _alert_engine(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.alerts.engine import AlertEngine
    from monitor.alerts.state import StateFile

    rule = AbsoluteRule(name="defects", evaluator="f1", max_defect_rate=0.1, min_samples=1)
    state = tmp_path / "alerts.json"

    def make() -> AlertEngine:
        return AlertEngine([rule], telemetry, state_file=StateFile(str(state), telemetry))

    engine = await _run(
        make,
        lambda engine: engine.emit([Evaluated(RECORD, RESULTS)]),
        lambda engine: engine.snapshot(),
        "the verdict in the rule's window",
    )
    assert engine.snapshot()["defects"]["services"]["shop"]
    assert state.exists()  # saved at shutdown


async def _otlp_events_sink(tmp_path: Path, telemetry: Telemetry) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from monitor.exporters.otlp_events import OtlpEventsSink

    exporters: list[InMemorySpanExporter] = []

    def make() -> OtlpEventsSink:
        exporters.append(InMemorySpanExporter())  # shutting a sink down shuts its exporter
        return OtlpEventsSink(exporters[-1], telemetry)

    await _run(
        make,
        lambda sink: sink.emit([Evaluated(RECORD, RESULTS)]),
        lambda sink: sink.exported,
        "the evaluation event exported",
    )
    (span,) = exporters[-1].get_finished_spans()
    assert [(event.attributes or {})["gen_ai.evaluation.name"] for event in span.events] == ["f1"]


async def _replay_summary_sink(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.receivers.replay_summary import SummarySink

    summary = await _run(
        SummarySink,
        lambda sink: sink.emit([Evaluated(RECORD, RESULTS)]),
        lambda sink: sink.records,
        "the record counted",
    )
    assert summary.totals["f1"].failed == 1


# -- servers, clients, notifiers -----------------------------------------------------------


def _get(port: int, path: str) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S) as response:
        return int(response.status)


async def _metrics_port(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.exporters.metrics_port import HealthServer

    answered: list[int] = []

    async def feed(server: HealthServer) -> None:
        assert server.bound_port is not None
        answered.append(await asyncio.to_thread(_get, server.bound_port, "/metrics"))

    server = await _run(
        lambda: HealthServer(telemetry, "127.0.0.1:0", lambda: (True, "ready")),
        feed,
        lambda _: answered,
        "a scrape answered",
    )
    assert answered == [200]
    with pytest.raises(OSError):  # the port is closed
        await asyncio.to_thread(_get, server.bound_port, "/healthz")


@asynccontextmanager
async def _judge_stub() -> AsyncIterator[StubJudge]:
    async with StubJudge(Reply(content="Score: 4")) as stub:
        yield stub


async def _judge_client(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.judge.client import JudgeClient

    async with _judge_stub() as stub:
        config = Config.model_validate(
            {
                "judge": {"model": "openai/judge-stub", "api_base": stub.openai_base},
                "evaluators": [{"name": "fluency"}],
            }
        )
        results: list[EvalResult] = []

        def make() -> JudgeClient:
            return JudgeClient(config.judge, config.redaction, telemetry, environ={})

        async def feed(client: JudgeClient) -> None:
            context = BuildContext(judge=client, judge_model=config.judge.model)
            results.append(await build(config.evaluators[0], context).evaluate(RECORD))

        await _run(make, feed, lambda _: results, "a judge verdict")
        assert results[0].score == 4 and len(stub.received) == 1


async def _alert_sender(tmp_path: Path, telemetry: Telemetry) -> None:
    from monitor.exporters.alertmanager import AlertSender

    now = datetime.now(UTC)
    alert = Alert(
        rule="defects",
        service="shop",
        status="firing",
        labels={"alertname": "defects", "service": "shop", "generator": GENERATOR},
        annotations={"summary": "defect rate above 10%"},
        starts_at=now,
        ends_at=now,
        generator_url="http://monitor:9464/metrics",
    )
    with webhook() as hook:
        await _run(
            lambda: AlertSender(telemetry, webhooks=[(hook.url, {})]),
            lambda sender: sender.notify([alert]),
            lambda _: hook.alerts(),
            "the alert delivered",
        )
        assert [a["labels"]["alertname"] for a in hook.alerts()] == ["defects"]


# Kafka (a broker) and the process pool (worker processes) are run by their own tests.
RUNS: dict[str, Callable[[Path, Telemetry], Awaitable[None]]] = {
    "otlp_receivers": _otlp_receivers,
    "trace_stage": _trace_stage,
    "evaluation_stage": _evaluation_stage,
    "metrics_sink": _metrics_sink,
    "results_file_sink": _results_file_sink,
    "alert_engine": _alert_engine,
    "otlp_events_sink": _otlp_events_sink,
    "replay_summary_sink": _replay_summary_sink,
    "metrics_port": _metrics_port,
    "judge_client": _judge_client,
    "alert_sender": _alert_sender,
}


def test_every_run_names_a_component() -> None:
    assert set(RUNS) <= set(COMPONENTS)


@pytest.mark.parametrize("name", RUNS)
async def test_start_one_item_and_shutdown(name: str, tmp_path: Path, telemetry: Telemetry) -> None:
    await RUNS[name](tmp_path, telemetry)
