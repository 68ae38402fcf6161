"""Records carry who sent them (`monitor.records.sender`): a running monitor fed by the
OpenTelemetry SDK's own OTLP exporters, over HTTP and gRPC, from two instances of one
service; `/debug/records` shows each record's sender, the client's address and its
resource's `service.instance.id`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from harness.reliability import MonitorProcess
from monitor.receivers.otlp._wire import peer_address

DOCS = json.dumps([{"content": "Water boils at 100 degrees Celsius.", "doc_uri": "kb/0"}])


def _send(exporter: SpanExporter, instance: str | None, query: str) -> None:
    attributes = {"service.name": "shop"}
    if instance is not None:
        attributes["service.instance.id"] = instance
    # `Resource.create` would add an instance id of its own.
    provider = TracerProvider(resource=Resource(attributes))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    answer = {"rag.query": query, "rag.response": "At 100 degrees Celsius."}
    with tracer.start_as_current_span("handle_question", attributes=answer):
        with tracer.start_as_current_span("search", attributes={"rag.context": DOCS}):
            pass
    provider.shutdown()


@pytest.mark.e2e
def test_debug_records_show_each_records_sender(tmp_path: Path) -> None:
    config = {
        "exporters": {"prometheus": {"debug_records": 10}},
        "trace_assembly": {"late_spans_wait_s": 0},
    }
    monitor = MonitorProcess(tmp_path, config).start()
    try:
        http = HttpSpanExporter(endpoint=f"http://127.0.0.1:{monitor.http_port}/v1/traces")
        grpc = GrpcSpanExporter(endpoint=f"127.0.0.1:{monitor.grpc_port}", insecure=True)
        _send(http, "pod-1", "Over HTTP, when does water boil?")
        _send(grpc, "pod-2", "Over gRPC, when does water boil?")
        _send(
            HttpSpanExporter(endpoint=f"http://127.0.0.1:{monitor.http_port}/v1/traces"),
            None,
            "Without an instance, when does water boil?",
        )

        def shown() -> dict[str, str | None]:
            page = json.loads(monitor.get("/debug/records"))
            return {entry["query"]: entry["sender"] for entry in page["extracted"]}

        monitor.wait_for(lambda: len(shown()) == 3, what="the three records on the page")
        # Each key ends in its resource's digest (`~` and 12 hex digits): the SDK's own
        # attributes, so the three resources differ by their instance ids only.
        senders = {query: (who or "").rpartition("~") for query, who in shown().items()}
        assert {query: head for query, (head, _, _) in senders.items()} == {
            "Over HTTP, when does water boil?": "127.0.0.1/pod-1",
            "Over gRPC, when does water boil?": "127.0.0.1/pod-2",
            "Without an instance, when does water boil?": "127.0.0.1/",
        }
        assert all(len(digest) == 12 and int(digest, 16) >= 0 for _, _, digest in senders.values())
    finally:
        monitor.kill()


def test_a_grpc_peer_is_its_address_without_the_port() -> None:
    assert peer_address("ipv4:10.0.0.7:53124") == "10.0.0.7"
    assert peer_address("ipv6:[::1]:53124") == "::1"
    assert peer_address("unix:/run/otel.sock") == "unix:/run/otel.sock"
    assert peer_address("") is None
