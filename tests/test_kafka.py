"""Kafka receiver against real Kafka-protocol brokers (noida-db, tansu) and a real collector
(rotel) fed by the real OpenTelemetry SDK. No test doubles: evaluators are the embedded
local ones, and replicas are `rag-monitor run` subprocesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import Config
from monitor.evaluators.base import EvalResult
from monitor.processors.sampler import Sampler
from monitor.receivers.kafka import KafkaReceiver
from monitor.records import RagRecord, parse_record
from monitor.service import Service
from tests._kafka import Broker, free_port, running_broker, unique, wait_for

EVALUATORS = [{"name": "local_relevance"}, {"name": "local_safety"}]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def noida(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_broker("noida", tmp_path_factory.mktemp("noida")) as broker:
        yield broker


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_broker("tansu", tmp_path_factory.mktemp("tansu")) as broker:
        yield broker


class Capture:
    """A result sink that keeps every finished record (to check ids and metadata)."""

    def __init__(self) -> None:
        self.records: list[RagRecord] = []
        self.results: list[dict[str, EvalResult]] = []

    async def start(self) -> None:
        return None

    def emit(self, record: RagRecord, results: dict[str, EvalResult]) -> None:
        self.records.append(record)
        self.results.append(results)

    async def close(self) -> None:
        return None

    def ids(self) -> set[str]:
        return {r.request_id for r in self.records}


def config(broker: Broker, topics: list[str], group: str, **kafka: Any) -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}},
                "kafka": broker.kafka_settings(topics, group, **kafka),
            },
            "evaluators": EVALUATORS,
            "trace_assembly": {"idle_timeout_s": 2.0},
        }
    )


@contextlib.asynccontextmanager
async def running(cfg: Config) -> AsyncIterator[tuple[Service, Capture]]:
    capture = Capture()
    service = Service(cfg, serve_http=False, extra_sinks=[capture])
    await service.start()
    try:
        yield service, capture
    finally:
        await service.shutdown(10)


async def until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


def metric(target: Service, name: str, **labels: str) -> float:
    value = target.telemetry.registry.get_sample_value(f"rag_monitor_{name}", labels)
    return value or 0.0


def metric_sum(target: Service, name: str, **match: str) -> float:
    total = 0.0
    for family in target.telemetry.registry.collect():
        for sample in family.samples:
            if sample.name == f"rag_monitor_{name}" and all(
                sample.labels.get(k) == v for k, v in match.items()
            ):
                total += sample.value
    return total


def native(request_id: str, query: str = "What is the capital of France?") -> dict[str, Any]:
    return {
        "request_id": request_id,
        "service": "shop",
        "request": {"messages": [{"role": "user", "content": query}]},
        "retrieved_context": [{"content": "Paris is the capital of France.", "doc_uri": "d1"}],
        "response": "Paris is the capital of France.",
    }


SHAPES: list[dict[str, Any] | list[Any]] = [
    native("native-1"),
    {
        "request_id": "qa-1",
        "question": "Who wrote Hamlet?",
        "context": ["Hamlet is a tragedy written by William Shakespeare."],
        "answer": "William Shakespeare wrote Hamlet.",
        "ground_truth": "Shakespeare",
    },
    {
        "request_id": "conv-1",
        "messages": [
            {"role": "user", "content": "How tall is Mount Everest?"},
            {
                "role": "assistant",
                "content": "Mount Everest is 8,849 metres tall.",
                "context": {
                    "citations": [
                        {"id": "c1", "title": "Everest", "content": "Everest is 8,849 m high."}
                    ]
                },
            },
        ],
    },
    {
        "request_id": "java-1",
        "userText": "What does the refund policy say?",
        "dataList": [{"content": "Refunds are accepted within 30 days.", "id": "policy"}],
        "responseContent": "You can get a refund within 30 days.",
    },
    [native("array-1"), native("array-2", "Where is the Louvre?")],
]
SHAPE_IDS = {"native-1", "qa-1", "conv-1", "java-1", "array-1", "array-2"}


async def test_json_records_in_every_shape_are_evaluated_and_committed(noida: Broker) -> None:
    topic = noida.create_topic(unique("shapes"))
    group = unique("g")
    headers = [("tenant", b"acme"), ("traceparent", b"00-abc-def-01")]
    # One message per shape, each batch with a different compression codec.
    for shape, codec in zip(SHAPES, ["gzip", "lz4", "zstd", "snappy", None], strict=True):
        noida.produce(topic, [shape], key=b"tenant-acme", headers=headers, compression=codec)
    async with running(config(noida, [topic], group)) as (service, capture):
        await until(lambda: capture.ids() >= SHAPE_IDS, 30, "all shapes evaluated")
        assert capture.ids() == SHAPE_IDS
        for record in capture.records:
            assert record.response and record.query and record.retrieved_context
            assert record.metadata["kafka.key"] == "tenant-acme"
            assert record.metadata["kafka.header.tenant"] == "acme"
            assert record.metadata["kafka.topic"] == topic
        assert metric(service, "records_total", service="shop", source="kafka") == 3
        assert metric_sum(service, "records_total", source="kafka") == len(SHAPE_IDS)
        assert metric_sum(service, "evaluations_total") == len(SHAPE_IDS) * len(EVALUATORS)
        await until(
            lambda: (
                metric(service, "kafka_lag", topic=topic, partition="0") == 0
                and service.telemetry.registry.get_sample_value(
                    "rag_monitor_kafka_lag", {"topic": topic, "partition": "0"}
                )
                is not None
            ),
            10,
            "lag gauge at 0",
        )
        assert service.ready() == (True, "ready")
    assert noida.committed(group, topic, 1) == {0: len(SHAPES)}


async def test_a_slow_pipeline_pauses_fetching_instead_of_buffering(noida: Broker) -> None:
    topic = noida.create_topic(unique("slow"))
    group = unique("g")
    records = [native(f"slow-{i}", f"Question {i}?") for i in range(600)]
    noida.produce(topic, records)
    cfg = config(noida, [topic], group, max_poll_records=10)
    cfg = cfg.model_copy(
        update={"pipeline": cfg.pipeline.model_copy(update={"queue_size": 5, "workers": 1})}
    )
    limit = 5 + 2 * 10  # pipeline.queue_size + 2 x max_poll_records
    async with running(cfg) as (service, capture):
        receiver = service.receivers[0]
        assert isinstance(receiver, KafkaReceiver)
        most, paused, lagging = 0, False, False
        async with asyncio.timeout(60):
            while len(capture.records) < len(records):
                most = max(most, receiver.in_flight)
                paused = paused or receiver.paused
                lagging = lagging or metric(service, "kafka_lag", topic=topic, partition="0") > 0
                await asyncio.sleep(0.002)
        assert paused and lagging
        assert most <= limit + 10  # at most one poll batch beyond the limit
        assert capture.ids() == {r["request_id"] for r in records}
    assert noida.committed(group, topic, 1) == {0: len(records)}


POISON: list[tuple[bytes, str]] = [
    (b"this is not json", "unknown_encoding"),
    (b"{not json either", "bad_json"),
    (b"\x0a\xff\xff\xff\x0f", "bad_protobuf"),
    (json.dumps({"question": "Where is my parcel?", "context": ["c"]}).encode(), "no_response"),
]


async def test_poison_messages_go_to_the_dead_letter_topic_and_the_partition_moves_on(
    noida: Broker,
) -> None:
    topic = noida.create_topic(unique("poison"))
    dead = noida.create_topic(unique("dead"))
    group = unique("g")
    values = [json.dumps(native("good-1")).encode()]
    values += [raw for raw, _ in POISON]
    values += [json.dumps(native("good-2")).encode()]
    noida.produce(topic, values, key=b"k1", headers=[("origin", b"checkout")])
    async with running(config(noida, [topic], group, dead_letter_topic=dead)) as (
        service,
        capture,
    ):
        await until(lambda: capture.ids() >= {"good-1", "good-2"}, 30, "good records")
        for _, reason in POISON:
            assert metric(service, "records_rejected_total", receiver="kafka", reason=reason) == 1
        dead_letters = noida.read_all(dead, len(POISON))
        assert [m.value for m in dead_letters] == [raw for raw, _ in POISON]
        for message, (_, reason) in zip(dead_letters, POISON, strict=True):
            headers = dict(message.headers)
            assert headers["rag-monitor-error-reason"] == reason.encode()
            assert headers["rag-monitor-error"]
            assert headers["origin"] == b"checkout"
            assert headers["rag-monitor-source"].startswith(f"{topic}/0/".encode())
            assert message.key == b"k1"
        await until(
            lambda: metric(service, "kafka_lag", topic=topic, partition="0") == 0, 10, "no lag"
        )
    assert capture.ids() == {"good-1", "good-2"}
    assert noida.committed(group, topic, 1) == {0: len(values)}


async def test_core_path_against_tansu(tansu: Broker) -> None:
    topic = tansu.create_topic(unique("core"), partitions=2)
    dead = tansu.create_topic(unique("dead"))
    group = unique("g")
    tansu.produce(topic, SHAPES, key=b"k", compression="lz4")
    tansu.produce(topic, [b"garbage"], key=b"k")
    async with running(config(tansu, [topic], group, dead_letter_topic=dead)) as (
        service,
        capture,
    ):
        await until(lambda: capture.ids() >= SHAPE_IDS, 30, "all shapes evaluated on tansu")
        assert metric_sum(service, "evaluations_total") == len(SHAPE_IDS) * len(EVALUATORS)
        assert [m.value for m in tansu.read_all(dead, 1)] == [b"garbage"]
    committed = tansu.committed(group, topic, 2)
    assert sum(v or 0 for v in committed.values()) == len(SHAPES) + 1


# -- OTLP through a real collector ---------------------------------------------------------


def _rotel_binary() -> str:
    import rotel  # type: ignore[import-untyped]

    return str(Path(rotel.__file__).parent / "rotel-agent")


@contextlib.contextmanager
def rotel_to_kafka(broker: Broker, topic: str, fmt: str, workdir: Path) -> Iterator[str]:
    """rotel with an OTLP/HTTP receiver and its Kafka exporter; yields the HTTP endpoint."""
    http_port, grpc_port = free_port(), free_port()
    log_path = workdir / f"rotel-{fmt}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                _rotel_binary(), "start",
                "--otlp-http-endpoint", f"127.0.0.1:{http_port}",
                "--otlp-grpc-endpoint", f"127.0.0.1:{grpc_port}",
                "--exporter", "kafka",
                "--kafka-exporter-brokers", broker.bootstrap,
                "--kafka-exporter-traces-topic", topic,
                "--kafka-exporter-format", fmt,
                "--kafka-exporter-compression", "lz4",
                "--disable-batching",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for(lambda: _port_open(http_port), 20, "rotel OTLP/HTTP port")
        yield f"http://127.0.0.1:{http_port}/v1/traces"
    except BaseException:
        sys.stderr.write(log_path.read_text(errors="replace")[-3000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _port_open(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def send_rag_traces(endpoint: str, questions: list[str]) -> None:
    """One OpenInference trace per question: a CHAIN root with a RETRIEVER and an LLM child,
    each exported on its own (so a trace's spans reach Kafka in several messages)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("kafka-test")
    for question in questions:
        answer = f"The answer to '{question}' is in the handbook."
        with tracer.start_as_current_span(
            "rag-chain",
            attributes={
                "openinference.span.kind": "CHAIN",
                "input.value": question,
                "output.value": answer,
            },
        ):
            with tracer.start_as_current_span(
                "retrieve",
                attributes={
                    "openinference.span.kind": "RETRIEVER",
                    "input.value": question,
                    "retrieval.documents.0.document.id": "handbook-1",
                    "retrieval.documents.0.document.content": f"Handbook: {question} answer.",
                },
            ):
                pass
            with tracer.start_as_current_span(
                "llm",
                attributes={
                    "openinference.span.kind": "LLM",
                    "llm.input_messages.0.message.role": "user",
                    "llm.input_messages.0.message.content": question,
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": answer,
                },
            ):
                pass
    provider.shutdown()


@pytest.mark.parametrize("fmt", ["protobuf", "json"])
async def test_otlp_records_produced_by_rotel_from_sdk_spans(
    noida: Broker, fmt: str, tmp_path: Path
) -> None:
    topic = noida.create_topic(unique(f"otlp-{fmt}"))
    group = unique("g")
    questions = [f"What is policy number {i}?" for i in range(3)]
    encoding = "otlp_proto" if fmt == "protobuf" else "auto"
    with rotel_to_kafka(noida, topic, fmt, tmp_path) as endpoint:
        await asyncio.to_thread(send_rag_traces, endpoint, questions)
        async with running(config(noida, [topic], group, encoding=encoding)) as (
            service,
            capture,
        ):
            await until(lambda: len(capture.records) >= len(questions), 30, "OTLP records")
            assert sorted(r.query or "" for r in capture.records) == sorted(questions)
            for record in capture.records:
                assert record.service == "rag-api"
                assert record.trace_id is not None
                assert [d.content for d in record.retrieved_context] == [
                    f"Handbook: {record.query} answer."
                ]
                assert record.response == f"The answer to '{record.query}' is in the handbook."
                assert record.metadata["kafka.topic"] == topic
            assert metric(service, "spans_received_total", receiver="kafka") == 3 * len(questions)
            assert metric_sum(service, "evaluations_total") == len(questions) * len(EVALUATORS)
            messages = 3 * len(questions)
            await until(
                lambda: metric(service, "kafka_lag", topic=topic, partition="0") == 0, 10, "lag 0"
            )
    assert noida.committed(group, topic, 1) == {0: messages}


def _orphan_span_message(trace_id: str) -> bytes:
    """A bare list of ResourceSpans (rotel's JSON format) holding one span whose parent
    never arrives, so the trace stays open until idle timeout or shutdown."""
    attributes = {
        "rag.query": "Where is Paris?",
        "rag.response": "Paris is in France.",
        "rag.context": json.dumps(["Paris is the capital of France."]),
    }
    span = {
        "traceId": trace_id,
        "spanId": "1111111111111111",
        "parentSpanId": "2222222222222222",
        "name": "answer",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "geo"}}]}
    return json.dumps([{"resource": resource, "scopeSpans": [{"spans": [span]}]}]).encode()


