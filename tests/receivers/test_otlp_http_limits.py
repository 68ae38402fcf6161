"""Slow and idle HTTP clients are cut off: a request's headers must arrive within
`read_header_timeout_s`, its body within `read_timeout_s`, and at most `max_connections`
are open at once. Raw sockets play the slow clients against the real receiver."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from harness.pipeline import RecordingStage, Served, started
from harness.wait import wait_until_async
from monitor.config import Config
from monitor.telemetry import Telemetry

HEADER_TIMEOUT_S = 0.5


def _config(**http: object) -> Config:
    return Config.model_validate(
        {
            "receivers": {
                "otlp": {
                    "grpc": {"enabled": False},
                    "http": {
                        "endpoint": "127.0.0.1:0",
                        "read_header_timeout_s": HEADER_TIMEOUT_S,
                        "read_timeout_s": HEADER_TIMEOUT_S,
                        **http,
                    },
                }
            }
        }
    )


@pytest.fixture
async def served(telemetry: Telemetry) -> AsyncIterator[Served]:
    receivers = await started(_config(max_connections=4), RecordingStage(), telemetry)
    try:
        yield receivers
    finally:
        await receivers.shutdown(5)


def _connect(receivers: Served) -> socket.socket:
    assert receivers.http is not None and receivers.http.port is not None
    sock = socket.create_connection(("127.0.0.1", receivers.http.port), timeout=10)
    sock.settimeout(0.05)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed the connection (EOF or reset); False while open."""
    try:
        return sock.recv(65536) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return data
        data += chunk


def _closed(t: Telemetry, reason: str) -> float:
    value = t.registry.get_sample_value(
        "rag_monitor_http_connections_closed_total", {"reason": reason}
    )
    return value or 0.0


async def test_a_client_trickling_its_headers_is_cut_off(
    served: Served, telemetry: Telemetry
) -> None:
    sock = _connect(served)
    try:
        request = b"POST /v1/traces HTTP/1.1\r\nHost: monitor\r\nContent-Type: application/x-"
        # One byte at a time, each well inside the timeout, the whole far beyond it.
        for byte in request:
            if await asyncio.to_thread(_closed_by_server, sock):
                break
            sock.send(bytes([byte]))
            await asyncio.sleep(HEADER_TIMEOUT_S / 10)
        await wait_until_async(lambda: _closed_by_server(sock), 10, "the server to hang up")
    finally:
        sock.close()
    assert _closed(telemetry, "read_header_timeout") >= 1


async def test_a_client_that_connects_and_says_nothing_is_cut_off(
    served: Served, telemetry: Telemetry
) -> None:
    sock = _connect(served)
    try:
        await wait_until_async(lambda: _closed_by_server(sock), 10, "the server to hang up")
    finally:
        sock.close()
    assert _closed(telemetry, "read_header_timeout") == 1


async def test_a_body_that_never_arrives_gets_408_and_the_connection_closes(
    served: Served, telemetry: Telemetry
) -> None:
    sock = _connect(served)
    try:
        sock.send(
            b"POST /v1/traces HTTP/1.1\r\nHost: monitor\r\n"
            b"Content-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n0123456789"
        )
        started_at = time.monotonic()
        response = await asyncio.to_thread(_read_response, sock)
    finally:
        sock.close()
    assert response.startswith(b"HTTP/1.1 408"), response[:80]
    assert time.monotonic() - started_at >= HEADER_TIMEOUT_S * 0.9
    assert _closed(telemetry, "read_timeout") == 1
    value = telemetry.registry.get_sample_value(
        "rag_monitor_records_rejected_total", {"receiver": "otlp_http", "reason": "read_timeout"}
    )
    assert value == 1


async def test_connections_past_the_cap_are_closed_as_they_open(
    telemetry: Telemetry,
) -> None:
    # A long header timeout: the open connections stay for the test's whole duration.
    receivers = await started(
        _config(max_connections=3, read_header_timeout_s=60), RecordingStage(), telemetry
    )
    socks = []
    try:
        socks = [_connect(receivers) for _ in range(3)]
        extra = _connect(receivers)
        socks.append(extra)
        await wait_until_async(lambda: _closed_by_server(extra), 10, "the extra to be closed")
        assert _closed(telemetry, "too_many_connections") == 1
        assert not any(_closed_by_server(s) for s in socks[:3])
    finally:
        for sock in socks:
            sock.close()
        await receivers.shutdown(5)


def _cut_mid_body(receivers: Served, *, reset: bool) -> None:
    """Half a body, then a reset (`SO_LINGER` 0) or an orderly close."""
    sock = _connect(receivers)
    sock.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: monitor\r\n"
        b"Content-Type: application/x-protobuf\r\nContent-Length: 100000\r\n\r\n" + b"x" * 50_000
    )
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    else:
        sock.shutdown(socket.SHUT_WR)
    sock.close()


async def test_a_client_cutting_its_connection_mid_body_is_counted_once_and_logged_once(
    served: Served, telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    for reset in (True, True, True, False):
        await asyncio.to_thread(_cut_mid_body, served, reset=reset)
    await wait_until_async(
        lambda: _closed(telemetry, "client_reset") == 4, 10, "four cut requests counted"
    )
    # The receiver goes on serving; no traceback, one line for the kind of fault.
    assert served.http is not None and served.http.port is not None
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"http://127.0.0.1:{served.http.port}/v1/traces",
            content=b"",
            headers={"Content-Type": "application/x-protobuf"},
        )
    assert response.status_code == 200
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    cut = [r for r in caplog.records if "cut its connection" in r.getMessage()]
    assert len(cut) == 1, cut
