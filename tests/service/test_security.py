"""Security review, as tests against a running `rag-monitor run` on loopback:

- the OTLP bearer token is checked with `hmac.compare_digest` (constant time), and wrong,
  missing, truncated or wrongly-schemed tokens are refused on HTTP (401) and gRPC
  (UNAUTHENTICATED) and counted;
- no secret — the judge API key (from `judge.api_key_env`), the OTLP auth token, the
  Kafka SASL password — appears in the process's stderr, /metrics (text and OpenMetrics),
  /readyz, /healthz, the results file (including judge error messages) or
  `check-config` output, even when the judge provider echoes the key in its errors;
- /metrics exposes no record text (query, context, response);
- a gzip bomb (a few MB that inflate to 2 GiB) is refused with 413 and the monitor's peak
  RSS barely moves;
- 1,000 distinct services and routes from untrusted span attributes create at most
  `pipeline.max_services` / `max_routes` label values (plus `other`).

The remote judge model is the only test double (`harness/judge_stub.py`, an
OpenAI-compatible HTTP server on 127.0.0.1:0); the Kafka bootstrap server is a closed
loopback port, so the SASL settings are exercised through the client's connect-retry path.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from harness.judge_stub import Reply, StubJudge
from harness.reliability import (
    PROTO,
    REPO,
    MonitorProcess,
    Trace,
    export_request,
    grpc_export,
    post,
    proc_memory_kb,
    reset_peak_rss,
    trace_ids,
)
from monitor.receivers.otlp import _wire as wire
from monitor.receivers.otlp._wire import token_ok

pytestmark = [
    pytest.mark.timeout(240),
    # kafka-python 3.0 drops the socket of a failed connection attempt without closing it.
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]

TOKEN = "otlp-token-3b9d51c7e2a84f60"
JUDGE_KEY = "sk-judge-secret-0c8e44a1f7b2"
KAFKA_PASSWORD = "kafka-sasl-pw-91d3e6b2a5f0"
SECRETS = (TOKEN, JUDGE_KEY, KAFKA_PASSWORD)
SECRET_ENV = {
    "SECURITY_TEST_OTLP_TOKEN": TOKEN,
    "SECURITY_TEST_JUDGE_KEY": JUDGE_KEY,
    "SECURITY_TEST_KAFKA_PASSWORD": KAFKA_PASSWORD,
}
QUERY = "Zanzibarquux question about the Plovdivian aqueduct?"
DOC = "Zanzibarquux context: the Plovdivian aqueduct carried 42 barrels a day."
ANSWER = "Zanzibarquux answer: it carried 42 barrels."
RECORD_TEXT = ("Zanzibarquux", "Plovdivian", "aqueduct", "42 barrels")


def test_token_check_uses_constant_time_comparison() -> None:
    source = inspect.getsource(wire.token_ok)
    assert "hmac.compare_digest(" in source
    assert "==" not in source.split('"""')[-1].replace("is None", "")
    assert token_ok(f"Bearer {TOKEN}", TOKEN)
    assert token_ok(f"bearer   {TOKEN} ", TOKEN)
    for presented in (
        None,
        "",
        "Bearer",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        f"Basic {TOKEN}",
        TOKEN,
        f"Bearer {TOKEN.upper()}",
    ):
        assert not token_ok(presented, TOKEN), presented
    assert token_ok(None, None)  # no token configured: open


def _config(stub: StubJudge, kafka_port: int) -> dict[str, Any]:
    return {
        "receivers": {
            "otlp": {"auth_token_env": "SECURITY_TEST_OTLP_TOKEN"},
            "kafka": {
                "enabled": True,
                "bootstrap_servers": [f"127.0.0.1:{kafka_port}"],
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "sasl_username": "monitor",
                "sasl_password_env": "SECURITY_TEST_KAFKA_PASSWORD",
            },
        },
        "judge": {
            "model": "openai/judge-stub",
            "api_base": stub.openai_base,
            "api_key_env": "SECURITY_TEST_JUDGE_KEY",
            "retries": 1,
            "timeout_s": 5,
        },
        "trace_assembly": {"idle_timeout_s": 30},
        "evaluators": [{"name": "local_groundedness"}, {"name": "groundedness"}],
    }


