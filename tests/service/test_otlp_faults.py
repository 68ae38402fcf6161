"""The OTLP path under faults, through a running `rag-monitor run` on loopback:

- SIGKILL and restart: what was written survives intact, what was only in memory (open
  traces, queued spans and records) is gone — exactly what the README documents — and the
  restarted monitor serves on the same ports;
- overload: spans arrive much faster than evaluation keeps up (one worker, a judge that
  takes 50 ms per call). Peak RSS (the kernel's VmHWM over the run) stays bounded; every
  refusal reaches the sender as a retryable status (HTTP 503 + Retry-After, gRPC
  UNAVAILABLE) and is counted by stage; everything accepted is evaluated; the monitor
  serves normally once the load stops.

The remote judge model is the only test double (`harness/judge_stub.py`, an
OpenAI-compatible HTTP server on 127.0.0.1:0), used to make evaluation slow on purpose.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from harness.judge_stub import Reply, StubJudge
from harness.reliability import (
    MonitorProcess,
    Trace,
    export_request,
    grpc_export,
    post,
    proc_memory_kb,
    reset_peak_rss,
    trace_ids,
)

pytestmark = pytest.mark.timeout(300)
LOCAL = [{"name": "local_groundedness"}, {"name": "local_relevance"}]


def _ids_in(mon: MonitorProcess) -> set[str]:
    return {line["trace_id"] for line in mon.results_lines()}


def test_sigkill_loses_only_what_was_in_memory_and_restart_serves(tmp_path: Path) -> None:
    config: dict[str, Any] = {"trace_assembly": {"idle_timeout_s": 600}, "evaluators": LOCAL}
    first = MonitorProcess(tmp_path, config).start()
    try:
        done = [Trace(t) for t in trace_ids(1, 5)]
        assert post(first.http_port, export_request(done)).status == 200
        want = {t.trace_id.hex() for t in done}
        first.wait_for(lambda: want <= _ids_in(first), what="5 evaluated traces")
        # Three traces whose root span has not arrived yet: held in memory by assembly.
        open_ = [Trace(t) for t in trace_ids(2, 3)]
        assert post(first.http_port, export_request(open_, parts="child")).status == 200
        first.wait_for(lambda: first.value("rag_monitor_open_traces") == 3, what="3 open traces")
    finally:
        first.kill()  # SIGKILL: no drain, no flush
    assert first.proc is not None and first.proc.returncode == -9

    # Every line written before the kill is a whole JSON line; none for the open traces.
    raw = first.results.read_text(encoding="utf-8")
    assert raw.endswith("\n")
    lines = [json.loads(x) for x in raw.splitlines()]
    assert {line["trace_id"] for line in lines} == want

    second = MonitorProcess(
        tmp_path,
        config,
        grpc_port=first.grpc_port,
        http_port=first.http_port,
        metrics_port=first.metrics_port,
    ).start()
    try:
        # The roots arrive after the restart: their retrieval spans died with the first
        # process, so the records are built without context and counted as incomplete.
        assert post(second.http_port, export_request(open_, parts="root")).status == 200
        late = {t.trace_id.hex() for t in open_}
        second.wait_for(lambda: late <= _ids_in(second), what="the late roots")
        assert second.value("rag_monitor_records_incomplete_total", missing="context") == 3
        for line in second.results_lines():
            if line["trace_id"] in late:
                assert set(line["results"]) == {"local_relevance"}  # groundedness needs context
        fresh = [Trace(t) for t in trace_ids(3, 4)]
        code, _ = grpc_export(second.grpc_port, export_request(fresh))
        assert code == grpc.StatusCode.OK
        new = {t.trace_id.hex() for t in fresh}
        second.wait_for(lambda: new <= _ids_in(second), what="traces after the restart")
        # Counters start again from zero: Prometheus sees a counter reset, not a drop.
        assert second.value("rag_monitor_spans_received_total") == 3 + 8
    finally:
        assert second.stop() == 0, second.log()
    assert len(second.results_lines()) == 5 + 3 + 4


TRACES_PER_REQUEST = 50
DOC = "Water boils at 100 degrees Celsius at sea level, and at lower temperatures higher up. " * 8


def _flood_http(port: int, prefix: int, seconds: float, out: dict[str, Any]) -> None:
    stop = time.monotonic() + seconds
    n = 0
    while time.monotonic() < stop:
        traces = [
            Trace(t, context=(DOC, DOC)) for t in trace_ids(prefix * 10_000 + n, TRACES_PER_REQUEST)
        ]
        body = export_request(traces)
        n += 1
        reply = post(port, body)
        out["bytes"] += len(body)
        if reply.status == 200:
            out["accepted"].extend(t.trace_id.hex() for t in traces)
        else:
            assert reply.status == 503, reply
            assert reply.headers["Retry-After"].isdigit()
            out["refused"] += 1


def _flood_grpc(port: int, seconds: float, out: dict[str, Any]) -> None:
    stop = time.monotonic() + seconds
    n = 0
    while time.monotonic() < stop:
        traces = [Trace(t, context=(DOC, DOC)) for t in trace_ids(90_000 + n, TRACES_PER_REQUEST)]
        body = export_request(traces)
        n += 1
        code, _ = grpc_export(port, body)
        out["bytes"] += len(body)
        if code == grpc.StatusCode.OK:
            out["accepted"].extend(t.trace_id.hex() for t in traces)
        else:
            assert code == grpc.StatusCode.UNAVAILABLE, code
            out["refused"] += 1


@pytest.mark.asyncio
async def test_overload_is_bounded_refused_retryably_counted_and_recovers(tmp_path: Path) -> None:
    async with StubJudge(default=Reply(content="Score: 5", delay=0.05)) as stub:
        config: dict[str, Any] = {
            "judge": {"model": "openai/judge-stub", "api_base": stub.openai_base, "cache_size": 0},
            # Traces go on as soon as whole (no wait for late spans): the flood fills the
            # evaluation queue while it lasts.
            "trace_assembly": {"idle_timeout_s": 30, "late_spans_wait_s": 0},
            "pipeline": {"workers": 1, "queue_size": 10},
            "evaluators": [*LOCAL, {"name": "groundedness"}],
        }
        mon = MonitorProcess(tmp_path, config)
        await asyncio.to_thread(mon.start)
        try:
            # Warm up (litellm is imported on the first judge call), then take the baseline.
            warm = [Trace(t) for t in trace_ids(7, 1)]
            assert (
                await asyncio.to_thread(post, mon.http_port, export_request(warm))
            ).status == 200
            await asyncio.to_thread(
                mon.wait_for, lambda: len(mon.results_lines()) == 1, 90, "the warm-up record"
            )
            # The kernel keeps the peak (VmHWM) from here on; no sampling can miss it.
            reset_peak_rss(mon.pid)
            baseline = proc_memory_kb(mon.pid)["VmHWM"]
            http: dict[str, Any] = {"accepted": [], "refused": 0, "bytes": 0}
            rpc: dict[str, Any] = {"accepted": [], "refused": 0, "bytes": 0}
            senders = [
                asyncio.to_thread(_flood_http, mon.http_port, k, 6.0, http) for k in (1, 2, 3)
            ]
            senders.append(asyncio.to_thread(_flood_grpc, mon.grpc_port, 6.0, rpc))
            await asyncio.gather(*senders)
            during = await asyncio.to_thread(mon.samples)

            # Senders were told to retry, and every refusal was counted at its stage.
            assert http["refused"] > 0 and rpc["refused"] > 0, (http["refused"], rpc["refused"])
            refused = http["refused"] + rpc["refused"]
            dropped = sum(
                v
                for (name, labels), v in during.items()
                if name == "rag_monitor_dropped_total" and dict(labels)["stage"] == "assemble"
            )
            assert dropped == refused
            accepted = set(http["accepted"]) | set(rpc["accepted"])
            assert during[("rag_monitor_spans_received_total", (("receiver", "otlp_http"),))] == (
                2 * len(http["accepted"]) + 2
            )

            # Recovery: the backlog drains, everything accepted is evaluated, and a new
            # request is accepted at once.
            def drained() -> bool:
                return accepted <= _ids_in(mon)

            await asyncio.to_thread(mon.wait_for, drained, 180, "the accepted backlog")
            peak = proc_memory_kb(mon.pid)["VmHWM"]
            after = [Trace(t) for t in trace_ids(8, 3)]
            reply = await asyncio.to_thread(post, mon.http_port, export_request(after))
            assert reply.status == 200
            new = {t.trace_id.hex() for t in after}
            await asyncio.to_thread(mon.wait_for, lambda: new <= _ids_in(mon), 30, "new traces")
            assert mon.value("rag_monitor_queue_depth", stage="evaluate") == 0
        finally:
            code = await asyncio.to_thread(mon.stop)
        assert code == 0, mon.log()
        offered_mb = (http["bytes"] + rpc["bytes"]) / 1e6
        print(
            f"overload: offered {offered_mb:.0f} MB in {refused + len(accepted) // TRACES_PER_REQUEST}"
            f" requests, {refused} refused, {len(accepted)} traces accepted; RSS baseline"
            f" {baseline / 1024:.0f} MB, peak {peak / 1024:.0f} MB"
        )
        # Memory is bounded by the queues (200 spans, 10 records), not by the offered load.
        assert peak - baseline < 64 * 1024, (baseline, peak, offered_mb)