async def test_a_message_holding_an_open_trace_is_committed_only_once_the_trace_is_evaluated(
    noida: Broker,
) -> None:
    topic = noida.create_topic(unique("open-trace"))
    group = unique("g")
    trace_id = "0102030405060708090a0b0c0d0e0f10"
    noida.produce(topic, [_orphan_span_message(trace_id)])
    cfg = config(noida, [topic], group)
    assembly = cfg.trace_assembly.model_copy(update={"idle_timeout_s": 60.0})
    cfg = cfg.model_copy(update={"trace_assembly": assembly})
    async with running(cfg) as (service, capture):
        await until(
            lambda: metric(service, "spans_received_total", receiver="kafka") == 1, 30, "span"
        )
        await asyncio.sleep(1.5)  # longer than the commit interval
        assert capture.records == []
        assert noida.committed(group, topic, 1) == {0: None}
    # Shutdown released the open trace, evaluated it, then committed its message.
    assert [r.trace_id for r in capture.records] == [trace_id]
    assert capture.records[0].query == "Where is Paris?"
    assert noida.committed(group, topic, 1) == {0: 1}


# -- availability ----------------------------------------------------------------------------


async def test_broker_unavailable_at_start_and_mid_run_recovers_without_restart(
    tmp_path: Path,
) -> None:
    port = free_port()
    broker = Broker("noida", port, tmp_path, 6000, 2000)
    topic, group = "outage", unique("g")
    async with running(config(broker, [topic], group)) as (service, capture):
        await until(lambda: "cannot reach" in service.ready()[1], 15, "not-ready reason")
        assert service.ready()[0] is False
        # Let more connection attempts fail: none may leave a kafka-python IO thread behind.
        await asyncio.sleep(7)
        io_threads = [t for t in threading.enumerate() if t.name.startswith("kafka-io")]
        assert len(io_threads) <= 1, io_threads  # at most the attempt in progress
        try:
            broker.start()
            # The waiting consumer's metadata requests may auto-create the topic first.
            broker.create_topic(topic, exist_ok=True)
            broker.produce(topic, [native("before-1"), native("before-2")])
            await until(lambda: capture.ids() >= {"before-1", "before-2"}, 40, "first records")
            await until(lambda: service.ready()[0], 10, "ready")
            broker.stop()
            await until(lambda: not service.ready()[0], 20, "not ready after the broker died")
            assert "heartbeat" in service.ready()[1] or "cannot reach" in service.ready()[1]
            broker.start()
            broker.produce(topic, [native("after-1")])
            await until(lambda: "after-1" in capture.ids(), 60, "record after the outage")
            await until(lambda: service.ready()[0], 20, "ready again")
        finally:
            broker.stop()