@pytest.mark.asyncio
async def test_no_secret_or_record_text_leaks_and_bad_tokens_are_refused(
    tmp_path: Path, closed_port: int
) -> None:
    # The provider rejects every call and echoes the key it was given, as some do.
    reply = Reply(status=401, error=f"Incorrect API key provided: {JUDGE_KEY}")
    async with StubJudge(default=reply) as stub:
        mon = MonitorProcess(
            tmp_path,
            _config(stub, closed_port),  # a broker that refuses: the password still hides
            env=SECRET_ENV,
        )
        await asyncio.to_thread(mon.start, 90.0, "/healthz")
        try:
            auth = {**PROTO, "Authorization": f"Bearer {TOKEN}"}
            traces = [
                Trace(t, query=QUERY, context=(DOC,), response=ANSWER) for t in trace_ids(1, 3)
            ]
            body = export_request(traces)
            for headers in (
                PROTO,
                {**PROTO, "Authorization": f"Bearer {TOKEN[:-1]}"},
                {**PROTO, "Authorization": f"Basic {TOKEN}"},
            ):
                refused = await asyncio.to_thread(post, mon.http_port, body, headers)
                assert refused.status == 401
                assert TOKEN not in refused.body.decode(errors="replace")
            for metadata in ((), (("authorization", f"Bearer {TOKEN}0"),)):
                code, details = await asyncio.to_thread(grpc_export, mon.grpc_port, body, metadata)
                assert code == grpc.StatusCode.UNAUTHENTICATED and TOKEN not in details
            assert mon.value("rag_monitor_records_rejected_total", reason="unauthorized") == 5
            ok = await asyncio.to_thread(post, mon.http_port, body, auth)
            assert ok.status == 200
            want = {t.trace_id.hex() for t in traces}
            await asyncio.to_thread(
                mon.wait_for,
                lambda: want <= {line["trace_id"] for line in mon.results_lines()},
                90,
                "results",
            )
            for line in mon.results_lines():
                assert line["results"]["groundedness"]["error"]  # the judge refused
            # The Kafka client has tried the SASL connection and failed: the monitor logs
            # that after the client gave up, so the client's own failure logs are in too.
            await asyncio.to_thread(
                mon.wait_for,
                lambda: "kafka: cannot reach brokers" in mon.log(),
                90,
                "a failed Kafka connection attempt in the log",
            )
            exposed = {
                "metrics": mon.metrics_text(),
                "openmetrics": mon.metrics_text("application/openmetrics-text; version=1.0.0"),
                "readyz": mon.get("/readyz"),
                "healthz": mon.get("/healthz"),
            }
        finally:
            exit_code = await asyncio.to_thread(mon.stop)
        assert exit_code == 0, mon.log()
    exposed["stderr"] = mon.log()
    exposed["results"] = mon.results.read_text(encoding="utf-8")
    check = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "monitor", "check-config", str(tmp_path / "config.yaml")],
        cwd=REPO,
        env={**os.environ, **SECRET_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    exposed["check-config"] = check.stdout + check.stderr
    for where, text in exposed.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} appears in {where}"
    for fmt in ("metrics", "openmetrics"):
        for fragment in RECORD_TEXT:
            assert fragment not in exposed[fmt], f"record text {fragment!r} in /{fmt}"
    # The judge's refusals did reach the logs and results — only scrubbed.
    assert "Incorrect API key provided" in exposed["results"] + exposed["stderr"]


