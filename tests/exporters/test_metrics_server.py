"""The metrics port as Prometheus exporters serve it: content negotiation, gzip, `name[]`
filters, `rag_monitor_build_info` and the `process_*` / `python_*` series; TLS (and mutual
TLS) and bcrypt basic auth from an exporter-toolkit web config, re-read when it or its
certificates change; health probes that never ask for credentials.

A real aiohttp server on loopback and a real HTTP client (httpx); certificates are made
for the test with the `openssl` command line."""

from __future__ import annotations

import asyncio
import gzip
import os
import platform
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import bcrypt
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.children import spawn
from harness.servers import monitor_ports, stop_process
from harness.wait import SERVER_START_S, wait_until
from monitor import __version__
from monitor.config import ConfigError
from monitor.exporters.metrics_port import HealthServer
from monitor.telemetry import Telemetry, create_telemetry

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _ready() -> tuple[bool, str]:
    return True, "ready"


@pytest.fixture
async def server(telemetry: Telemetry) -> AsyncIterator[HealthServer]:
    http = HealthServer(telemetry, "127.0.0.1:0", _ready)
    await http.start()
    try:
        yield http
    finally:
        await http.shutdown(10)


def _families(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


# -- exposition --------------------------------------------------------------------------


async def test_gzip_when_asked_and_only_then(server: HealthServer, telemetry: Telemetry) -> None:
    telemetry.child(telemetry.counter("evaluations"), "svc", "", "/r", "local_safety", "pass").inc()
    url = f"http://127.0.0.1:{server.bound_port}/metrics"
    async with httpx.AsyncClient() as client:
        async with client.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as zipped:
            raw = b"".join([chunk async for chunk in zipped.aiter_raw()])
        plain = await client.get(url, headers={"Accept-Encoding": "identity"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    body = gzip.decompress(raw)
    assert b'rag_monitor_evaluations_total{evaluator="local_safety"' in body
    assert len(raw) < len(body)
    assert "Content-Encoding" not in plain.headers
    assert plain.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b"rag_monitor_evaluations_total" in plain.content


async def test_name_filters_select_families(server: HealthServer) -> None:
    url = f"http://127.0.0.1:{server.bound_port}/metrics"
    async with httpx.AsyncClient() as client:
        response = await client.get(
            url,
            params=[("name[]", "rag_monitor_build_info"), ("name[]", "process_cpu_seconds_total")],
        )
    assert set(_families(response.text)) == {"rag_monitor_build_info", "process_cpu_seconds_total"}


async def test_openmetrics_is_negotiated_and_carries_exemplars(
    server: HealthServer, telemetry: Telemetry
) -> None:
    telemetry.child(
        telemetry.counter("evaluations"), "svc", "", "/r", "local_groundedness", "fail"
    ).inc(exemplar={"trace_id": "0af7651916cd43dd8448eb211c80319c"})
    async with httpx.AsyncClient() as client:
        response = await client.get(
            f"http://127.0.0.1:{server.bound_port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
    assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")
    assert '# {trace_id="0af7651916cd43dd8448eb211c80319c"} 1.0' in response.text


async def test_build_info_and_process_metrics(server: HealthServer) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{server.bound_port}/metrics")
    families = _families(response.text)
    labels = (("python", platform.python_version()), ("version", __version__))
    assert families["rag_monitor_build_info"] == {labels: 1.0}
    assert families["process_resident_memory_bytes"][()] > 0
    assert families["process_cpu_seconds_total"][()] >= 0
    assert families["process_start_time_seconds"][()] > 0
    assert families["process_open_fds"][()] > 0
    assert any(dict(k)["implementation"] for k in families["python_info"])
    assert "python_gc_collections_total" in families


def test_each_telemetry_has_its_own_runtime_collectors() -> None:
    # Two registries in one process (tests, replay inside run) must not collide.
    first, second = create_telemetry(), create_telemetry()
    for t in (first, second):
        names = {f.name for f in t.registry.collect()}
        assert {"process_resident_memory_bytes", "rag_monitor_build_info", "python_info"} <= names


# -- TLS and basic auth ------------------------------------------------------------------


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _certificate(directory: Path, name: str, ca: str, *, server: bool) -> tuple[Path, Path]:
    """A key and a certificate for `name`, signed by the CA `ca` (its files ca.pem/.key)."""
    key, csr, cert = (directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", f"/CN={name}"
    )
    extensions = directory / f"{name}.ext"
    extensions.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n" if server else "extendedKeyUsage=clientAuth\n"
    )
    _openssl(
        "x509", "-req", "-in", csr, "-CA", directory / f"{ca}.pem", "-CAkey", directory / f"{ca}.key",
        "-CAcreateserial", "-days", "2", "-out", cert, "-extfile", extensions,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two CAs, server certificates from each, a client certificate from the first."""
    directory = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", directory / f"{ca}.key",
            "-out", directory / f"{ca}.pem", "-days", "2", "-subj", f"/CN={ca}",
        )  # fmt: skip
    _certificate(directory, "server", "ca", server=True)
    _certificate(directory, "server-rotated", "ca", server=True)
    _certificate(directory, "client", "ca", server=False)
    return directory


def _hash(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()


def _web_config(
    path: Path, pki: Path, *, users: dict[str, str], cert: str = "server", mutual: bool = False
) -> Path:
    lines = [
        "tls_server_config:",
        f"  cert_file: {pki / cert}.pem",
        f"  key_file: {pki / cert}.key",
    ]
    if mutual:
        lines += [
            f"  client_ca_file: {pki / 'ca.pem'}",
            "  client_auth_type: RequireAndVerifyClientCert",
        ]
    if users:
        lines.append("basic_auth_users:")
        lines += [f"  {user}: '{hashed}'" for user, hashed in users.items()]
    path.write_text("\n".join(lines) + "\n")
    # A distinct modification time whatever the file system's clock resolution.
    stamp = getattr(_web_config, "stamp", 1_700_000_000_000_000_000) + 1_000_000_000
    _web_config.stamp = stamp  # type: ignore[attr-defined]
    os.utime(path, ns=(stamp, stamp))
    return path


def _client_tls(pki: Path, *, client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if client_cert:
        context.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    return context


async def _served(telemetry: Telemetry, web: Path) -> HealthServer:
    server = HealthServer(telemetry, "127.0.0.1:0", _ready, web_config_file=str(web))
    await server.start()
    return server


def _rejected(telemetry: Telemetry) -> float:
    value = telemetry.registry.get_sample_value(
        "rag_monitor_http_requests_rejected_total", {"reason": "unauthorized"}
    )
    return value or 0.0


def _reloads(telemetry: Telemetry, outcome: str) -> float:
    value = telemetry.registry.get_sample_value(
        "rag_monitor_web_config_reloads_total", {"outcome": outcome}
    )
    return value or 0.0


@needs_openssl
async def test_tls_and_basic_auth(pki: Path, tmp_path: Path, telemetry: Telemetry) -> None:
    web = _web_config(tmp_path / "web.yml", pki, users={"prometheus": _hash("scrape-pw")})
    server = await _served(telemetry, web)
    base = f"https://127.0.0.1:{server.bound_port}"
    try:
        async with httpx.AsyncClient(verify=_client_tls(pki)) as client:
            anonymous = await client.get(f"{base}/metrics")
            wrong = await client.get(f"{base}/metrics", auth=("prometheus", "guess"))
            unknown = await client.get(f"{base}/metrics", auth=("root", "scrape-pw"))
            right = await client.get(f"{base}/metrics", auth=("prometheus", "scrape-pw"))
            again = await client.get(f"{base}/metrics", auth=("prometheus", "scrape-pw"))
            probes = [await client.get(f"{base}{path}") for path in ("/healthz", "/readyz")]
        for refused in (anonymous, wrong, unknown):
            assert refused.status_code == 401
            assert refused.headers["WWW-Authenticate"].startswith("Basic realm=")
            assert "rag_monitor" not in refused.text
        assert right.status_code == 200 and "rag_monitor_build_info" in right.text
        assert again.status_code == 200
        assert [p.status_code for p in probes] == [200, 200]  # kubelet probes send no credentials
        assert _rejected(telemetry) == 3
        async with httpx.AsyncClient() as plaintext:
            with pytest.raises(httpx.HTTPError):
                await plaintext.get(f"http://127.0.0.1:{server.bound_port}/healthz")
        async with httpx.AsyncClient(verify=ssl.create_default_context()) as untrusting:
            with pytest.raises(httpx.ConnectError):  # the certificate really is verified
                await untrusting.get(f"{base}/healthz")
    finally:
        await server.shutdown(10)


@needs_openssl
async def test_mutual_tls(pki: Path, tmp_path: Path, telemetry: Telemetry) -> None:
    web = _web_config(tmp_path / "web.yml", pki, users={}, mutual=True)
    server = await _served(telemetry, web)
    url = f"https://127.0.0.1:{server.bound_port}/metrics"
    try:
        async with httpx.AsyncClient(verify=_client_tls(pki, client_cert=True)) as client:
            assert (await client.get(url)).status_code == 200
        async with httpx.AsyncClient(verify=_client_tls(pki)) as client:
            with pytest.raises(httpx.HTTPError):
                await client.get(url)
    finally:
        await server.shutdown(10)


async def _presented_certificate(port: int, pki: Path) -> str:
    """The common name of the certificate the server presents to a new connection."""
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=_client_tls(pki), server_hostname="127.0.0.1"
    )
    cert = writer.get_extra_info("peercert")
    writer.close()
    await writer.wait_closed()
    return str(dict(field[0] for field in cert["subject"])["commonName"])


@needs_openssl
async def test_web_config_is_reloaded_when_it_changes(
    pki: Path, tmp_path: Path, telemetry: Telemetry
) -> None:
    path = tmp_path / "web.yml"
    _web_config(path, pki, users={"prometheus": _hash("first")})
    server = await _served(telemetry, path)
    port = server.bound_port
    assert port is not None
    url = f"https://127.0.0.1:{port}/metrics"

    async def status(password: str) -> int:
        async with httpx.AsyncClient(verify=_client_tls(pki)) as client:
            return (await client.get(url, auth=("prometheus", password))).status_code

    try:
        assert await status("first") == 200
        assert await _presented_certificate(port, pki) == "server"
        # Rotated password and certificate: both apply to the next request / connection.
        _web_config(path, pki, users={"prometheus": _hash("second")}, cert="server-rotated")
        assert await status("first") == 401
        assert await status("second") == 200
        assert await _presented_certificate(port, pki) == "server-rotated"
        assert _reloads(telemetry, "ok") == 1
        # A broken file leaves the last good one in force (counted once, not per request).
        path.write_text("basic_auth_users: {prometheus: not-a-hash}\n")
        os.utime(path, ns=(1, 1))
        assert await status("second") == 200
        assert await status("second") == 200
        assert _reloads(telemetry, "error") == 1
        # So does a change a running listener cannot take over.
        _web_config(path, pki, users={"prometheus": _hash("third")}, mutual=True)
        assert await status("second") == 200
        assert _reloads(telemetry, "error") == 2
        # Fixed: picked up again.
        _web_config(path, pki, users={"prometheus": _hash("third")})
        assert await status("third") == 200
        assert _reloads(telemetry, "ok") == 2
    finally:
        await server.shutdown(10)


@needs_openssl
def test_unusable_certificate_is_a_config_error(pki: Path, tmp_path: Path, cli: list[str]) -> None:
    web = tmp_path / "web.yml"
    web.write_text(
        f"tls_server_config: {{cert_file: {pki / 'server.pem'}, key_file: {pki / 'client.key'}}}\n"
    )
    expected = f"exporters.prometheus.web_config_file: in {web}: tls_server_config:"
    with pytest.raises(ConfigError) as info:
        HealthServer(create_telemetry(), "127.0.0.1:0", _ready, web_config_file=str(web))
    (problem,) = info.value.problems
    assert problem.startswith(expected)
    config = tmp_path / "config.yaml"
    config.write_text(f"exporters: {{prometheus: {{web_config_file: '{web}'}}}}\n")
    check = subprocess.run([*cli, "check-config", str(config)], capture_output=True, text=True)
    assert check.returncode == 1 and check.stdout == ""
    assert check.stderr.startswith(expected)


@needs_openssl
def test_run_serves_metrics_behind_the_web_config(
    pki: Path, tmp_path: Path, cli: list[str]
) -> None:
    """`rag-monitor run` wires `exporters.prometheus.web_config_file` into its server."""
    web = _web_config(tmp_path / "web.yml", pki, users={"prometheus": _hash("pw")})
    config = tmp_path / "config.yaml"
    config.write_text(
        "receivers:\n  otlp:\n    protocols:\n"
        "      http: {endpoint: '127.0.0.1:0'}\n"
        f"exporters:\n  prometheus: {{endpoint: '127.0.0.1:0', web_config_file: '{web}'}}\n"
    )
    log = tmp_path / "monitor.log"
    with log.open("w") as stderr:
        proc = spawn([*cli, "run", "--config", str(config)], stderr=stderr)
    try:
        with httpx.Client(verify=_client_tls(pki)) as client:

            def ready() -> bool:
                assert proc.poll() is None, "monitor exited"
                port = monitor_ports(log.read_text(errors="replace")).get("metrics")
                return port is not None and client.get(_url(port, "readyz")).status_code == 200

            wait_until(ready, SERVER_START_S, "/readyz over TLS", errors=(httpx.HTTPError,))
            port = monitor_ports(log.read_text(errors="replace"))["metrics"]
            assert client.get(_url(port, "metrics")).status_code == 401
            auth = ("prometheus", "pw")
            assert client.get(_url(port, "metrics"), auth=auth).status_code == 200
    finally:
        stop_process(proc, 60)
    assert proc.returncode == 0, log.read_text()
    assert f"metrics on https://127.0.0.1:{port}/metrics" in log.read_text()


def _url(port: int, path: str) -> str:
    return f"https://127.0.0.1:{port}/{path}"