# -- replicas (rag-monitor run subprocesses) ---------------------------------------------------


class Replica:
    def __init__(
        self, broker: Broker, topic: str, group: str, workdir: Path, name: str, **kafka: Any
    ) -> None:
        self.metrics_port = free_port()
        self.results = workdir / f"{name}-results.jsonl"
        self.log_path = workdir / f"{name}.log"
        self.config_path = workdir / f"{name}.yaml"
        settings = {
            "receivers": {
                "otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}},
                "kafka": broker.kafka_settings([topic], group, **kafka),
            },
            "sampling": {"rate": 0.5},
            "evaluators": EVALUATORS,
            "exporters": {
                "prometheus": {"endpoint": f"127.0.0.1:{self.metrics_port}"},
                "results_file": str(self.results),
            },
            "pipeline": {"shutdown_timeout_s": 5},
        }
        self.config_path.write_text(yaml.safe_dump(settings))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "monitor", "run", "--config", str(self.config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )

    def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        try:
            text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).text
        except httpx.HTTPError:
            return {}
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return out

    def total(self, name: str) -> float:
        return sum(v for (n, _), v in self.scrape().items() if n == f"rag_monitor_{name}")

    def lag_partitions(self) -> set[str]:
        return {
            dict(labels)["partition"]
            for (n, labels) in self.scrape()
            if n == "rag_monitor_kafka_lag"
        }

    def result_ids(self) -> list[str]:
        if not self.results.exists():
            return []
        ids = []
        for line in self.results.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by kill -9
                ids.append(json.loads(line)["request_id"])
        return ids

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(sig)
        try:
            return process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait(timeout=10)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""