def _gzip_bomb(total: int, chunk: int = 1 << 20) -> bytes:
    """A valid gzip member of `total` zero bytes, built without compressing them all:
    after a full flush the compressor's output for the same chunk repeats byte for byte."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(chunk)
    first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    assert again == c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    tail = c.flush(zlib.Z_FINISH)
    n = total // chunk
    crc = 0
    for _ in range(n):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = crc.to_bytes(4, "little") + (total & 0xFFFFFFFF).to_bytes(4, "little")
    return header + first + again * (n - 1) + tail + trailer


def test_gzip_bomb_builder_is_a_valid_gzip_stream() -> None:
    small = _gzip_bomb(4 << 20)
    assert zlib.decompress(small, 16 + zlib.MAX_WBITS) == bytes(4 << 20)


def test_gzip_bomb_is_refused_and_memory_stays_small(tmp_path: Path) -> None:
    bomb = _gzip_bomb(2 << 30)  # 2 GiB of zeros
    assert len(bomb) < 4 << 20
    mon = MonitorProcess(tmp_path, {"evaluators": [{"name": "local_safety"}]}).start()
    try:
        reset_peak_rss(mon.pid)  # the peak from here on, not the start-up's
        before = proc_memory_kb(mon.pid)["VmHWM"]
        for _ in range(3):
            reply = post(mon.http_port, bomb, {**PROTO, "Content-Encoding": "gzip"})
            assert reply.status == 413, reply
        after = proc_memory_kb(mon.pid)["VmHWM"]
        assert mon.value("rag_monitor_records_rejected_total", reason="too_large") == 3
        # The cap (16 MiB) bounds what is inflated; far from the 2 GiB the bomb holds.
        assert after - before < 64 * 1024, (before, after)
        ok = post(mon.http_port, export_request([Trace(t) for t in trace_ids(1, 1)]))
        assert ok.status == 200
    finally:
        assert mon.stop() == 0, mon.log()


def test_untrusted_services_and_routes_cannot_grow_label_values(tmp_path: Path) -> None:
    mon = MonitorProcess(
        tmp_path,
        {
            "evaluators": [{"name": "local_safety"}],
            "pipeline": {"max_services": 50, "max_routes": 100},
        },
    ).start()
    try:
        traces = [
            Trace(t, service=f"svc-{i}", route=f"/route/{i}")
            for i, t in enumerate(trace_ids(5, 1000))
        ]
        for start in range(0, 1000, 250):
            assert post(mon.http_port, export_request(traces[start : start + 250])).status == 200
        mon.wait_for(lambda: len(mon.results_lines()) == 1000, 120, "1000 evaluated traces")
        values: dict[str, set[str]] = defaultdict(set)
        for (_name, labels), _ in mon.samples().items():
            for key, value in labels:
                if key in ("service", "route"):
                    values[key].add(value)
        assert len(values["service"]) <= 51 and "other" in values["service"], values["service"]
        assert len(values["route"]) <= 101 and "other" in values["route"]
        # Nothing was dropped to get there: every record was evaluated and counted.
        assert mon.value("rag_monitor_records_total") == 1000
        assert mon.value("rag_monitor_evaluations_total") == 1000
    finally:
        assert mon.stop() == 0, mon.log()


def test_kafka_tls_and_sasl_options_are_configurable() -> None:
    """Kafka's TLS/SASL keys exist and validate (their pass-through to the client is
    `tests/receivers/test_kafka_units.py::test_security_options_are_passed_through_and_the_password_comes_from_the_env`)."""
    from monitor.config import Config

    cfg = Config.model_validate(
        yaml.safe_load(
            """
receivers:
  kafka:
    enabled: true
    bootstrap_servers: [broker:9093]
    security_protocol: SASL_SSL
    sasl_mechanism: SCRAM-SHA-512
    sasl_username: monitor
    sasl_password_env: KAFKA_PASSWORD
    ssl_cafile: /etc/ca.pem
    ssl_certfile: /etc/client.pem
    ssl_keyfile: /etc/client.key
"""
        )
    )
    assert cfg.receivers.kafka.security_protocol == "SASL_SSL"
    assert "password" not in cfg.receivers.kafka.model_dump_json().replace("password_env", "")
