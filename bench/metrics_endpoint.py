"""The metrics port under a realistic series count: bytes and time per scrape of /metrics
as text (the reference), gzip, OpenMetrics, a `name[]` filter, and over TLS with basic
auth (a bcrypt cost-10 hash; the first request pays bcrypt, later ones hit the cache).

    python bench/metrics_endpoint.py [--scrapes 30] [--services 50] [--routes 20]

One in-process `HealthServer` on loopback, scraped by httpx; the registry is filled at the
label caps a busy monitor reaches (services × routes × evaluators × outcomes). Times are
medians of wall-clock scrapes on a shared machine; the ratios to the text scrape of the
same run are the stable figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bcrypt
import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_docs, bench_smoke  # noqa: E402
from monitor.exporters.metrics_port import HealthServer, WebSecurity  # noqa: E402
from monitor.telemetry import Telemetry, create_telemetry  # noqa: E402

EVALUATORS = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")


def populate(t: Telemetry, services: int, routes: int) -> int:
    for s in range(services):
        service = f"service-{s}"
        for evaluator in EVALUATORS:
            t.child(t.histogram("evaluation_score"), service, evaluator).observe(0.7)
            t.child(t.counter("sampling_decisions"), service, evaluator, "sampled").inc()
            for r in range(routes):
                for outcome in ("pass", "fail", "error"):
                    t.child(
                        t.counter("evaluations"), service, "", f"/route/{r}", evaluator, outcome
                    ).inc()
    return sum(len(f.samples) for f in t.registry.collect())


def _certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def scrape(
    client: httpx.AsyncClient,
    url: str,
    n: int,
    *,
    headers: dict[str, str],
    params: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> tuple[float, int, float]:
    """(median seconds, bytes on the wire, first request's seconds)."""
    times = []
    size = 0
    for _ in range(n):
        start = time.perf_counter()
        async with client.stream("GET", url, headers=headers, params=params, auth=auth) as response:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
            assert response.status_code == 200, response.status_code
        times.append(time.perf_counter() - start)
        size = len(raw)
    return statistics.median(times), size, times[0]


async def auth_check_cost() -> tuple[float, float]:
    """Seconds for the first check of a credential (bcrypt) and the median later one."""
    with tempfile.TemporaryDirectory() as tmp:
        web = Path(tmp) / "web.yml"
        hashed = bcrypt.hashpw(b"bench-pw", bcrypt.gensalt(10)).decode()
        web.write_text(f"basic_auth_users: {{prometheus: '{hashed}'}}\n")
        security = WebSecurity(str(web), create_telemetry())
        header = "Basic " + base64.b64encode(b"prometheus:bench-pw").decode()
        times = []
        for _ in range(200):
            start = time.perf_counter()
            assert await security.authorized(header)
            times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--services", type=int, default=50)
    parser.add_argument("--routes", type=int, default=20)
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, scrapes=2, services=3, routes=2)

    telemetry = create_telemetry(max_services=args.services, max_routes=args.routes)
    samples = populate(telemetry, args.services, args.routes)
    plain = HealthServer(telemetry, "127.0.0.1:0", lambda: (True, "ready"))
    await plain.start()
    rows: list[tuple[str, float, int]] = []
    base = f"http://127.0.0.1:{plain.bound_port}/metrics"
    async with httpx.AsyncClient(timeout=60) as client:
        ref_time, ref_size, _ = await scrape(
            client, base, args.scrapes, headers={"Accept-Encoding": "identity"}
        )
        rows.append(("text (reference)", ref_time, ref_size))
        t, b, _ = await scrape(client, base, args.scrapes, headers={"Accept-Encoding": "gzip"})
        rows.append(("text, gzip", t, b))
        t, b, _ = await scrape(
            client,
            base,
            args.scrapes,
            headers={
                "Accept": "application/openmetrics-text; version=1.0.0",
                "Accept-Encoding": "identity",
            },
        )
        rows.append(("OpenMetrics", t, b))
        t, b, _ = await scrape(
            client,
            base,
            args.scrapes,
            headers={
                "Accept": "application/openmetrics-text; version=1.0.0",
                "Accept-Encoding": "gzip",
            },
        )
        rows.append(("OpenMetrics, gzip", t, b))
        t, b, _ = await scrape(
            client,
            base,
            args.scrapes,
            params={"name[]": "rag_monitor_build_info"},
            headers={"Accept-Encoding": "identity"},
        )
        rows.append(("name[]=rag_monitor_build_info", t, b))
    await plain.shutdown(5)

    first = None
    if shutil.which("openssl"):
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = _certificate(Path(tmp))
            hashed = bcrypt.hashpw(b"bench-pw", bcrypt.gensalt(10)).decode()
            web = Path(tmp) / "web.yml"
            web.write_text(
                f"tls_server_config: {{cert_file: {cert}, key_file: {key}}}\n"
                f"basic_auth_users: {{prometheus: '{hashed}'}}\n"
            )
            secured_telemetry = create_telemetry(max_services=args.services, max_routes=args.routes)
            populate(secured_telemetry, args.services, args.routes)  # same series count
            secured = HealthServer(
                secured_telemetry, "127.0.0.1:0", lambda: (True, "ready"), web_config_file=str(web)
            )
            await secured.start()
            tls = ssl.create_default_context(cafile=str(cert))
            async with httpx.AsyncClient(verify=tls, timeout=60) as client:
                t, b, first = await scrape(
                    client,
                    f"https://127.0.0.1:{secured.bound_port}/metrics",
                    args.scrapes,
                    auth=("prometheus", "bench-pw"),
                    headers={"Accept-Encoding": "gzip"},
                )
            rows.append(("TLS + basic auth, gzip (after the first)", t, b))
            await secured.shutdown(5)

    check_first, check_cached = await auth_check_cost()
    table = bench_docs.table(
        ["scrape", "median ms", "× text", "bytes", "× text"],
        [
            [
                name,
                f"{seconds * 1000:.1f}",
                f"{seconds / ref_time:.2f}",
                f"{size:,}",
                f"{size / ref_size:.3f}",
            ]
            for name, seconds, size in rows
        ],
    )
    notes = [
        f"Series samples in the registry: {samples:,}; scrapes per row: {args.scrapes}.",
        f"Basic-auth check (bcrypt cost 10): first {check_first * 1000:.1f} ms, then "
        f"{check_cached * 1e6:.1f} µs from the cache ({check_first / check_cached:.0f}×).",
    ]
    if first is not None:
        notes.append(
            f"First TLS + basic-auth scrape (bcrypt cost 10 verified once): {first * 1000:.1f} ms."
        )
    body = "\n\n".join([table, " ".join(notes)])
    print(body)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "metrics-endpoint", body)


if __name__ == "__main__":
    asyncio.run(main())