@contextlib.contextmanager
def replicas(*members: Replica) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for member in members:
            sys.stderr.write(f"--- {member.log_path.name} ---\n{member.logs()}\n")
        raise
    finally:
        for member in members:
            member.stop(signal.SIGKILL)


def sampled_ids(records: list[dict[str, Any]]) -> set[str]:
    cfg = Config.model_validate({"sampling": {"rate": 0.5}, "evaluators": EVALUATORS})
    sampler = Sampler(cfg.sampling, {e.name: e.sample_rate for e in cfg.evaluators})
    out = set()
    for raw in records:
        record = parse_record(raw)
        if any(sampler.decide(record).values()):
            out.add(record.request_id)
    return out


def sampled_evaluations(records: list[dict[str, Any]]) -> int:
    cfg = Config.model_validate({"sampling": {"rate": 0.5}, "evaluators": EVALUATORS})
    sampler = Sampler(cfg.sampling, {e.name: e.sample_rate for e in cfg.evaluators})
    return sum(sum(sampler.decide(parse_record(raw)).values()) for raw in records)


def test_two_replicas_split_a_four_partition_topic(noida: Broker, tmp_path: Path) -> None:
    topic = noida.create_topic(unique("split"), partitions=4)
    group = unique("g")
    a = Replica(noida, topic, group, tmp_path, "a")
    b = Replica(noida, topic, group, tmp_path, "b")
    with replicas(a, b):
        a.start()
        b.start()
        wait_for(
            lambda: (
                len(a.lag_partitions()) == 2
                and len(b.lag_partitions()) == 2
                and not a.lag_partitions() & b.lag_partitions()
            ),
            60,
            "both replicas to own two partitions each",
            interval_s=0.3,
        )
        records = [native(f"split-{i}", f"Question number {i}?") for i in range(400)]
        producer_batches = [records[i::4] for i in range(4)]
        for partition, batch in enumerate(producer_batches):
            noida.produce(topic, batch, partition=partition)
        wait_for(
            lambda: a.total("records_total") + b.total("records_total") >= len(records),
            60,
            "every record to reach a replica",
            interval_s=0.3,
        )
        assert a.total("records_total") > 0 and b.total("records_total") > 0
        expected = sampled_evaluations(records)
        assert 0 < expected < len(records) * len(EVALUATORS)
        assert a.total("evaluations_total") + b.total("evaluations_total") == expected
        assert a.total("records_total") + b.total("records_total") == len(records)
        assert a.stop() == 0 and b.stop() == 0
    assert set(a.result_ids()) | set(b.result_ids()) == sampled_ids(records)
    assert noida.committed(group, topic, 4) == {p: 100 for p in range(4)}


