"""OTLP/gRPC and OTLP/HTTP receivers, in process, fed by the real OpenTelemetry SDK
exporters over real sockets, into the real trace stage. The evaluation stage is replaced
by a recorder with the stage's `put_many` signature so the exact records can be checked;
the full process (CLI, metrics, results file) is covered by test_otlp_e2e.py."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
import httpx
import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from harness.otlp import CONVENTIONS, WATER, capture, otlp_bytes
from harness.pipeline import RecordingStage, Served, receiver_config, started, trace_stage
from harness.pipeline import metric_value as _value
from monitor.config import Config
from monitor.processors.sampler import Sampler
from monitor.receivers.otlp import OtlpReceivers
from monitor.receivers.otlp import _wire as wire
from monitor.receivers.otlp._wire import decode
from monitor.spans import RequestSpans
from monitor.telemetry import Telemetry, create_telemetry

T = TypeVar("T")


def _config(**options: Any) -> Config:
    """`receiver_config` releasing a whole trace as its root ends: every trace here sends
    its spans before or with its root (the late-span wait is tested in test_late_spans.py)."""
    return receiver_config(late_spans_wait_s=0, **options)


async def _started(config: Config, stage: RecordingStage, telemetry: Telemetry) -> Served:
    return await started(config, stage, telemetry)


@pytest.fixture
async def served(telemetry: Telemetry) -> AsyncIterator[tuple[Served, RecordingStage]]:
    stage = RecordingStage()
    receivers = await _started(_config(), stage, telemetry)
    try:
        yield receivers, stage
    finally:
        await receivers.shutdown(5)


def _exporter(receivers: Served, protocol: str) -> SpanExporter:
    if protocol == "grpc":
        assert receivers.grpc is not None
        return GrpcExporter(endpoint=f"127.0.0.1:{receivers.grpc.port}", insecure=True)
    assert receivers.http is not None
    url = f"http://127.0.0.1:{receivers.http.port}/v1/traces"
    compression = Compression.Gzip if protocol == "http_gzip" else Compression.NoCompression
    return HttpExporter(endpoint=url, compression=compression)


def _send(exporter: SpanExporter, convention: str) -> str:
    """Emit one trace with the SDK; the retrieval span is flushed in its own batch."""
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    try:
        trace_id = CONVENTIONS[convention](provider.get_tracer("app"), WATER, provider.force_flush)
        assert provider.force_flush()
    finally:
        provider.shutdown()
    return trace_id


@pytest.mark.parametrize("protocol", ["grpc", "http", "http_gzip"])
@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
async def test_sdk_exporters_deliver_one_complete_record(
    served: tuple[Served, RecordingStage],
    telemetry: Telemetry,
    protocol: str,
    convention: str,
) -> None:
    receivers, stage = served
    trace_id = await asyncio.to_thread(_send, _exporter(receivers, protocol), convention)
    ((source, record),) = await stage.wait_for(trace_id)
    assert source == ("otlp_grpc" if protocol == "grpc" else "otlp_http")
    assert record.query == WATER.query
    assert record.response == WATER.answer
    # With ids only, the documents are split out of the system prompt.
    assert [d.content for d in record.retrieved_context] == WATER.contents
    assert (record.service, record.route) == ("rag-api", "/ask")
    # Released because the root ended, well before the 30 s idle timeout.
    assert _value(telemetry, "traces_assembled_total", trigger="root_ended") == 1
    assert _value(telemetry, "spans_received_total", receiver=source) >= 2


def _post(port: int | None, body: bytes, headers: dict[str, str]) -> httpx.Response:
    assert port is not None, "the receiver is not serving"
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/traces", content=body, headers=headers, timeout=10
    )


PROTO = {"Content-Type": "application/x-protobuf"}


def _json_body(spans_bytes: bytes, *, hex_ids: bool = True) -> bytes:
    """OTLP/JSON for the same request (ids hex, as the spec requires, unless told not to)."""
    data = MessageToDict(ExportTraceServiceRequest.FromString(spans_bytes))
    if hex_ids:
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(data).encode()


async def test_otlp_json_body_is_accepted(
    served: tuple[Served, RecordingStage], telemetry: Telemetry
) -> None:
    receivers, stage = served
    assert receivers.http is not None
    trace_id, spans = capture(CONVENTIONS["openinference"], WATER)
    body = _json_body(otlp_bytes(spans))
    response = await asyncio.to_thread(
        _post, receivers.http.port, body, {"Content-Type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json() == {}
    ((_, record),) = await stage.wait_for(trace_id)
    assert record.query == WATER.query
    assert [d.content for d in record.retrieved_context] == WATER.contents


async def test_bad_http_input_gets_status_and_counted_reason(telemetry: Telemetry) -> None:
    stage = RecordingStage()
    receivers = await _started(
        _config(max_request_bytes=64 * 1024, auth_token="s3cret"), stage, telemetry
    )
    try:
        assert receivers.http is not None
        port = receivers.http.port
        assert port is not None
        auth = {"Authorization": "Bearer s3cret"}
        _, spans = capture(CONVENTIONS["genai"], WATER)
        good = otlp_bytes(spans)

        async def post(body: bytes, headers: dict[str, str]) -> httpx.Response:
            return await asyncio.to_thread(_post, port, body, headers)

        cases: list[tuple[bytes, dict[str, str], int, str]] = [
            (b"\x0a\xff\xff\xff\x0fnot-protobuf", {**PROTO, **auth}, 400, "bad_protobuf"),
            (
                gzip.compress(good)[:-20],
                {**PROTO, **auth, "Content-Encoding": "gzip"},
                400,
                "bad_gzip",
            ),
            (
                _json_body(good, hex_ids=False),
                {"Content-Type": "application/json", **auth},
                400,
                "bad_ids",
            ),
            (b"\x00" * (64 * 1024 + 1), {**PROTO, **auth}, 413, "too_large"),
            # A gzip bomb: 65 KiB of zeros inflates past the cap; stopped while inflating.
            (
                gzip.compress(b"\x00" * (1 << 20)),
                {**PROTO, **auth, "Content-Encoding": "gzip"},
                413,
                "too_large",
            ),
            (good, {**PROTO, "Authorization": "Bearer wrong"}, 401, "unauthorized"),
            (good, PROTO, 401, "unauthorized"),
            (good, {"Content-Type": "text/plain", **auth}, 415, "unsupported_media_type"),
            (good, {**PROTO, **auth, "Content-Encoding": "br"}, 415, "unsupported_encoding"),
        ]
        for body, headers, status, reason in cases:
            before = _value(
                telemetry, "records_rejected_total", receiver="otlp_http", reason=reason
            )
            response = await post(body, headers)
            assert response.status_code == status, (reason, response.text)
            after = _value(telemetry, "records_rejected_total", receiver="otlp_http", reason=reason)
            assert after == before + 1, reason
        bad_ids = await post(
            _json_body(good, hex_ids=False), {"Content-Type": "application/json", **auth}
        )
        assert "traceId" in bad_ids.json()["message"] and "hex" in bad_ids.json()["message"]
        assert (await post(good, PROTO)).headers["WWW-Authenticate"] == "Bearer"
        # Still serving: a good request goes through, in protobuf and gzip.
        ok = await post(good, {**PROTO, **auth})
        assert ok.status_code == 200
        assert ExportTraceServiceResponse.FromString(ok.content).partial_success.rejected_spans == 0
        ok = await post(gzip.compress(good), {**PROTO, **auth, "Content-Encoding": "gzip"})
        assert ok.status_code == 200
    finally:
        await receivers.shutdown(5)


async def test_spans_with_bad_ids_are_a_partial_success(
    served: tuple[Served, RecordingStage], telemetry: Telemetry
) -> None:
    receivers, _ = served
    assert receivers.http is not None
    _, spans = capture(CONVENTIONS["genai"], WATER)
    request = ExportTraceServiceRequest.FromString(otlp_bytes(spans))
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02"
    response = await asyncio.to_thread(
        _post, receivers.http.port, request.SerializeToString(), PROTO
    )
    assert response.status_code == 200
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert partial.rejected_spans == 1
    assert "span_id" in partial.error_message
    assert (
        _value(telemetry, "records_rejected_total", receiver="otlp_http", reason="invalid_span")
        == 1
    )


def _grpc_call(
    port: int, body: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> tuple[grpc.StatusCode, bytes]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        )
        try:
            return grpc.StatusCode.OK, export(body, metadata=metadata, timeout=10)
        except grpc.RpcError as exc:
            return exc.code(), b""


async def test_bad_grpc_input_gets_status_and_counted_reason(telemetry: Telemetry) -> None:
    stage = RecordingStage()
    receivers = await _started(
        _config(max_request_bytes=64 * 1024, auth_token="s3cret"), stage, telemetry
    )
    try:
        assert receivers.grpc is not None
        port = receivers.grpc.port
        assert port is not None
        auth = (("authorization", "Bearer s3cret"),)
        _, spans = capture(CONVENTIONS["genai"], WATER)
        good = otlp_bytes(spans)
        cases = [
            (
                b"\x0a\xff\xff\xff\x0fnot-protobuf",
                auth,
                grpc.StatusCode.INVALID_ARGUMENT,
                "bad_protobuf",
            ),
            (
                good,
                (("authorization", "Bearer nope"),),
                grpc.StatusCode.UNAUTHENTICATED,
                "unauthorized",
            ),
            (good, (), grpc.StatusCode.UNAUTHENTICATED, "unauthorized"),
        ]
        for body, metadata, code, reason in cases:
            before = _value(
                telemetry, "records_rejected_total", receiver="otlp_grpc", reason=reason
            )
            got, _ = await asyncio.to_thread(_grpc_call, port, body, metadata)
            assert got == code, reason
            assert (
                _value(telemetry, "records_rejected_total", receiver="otlp_grpc", reason=reason)
                == before + 1
            )
        # Over max_request_bytes: gRPC itself refuses the message.
        got, _ = await asyncio.to_thread(_grpc_call, port, b"\x00" * (64 * 1024 + 1), auth)
        assert got == grpc.StatusCode.RESOURCE_EXHAUSTED
        got, raw = await asyncio.to_thread(_grpc_call, port, good, auth)
        assert got == grpc.StatusCode.OK
        assert ExportTraceServiceResponse.FromString(raw).partial_success.rejected_spans == 0
    finally:
        await receivers.shutdown(5)


async def test_full_span_queue_answers_retryable_and_counts(telemetry: Telemetry) -> None:
    stage = RecordingStage(capacity=4)
    stage.hold()  # evaluation is stuck: it holds what it takes until it is full
    # Each trace goes on as soon as whole (no wait for late spans), to fill the queue.
    receivers = await _started(_config(), stage, telemetry)
    assert not receivers.trace.refuses()
    try:
        assert receivers.http is not None and receivers.grpc is not None
        http_port, grpc_port = receivers.http.port, receivers.grpc.port
        assert http_port is not None and grpc_port is not None
        statuses = []
        for _ in range(12):
            _, spans = capture(CONVENTIONS["genai"], WATER)
            response = await asyncio.to_thread(_post, http_port, otlp_bytes(spans), PROTO)
            statuses.append(response.status_code)
            if response.status_code == 503:
                assert response.headers["Retry-After"].isdigit()
                break
        assert statuses[-1] == 503, statuses
        _, spans = capture(CONVENTIONS["genai"], WATER)
        code, _ = await asyncio.to_thread(_grpc_call, grpc_port, otlp_bytes(spans))
        assert code == grpc.StatusCode.UNAVAILABLE
        assert _value(telemetry, "dropped_total", stage="assemble", reason="queue_full") >= 2
        stage.release()  # pressure released: everything accepted is delivered
        accepted = statuses.count(200)
        await stage.wait_until(lambda: len(stage.records) >= accepted)
        response = await asyncio.to_thread(_post, http_port, otlp_bytes(spans), PROTO)
        assert response.status_code == 200
    finally:
        await receivers.shutdown(5)


async def test_shutdown_releases_open_traces_and_is_idempotent(telemetry: Telemetry) -> None:
    stage = RecordingStage()
    receivers = await _started(_config(), stage, telemetry)
    assert receivers.http is not None
    trace_id, spans = capture(CONVENTIONS["openinference"], WATER)
    without_root = [s for s in spans if s.parent is not None]
    response = await asyncio.to_thread(_post, receivers.http.port, otlp_bytes(without_root), PROTO)
    assert response.status_code == 200
    await receivers.shutdown(5)
    await receivers.shutdown(5)
    ((_, record),) = [(s, r) for s, r in stage.records if r.trace_id == trace_id]
    assert record.response == WATER.answer  # the LLM span was there; the root never came
    assert _value(telemetry, "traces_assembled_total", trigger="shutdown") == 1
    fresh = Served(_config(), stage, create_telemetry())
    await fresh.receivers.shutdown(5)  # safe without start
    await fresh.trace.shutdown(5)


async def test_trace_without_root_is_released_after_idle_timeout(telemetry: Telemetry) -> None:
    stage = RecordingStage()
    # No wait past the idle timeout for the lost root (tests/trace/test_open_calls.py).
    config = _config(idle_timeout_s=0.3, missing_parent_wait_s=0)
    receivers = await _started(config, stage, telemetry)
    try:
        assert receivers.http is not None
        trace_id, spans = capture(CONVENTIONS["genai"], WATER)
        children = [s for s in spans if s.parent is not None]  # the root span is lost
        response = await asyncio.to_thread(_post, receivers.http.port, otlp_bytes(children), PROTO)
        assert response.status_code == 200
        ((_, record),) = await stage.wait_for(trace_id)
        assert record.response == WATER.answer
        assert [d.content for d in record.retrieved_context] == WATER.contents
        assert _value(telemetry, "traces_assembled_total", trigger="idle_timeout") == 1
        assert _value(telemetry, "open_traces") == 0
    finally:
        await receivers.shutdown(5)


async def test_full_assembler_evicts_and_counts(telemetry: Telemetry) -> None:
    stage = RecordingStage()
    receivers = await _started(_config(max_open_traces=1), stage, telemetry)
    try:
        assert receivers.http is not None
        first, spans = capture(CONVENTIONS["genai"], WATER)
        body = otlp_bytes([s for s in spans if s.parent is not None])
        assert (await asyncio.to_thread(_post, receivers.http.port, body, PROTO)).status_code == 200
        second, spans = capture(CONVENTIONS["genai"], WATER)
        body = otlp_bytes([s for s in spans if s.parent is not None])
        assert (await asyncio.to_thread(_post, receivers.http.port, body, PROTO)).status_code == 200
        ((_, record),) = await stage.wait_for(first)  # pushed out early by the second trace
        assert record.response == WATER.answer
        assert _value(telemetry, "traces_assembled_total", trigger="evicted") == 1
        assert not [r for _, r in stage.records if r.trace_id == second]
    finally:
        await receivers.shutdown(5)


async def test_receivers_and_trace_stage_shut_down_by_deadline_idempotently(
    telemetry: Telemetry,
) -> None:
    """The lifecycle: `shutdown(deadline_s)` is safe before `start`, stops what started,
    and a second call does nothing."""
    config = _config()
    stage = trace_stage(config, RecordingStage(), telemetry)
    receivers = OtlpReceivers(config, stage, telemetry)
    await receivers.shutdown(1.0)  # never started
    await stage.shutdown(1.0)
    assert stage.abandoned == 0

    stage = trace_stage(config, RecordingStage(), telemetry)
    receivers = OtlpReceivers(config, stage, telemetry)
    await stage.start()
    await receivers.start()
    assert receivers.http is not None and receivers.http.port
    port = receivers.http.port
    await receivers.shutdown(1.0)
    await receivers.shutdown(1.0)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.post(f"http://127.0.0.1:{port}/v1/traces", content=b"")
    await stage.shutdown(1.0)
    await stage.shutdown(1.0)
    assert not stage.accepting and stage.abandoned == 0


@pytest.mark.parametrize("rate", [1.0, 0.999])  # every span built / only the kept traces'
async def test_a_chunked_body_is_read_whole(rate: float, telemetry: Telemetry) -> None:
    stage = RecordingStage()
    config = _config().model_copy(
        update={"sampling": _config().sampling.model_copy(update={"rate": rate})}
    )
    receivers = await _started(config, stage, telemetry)
    try:
        assert receivers.http is not None
        sampler = Sampler(config.sampling, {e.name: e.sample_rate for e in config.evaluators})
        trace_id, spans = capture(CONVENTIONS["openinference"], WATER)
        while not sampler.may_sample(trace_id):  # one in a thousand at 0.999
            trace_id, spans = capture(CONVENTIONS["openinference"], WATER)
        body = otlp_bytes(spans)
        pieces = [body[i : i + 7] for i in range(0, len(body), 7)]  # Transfer-Encoding: chunked
        response = await asyncio.to_thread(_post_chunks, receivers.http.port, pieces, PROTO)
        assert response.status_code == 200
        ((_, record),) = await stage.wait_for(trace_id)
        assert [d.content for d in record.retrieved_context] == WATER.contents
    finally:
        await receivers.shutdown(5)


def _post_chunks(port: int | None, pieces: list[bytes], headers: dict[str, str]) -> httpx.Response:
    assert port is not None, "the receiver is not serving"
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/traces", content=iter(pieces), headers=headers, timeout=10
    )


async def test_a_small_protobuf_body_is_read_on_the_loop_and_any_other_in_the_decode_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offloaded: list[bool] = []

    async def offload(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        offloaded.append(True)
        return fn(*args, **kwargs)

    _, spans = capture(CONVENTIONS["genai"], WATER)
    body = otlp_bytes(spans)
    cases = [
        (body, {}, False),
        (gzip.compress(body), {"gzip": True}, True),
        (_json_body(body), {"as_json": True}, True),
    ]
    for data, how, in_thread in cases:
        offloaded.clear()
        gzip_on, as_json = how.get("gzip", False), how.get("as_json", False)
        request = await decode(
            offload, data, gzip=gzip_on, as_json=as_json, limit=1 << 20, logs=False
        )
        assert offloaded == ([True] if in_thread else []), how
        assert len(request.build().spans if isinstance(request, RequestSpans) else request.spans)
    monkeypatch.setattr(wire, "LOOP_READ_BYTES", len(body) - 1)
    offloaded.clear()
    await decode(offload, body, gzip=False, as_json=False, limit=1 << 20, logs=False)
    assert offloaded == [True]  # larger than a loop read
