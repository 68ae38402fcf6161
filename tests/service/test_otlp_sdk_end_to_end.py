"""End to end: the real OpenTelemetry SDK exporters (and the rotel collector) send RAG
traces to a running `rag-monitor run` process; the evaluations must show up in
`/metrics` and in the results file, computed on the right query, context documents (in
retrieval order) and response.

The results line carries scores, not the record, so the record is checked through the
local evaluators, which are deterministic: `local_retrieval`'s explanation lists a score
per context document in order (it depends on the query and every document), and
`local_relevance`'s score depends on the query and the response. The test computes the
expected values with the same scoring functions on the expected record.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from prometheus_client.parser import text_string_to_metric_families

from harness.otlp import CONVENTIONS, WATER
from harness.reliability import results_lines
from harness.servers import Rotel, rag_monitor, start_rotel, stop_process
from harness.wait import wait_until
from monitor.detector import score_relevance, score_retrieval

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Monitor:
    grpc_port: int
    http_port: int
    metrics_port: int
    results: Path

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            text = r.read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def line_for(self, trace_id: str, timeout: float = 30.0) -> dict[str, object]:
        def found() -> dict[str, object] | None:
            for line in results_lines(self.results, writing=True):
                if line["trace_id"] == trace_id:
                    return line
            return None

        line = wait_until(found, timeout, f"a results line for trace {trace_id}")
        assert line is not None
        return line


@pytest.fixture(scope="module")
def monitor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Monitor]:
    tmp = tmp_path_factory.mktemp("monitor")
    results = tmp / "results.jsonl"
    config = tmp / "config.yaml"
    config.write_text(
        "receivers:\n  otlp:\n"
        "    grpc: {endpoint: '127.0.0.1:0'}\n"
        "    http: {endpoint: '127.0.0.1:0'}\n"
        # Long idle timeout: a record that shows up quickly was released by its root span;
        # no wait for late spans: each trace's spans come before or with its root's.
        "trace_assembly: {idle_timeout_s: 60, late_spans_wait_s: 0}\n"
        "exporters:\n  prometheus: {endpoint: '127.0.0.1:0'}\n"
        f"  results_file: '{results}'\n  include_explanations: true\n"
    )
    with rag_monitor(tmp, config) as ports:
        assert ports.grpc is not None and ports.http is not None
        yield Monitor(ports.grpc, ports.http, ports.metrics, results)


def _send(exporter: SpanExporter, convention: str, service: str = "rag-api") -> str:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    try:
        # The retrieval span is flushed alone; the LLM and root spans follow in a later batch.
        trace_id = CONVENTIONS[convention](provider.get_tracer("app"), WATER, provider.force_flush)
        assert provider.force_flush()
    finally:
        provider.shutdown()
    return trace_id


def _check_line(
    line: dict[str, object], convention: str, trace_id: str, service: str = "rag-api"
) -> None:
    assert line["request_id"] == trace_id
    assert (line["service"], line["route"]) == (service, "/ask")
    results = line["results"]
    assert isinstance(results, dict)
    # Every local evaluator ran: none was skipped for a missing query, context or response.
    assert set(results) == {
        "local_groundedness",
        "local_relevance",
        "local_retrieval",
        "local_safety",
    }
    # With ids only, the documents are split out of the system prompt: the same documents.
    retrieval = score_retrieval(WATER.query, WATER.contents)
    per_doc = ", ".join(f"#{i + 1}={v:.2f}" for i, v in enumerate(retrieval.per_document))
    assert results["local_retrieval"]["explanation"] == (
        f"best rank {retrieval.best_rank}; per document: {per_doc}"
    )
    assert results["local_relevance"]["score"] == round(
        score_relevance(WATER.query, WATER.answer), 4
    )


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_sdk_to_running_monitor(monitor: Monitor, convention: str, protocol: str) -> None:
    if protocol == "grpc":
        exporter: SpanExporter = GrpcExporter(
            endpoint=f"127.0.0.1:{monitor.grpc_port}", insecure=True
        )
    else:
        exporter = HttpExporter(endpoint=f"http://127.0.0.1:{monitor.http_port}/v1/traces")
    trace_id = _send(exporter, convention)
    _check_line(monitor.line_for(trace_id), convention, trace_id)
    metrics = monitor.metrics()
    receiver = "otlp_grpc" if protocol == "grpc" else "otlp_http"
    assert metrics[("rag_monitor_spans_received_total", (("receiver", receiver),))] >= 2
    assert (
        metrics[("rag_monitor_records_total", (("service", "rag-api"), ("source", receiver)))] >= 1
    )
    passed_or_failed = sum(
        v
        for (name, labels), v in metrics.items()
        if name == "rag_monitor_evaluations_total" and ("evaluator", "local_retrieval") in labels
    )
    assert passed_or_failed >= 1
    assert (
        metrics.get(("rag_monitor_traces_assembled_total", (("trigger", "idle_timeout"),)), 0) == 0
    )


def _rotel(monitor: Monitor, protocol: str, tmp: Path) -> tuple[Rotel, Path]:
    target = (
        f"http://127.0.0.1:{monitor.http_port}"
        if protocol == "http"
        else f"http://127.0.0.1:{monitor.grpc_port}"
    )
    log = tmp / f"rotel-{protocol}.log"
    rotel = start_rotel(
        [
            "--exporter", "otlp",
            "--otlp-exporter-endpoint", target,
            "--otlp-exporter-protocol", protocol,
            "--otlp-exporter-compression", "gzip",
            "--batch-timeout", "100ms",
            "--pid-file", str(tmp / f"rotel-{protocol}.pid"),
        ],
        log,
    )  # fmt: skip
    return rotel, log


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_through_rotel_collector(monitor: Monitor, protocol: str, tmp_path: Path) -> None:
    """SDK → rotel (OTLP/gRPC in) → monitor over OTLP/HTTP+gzip or OTLP/gRPC+gzip."""
    rotel, log = _rotel(monitor, protocol, tmp_path)
    try:
        service = f"via-rotel-{protocol}"
        exporter = GrpcExporter(endpoint=f"127.0.0.1:{rotel.grpc_port}", insecure=True)
        trace_id = _send(exporter, "openllmetry", service=service)
        try:
            line = monitor.line_for(trace_id)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nrotel log:\n{log.read_text()}") from None
        _check_line(line, "openllmetry", trace_id, service=service)
    finally:
        stop_process(rotel.process, 10)