@pytest.mark.parametrize(
    ("kind", "membership"),
    [
        pytest.param(
            "noida",
            "static",
            marks=pytest.mark.skip(
                reason="noida-db sometimes never answers SyncGroup after a static member is "
                "replaced (generation 2 stalls; seen in about 1 of 3 full CI runs), a broker "
                "fault; the tansu cases below cover both memberships"
            ),
        ),
        ("tansu", "static"),
        ("tansu", "dynamic"),
    ],
    ids=["noida-static-membership", "tansu-static-membership", "tansu-session-expiry"],
)
def test_replica_killed_mid_stream_loses_nothing(
    kind: str, membership: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """kill -9 a replica while records are still arriving, then restart it. With static
    membership (group_instance_id, as a StatefulSet pod would use) the restarted replica
    rejoins under the dead one's identity; without it the broker must first expire the
    dead member's session. Either way every sampled record is evaluated at least once."""
    broker: Broker = request.getfixturevalue(kind)
    topic = broker.create_topic(unique("kill"), partitions=2)
    group = unique("g")
    extra: dict[str, Any] = {"max_poll_records": 50}
    if membership == "static":
        extra["group_instance_id"] = "replica-0"
    first = Replica(broker, topic, group, tmp_path, "first", **extra)
    second = Replica(broker, topic, group, tmp_path, "second", **extra)
    records = [native(f"kill-{i}", f"Question {i}?") for i in range(3000)]
    killed = threading.Event()

    def produce_slowly() -> None:
        # The second half is produced only after the kill, so the replica always dies
        # with records still arriving (whatever the machine's speed).
        half = len(records) // 2
        for start in range(0, len(records), 100):
            if start == half:
                killed.wait(timeout=120)
            broker.produce(topic, records[start : start + 100])
            time.sleep(0.05)

    with replicas(first, second):
        first.start()
        wait_for(lambda: len(first.lag_partitions()) == 2, 60, "first replica assigned")
        producer = threading.Thread(target=produce_slowly, daemon=True)
        producer.start()
        wait_for(lambda: len(first.result_ids()) >= 200, 60, "first results", interval_s=0.05)
        first.stop(signal.SIGKILL)
        killed.set()
        second.start()
        producer.join(timeout=120)
        expected = sampled_ids(records)
        wait_for(
            lambda: set(first.result_ids()) | set(second.result_ids()) >= expected,
            90,
            "every sampled record evaluated after the restart",
            interval_s=0.3,
        )
        assert second.stop() == 0
    seen = set(first.result_ids()) | set(second.result_ids())
    assert seen == expected, f"missing: {sorted(expected - seen)[:5]}"
    assert set(second.result_ids()) - set(first.result_ids()), "the restart had work left"
