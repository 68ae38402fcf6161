"""TLS on the OTLP receivers: the real SDK exporters deliver over TLS (and mutual TLS);
plaintext and unauthenticated clients are refused; a missing certificate file is a config
error. Certificates are made for the test with the `openssl` command line."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

from harness.pipeline import RecordingStage, Served, started
from harness.pipeline import metric_value as _value
from monitor.config import Config, ConfigError, load_config
from monitor.telemetry import Telemetry
from tests.receivers.test_otlp_receivers import _send

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _issue(directory: Path, name: str, ca: Path, ca_key: Path, *, server: bool) -> None:
    key, csr, cert = (directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        f"/CN={name}",
    )
    ext = directory / f"{name}.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "extendedKeyUsage=clientAuth\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        str(cert),
        "-extfile",
        str(ext),
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
    )
    _issue(directory, "server", ca, ca_key, server=True)
    _issue(directory, "client", ca, ca_key, server=False)
    return directory


def _config(pki: Path, *, mutual: bool) -> Config:
    tls = {"cert_file": str(pki / "server.pem"), "key_file": str(pki / "server.key")}
    if mutual:
        tls["client_ca_file"] = str(pki / "ca.pem")
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {
                    "grpc": {"endpoint": "127.0.0.1:0"},
                    "http": {"endpoint": "127.0.0.1:0"},
                    "tls": tls,
                }
            },
            # Released as the root ends: the SDK exports every span before or with its root's.
            "trace_assembly": {"late_spans_wait_s": 0},
        }
    )


@pytest.fixture(params=[False, True], ids=["tls", "mutual_tls"])
async def served(
    request: pytest.FixtureRequest, pki: Path, telemetry: Telemetry
) -> AsyncIterator[tuple[Served, RecordingStage, bool]]:
    stage = RecordingStage()
    receivers = await started(_config(pki, mutual=request.param), stage, telemetry)
    try:
        yield receivers, stage, request.param
    finally:
        await receivers.shutdown(5)


async def test_sdk_exporters_deliver_over_tls(
    served: tuple[Served, RecordingStage, bool],
    pki: Path,
    telemetry: Telemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # requests lets these variables override the exporter's own CA file.
    for variable in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(variable, raising=False)
    receivers, stage, mutual = served
    assert receivers.grpc is not None and receivers.http is not None
    http = HttpExporter(
        endpoint=f"https://127.0.0.1:{receivers.http.port}/v1/traces",
        certificate_file=str(pki / "ca.pem"),
        client_key_file=str(pki / "client.key") if mutual else None,
        client_certificate_file=str(pki / "client.pem") if mutual else None,
    )
    creds = grpc.ssl_channel_credentials(
        root_certificates=(pki / "ca.pem").read_bytes(),
        private_key=(pki / "client.key").read_bytes() if mutual else None,
        certificate_chain=(pki / "client.pem").read_bytes() if mutual else None,
    )
    via_grpc = GrpcExporter(endpoint=f"127.0.0.1:{receivers.grpc.port}", credentials=creds)
    for exporter, source in ((http, "otlp_http"), (via_grpc, "otlp_grpc")):
        trace_id = await asyncio.to_thread(_send, exporter, "openinference")
        ((got_source, record),) = await stage.wait_for(trace_id)
        assert got_source == source and record.response is not None
        assert _value(telemetry, "spans_received_total", receiver=source) >= 2


async def test_plaintext_and_certificate_less_clients_are_refused(
    served: tuple[Served, RecordingStage, bool], pki: Path, telemetry: Telemetry
) -> None:
    receivers, stage, mutual = served
    assert receivers.http is not None
    port = receivers.http.port
    with pytest.raises(httpx.HTTPError):
        await asyncio.to_thread(
            httpx.post, f"http://127.0.0.1:{port}/v1/traces", content=b"", timeout=5
        )
    if mutual:  # right CA, but no client certificate
        with pytest.raises(httpx.HTTPError):
            await asyncio.to_thread(
                httpx.post,
                f"https://127.0.0.1:{port}/v1/traces",
                content=b"",
                timeout=5,
                verify=ssl.create_default_context(cafile=str(pki / "ca.pem")),
            )
    assert stage.records == []
    assert _value(telemetry, "spans_received_total", receiver="otlp_http") == 0


def test_missing_certificate_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"receivers:\n  otlp:\n    tls:\n      cert_file: {tmp_path / 'nope.pem'}\n"
        f"      key_file: {tmp_path / 'nope.key'}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert any(
        p.startswith("receivers.otlp.tls.cert_file: no such file") for p in info.value.problems
    )
