"""`rag-monitor explain --from-debug` against metrics ports that misbehave: real HTTP
servers on 127.0.0.1 that drip their answer a byte at a time, answer each of many traces
slowly, send a body far larger than any `/debug/records` page (or many trace bodies larger
together than any monitor keeps), or send JSON nested past any page's depth. Each must end
in one line on stderr and exit 1, within the deadline given, never a traceback or a hang.

The deadline is injected (`deadline_s`) and the dripping servers never finish, so only the
deadline can end a request; the slow server takes longer than the deadline to answer all
its traces, however fast the machine: nothing here depends on how fast the machine is.
The large bodies are streamed by the server a chunk at a time and never held whole by
either side."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from aiohttp import web

from monitor.cli.explain import explain_from_debug
from monitor.exporters.debug_records import PATH, TRACES_PATH
from monitor.exporters.metrics_port import HealthServer
from monitor.telemetry import create_telemetry

KEPT = f"{7:032x}"
HUGE = 1_500_000_000  # bytes the misbehaving server announces (and would send)
CHUNK = b"0" * (1 << 20)
DEEP = 200_000  # nesting of the deep bodies: past any JSON parser's recursion


def _page(traces: int = 1) -> dict[str, Any]:
    kept = [KEPT] + [f"{8 + n:032x}" for n in range(traces - 1)]
    return {
        "extracted": [],
        "no_record": [],
        "traces": [{"trace_id": t, "spans": 1, "spans_left_out": 0} for t in kept],
    }


def _trace(padding: int = 0) -> bytes:
    """A kept trace's body: OTLP/JSON of no spans, `padding` bytes of a resource attribute."""
    pad = {"key": "pad", "value": {"stringValue": "x" * padding}}
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": [pad]}}]})


async def _explain(url: str, deadline_s: float = 30.0) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(explain_from_debug, url, None, (), out, err, deadline_s)
    return code, out.getvalue(), err.getvalue()


def _one_line(code: int, out: str, err: str, said: str) -> None:
    assert code == 1 and out == "", (code, out, err)
    assert len(err.splitlines()) == 1 and said in err, (said, err)
    assert "Traceback" not in err


@asynccontextmanager
async def _dripping(headers_too: bool) -> AsyncIterator[str]:
    """A raw HTTP server that sends its answer one byte every 0.1 s and (for any test's
    patience) never finishes: from the status line on (`headers_too`), or after whole
    headers, in the body. Each byte comes well within a read timeout of the deadline:
    only a deadline on the whole request ends it."""
    stop = asyncio.Event()

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        )
        if not headers_too:
            writer.write(head)
        dripped = head + b" " * 100_000 if headers_too else b'{"traces": [' + b" " * 100_000
        try:
            for byte in dripped:
                writer.write(bytes([byte]))
                await writer.drain()
                try:
                    await asyncio.wait_for(stop.wait(), 0.1)
                    return
                except TimeoutError:
                    continue
        except ConnectionError:
            return  # the client gave up: what it should do
        finally:
            writer.close()

    server = await asyncio.start_server(drip, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        server.close()
        await server.wait_closed()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def _port(routes: list[tuple[str, Handler]]) -> AsyncIterator[str]:
    server = HealthServer(create_telemetry(), "127.0.0.1:0", lambda: (True, "ready"))
    for path, handler in routes:
        server.add_route(path, handler, text=True)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.bound_port}"
    finally:
        await server.shutdown(1.0)


async def test_a_port_that_drips_its_answer_ends_at_the_deadline_in_one_line() -> None:
    for headers_too in (True, False):
        async with _dripping(headers_too) as url:
            code, out, err = await _explain(url, deadline_s=1.0)
        _one_line(code, out, err, "no whole answer within 1 s")
        assert PATH in err


async def test_traces_each_in_time_but_late_together_end_at_the_deadline() -> None:
    """A page that lists three traces, each answered in 0.6 of the deadline: every request
    alone would finish in time, the read as a whole cannot (three answers take 1.8 of it),
    so a page listing thousands cannot hold explain for thousands of deadlines."""
    deadline_s = 1.0

    async def page(request: web.Request) -> web.Response:
        return web.json_response(_page(traces=3))

    async def slow_trace(request: web.Request) -> web.Response:
        await asyncio.sleep(0.6 * deadline_s)  # the server's own pace, not a wait on it
        return web.Response(body=_trace(), content_type="application/json")

    async with _port([(PATH, page), (TRACES_PATH + "{trace_id}", slow_trace)]) as url:
        code, out, err = await _explain(url, deadline_s=deadline_s)
    _one_line(code, out, err, "no whole answer within 1 s")
    assert TRACES_PATH in err


def _huge(announced: bool) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if announced:
            response.content_length = HUGE
        await response.prepare(request)
        try:
            for _ in range(HUGE // len(CHUNK)):
                await response.write(CHUNK)
        except ConnectionError:
            pass  # the client stopped reading: what it should do
        return response

    return handler


async def test_a_body_larger_than_any_page_is_refused_in_one_line() -> None:
    """Announced (Content-Length) or not (chunked), a 1.5 GB page, and a 1.5 GB trace
    body behind a good page, are refused at the cap, read no further."""

    async def page(request: web.Request) -> web.Response:
        return web.json_response(_page())

    for announced in (True, False):
        async with _port([(PATH, _huge(announced))]) as url:
            code, out, err = await _explain(url)
        _one_line(code, out, err, "the body is larger than")
        assert PATH in err
        async with _port([(PATH, page), (TRACES_PATH + "{trace_id}", _huge(announced))]) as url:
            code, out, err = await _explain(url)
        _one_line(code, out, err, "the body is larger than")
        assert TRACES_PATH + KEPT in err


async def test_trace_bodies_larger_together_than_any_monitor_keeps_are_refused() -> None:
    """A page that lists 20 traces, each body 1 MiB of OTLP/JSON (a monitor keeps 256 KiB a
    trace, 4 MiB in all): each under the cap of one body, together past it; refused once
    the bodies read pass the cap, the rest not read."""
    body = _trace(padding=1 << 20)
    asked: list[str] = []

    async def page(request: web.Request) -> web.Response:
        return web.json_response(_page(traces=20))

    async def trace(request: web.Request) -> web.Response:
        asked.append(request.match_info["trace_id"])
        return web.Response(body=body, content_type="application/json")

    async with _port([(PATH, page), (TRACES_PATH + "{trace_id}", trace)]) as url:
        code, out, err = await _explain(url)
    _one_line(code, out, err, "the body is larger than the")
    assert "bytes left of 16 MiB" in err, err
    assert TRACES_PATH in err
    assert len(asked) < 20


async def test_a_body_nested_past_any_page_is_refused_in_one_line() -> None:
    """A page, and a kept trace's body, that are JSON nested 200,000 deep."""
    deep = b"[" * DEEP + b"]" * DEEP
    deep_trace = b'{"resourceSpans": ' + deep + b"}"

    async def nested(request: web.Request) -> web.Response:
        return web.Response(body=deep, content_type="application/json")

    async def nested_trace(request: web.Request) -> web.Response:
        return web.Response(body=deep_trace, content_type="application/json")

    async def page(request: web.Request) -> web.Response:
        return web.json_response(_page())

    async with _port([(PATH, nested)]) as url:
        code, out, err = await _explain(url)
    _one_line(code, out, err, "nested")
    async with _port([(PATH, page), (TRACES_PATH + "{trace_id}", nested_trace)]) as url:
        code, out, err = await _explain(url)
    _one_line(code, out, err, "nested")
    assert TRACES_PATH + KEPT in err


async def test_a_redirect_to_another_port_is_refused_never_followed() -> None:
    """The page, then a kept trace, answered by a redirect to another port (that serves a
    good page): neither is followed; one line says where it pointed."""
    served: list[str] = []

    async def good(request: web.Request) -> web.Response:
        served.append(request.path)
        return web.json_response(_page())

    async def trace(request: web.Request) -> web.Response:
        served.append(request.path)
        return web.Response(body=_trace(), content_type="application/json")

    async with _port([(PATH, good), (TRACES_PATH + "{trace_id}", trace)]) as other:

        async def away(request: web.Request) -> web.Response:
            raise web.HTTPFound(other + request.path)

        async def page(request: web.Request) -> web.Response:
            return web.json_response(_page())

        async with _port([(PATH, away)]) as url:
            code, out, err = await _explain(url)
        _one_line(code, out, err, f"a redirect to {other}{PATH}; not followed")
        async with _port([(PATH, page), (TRACES_PATH + "{trace_id}", away)]) as url:
            code, out, err = await _explain(url)
        _one_line(code, out, err, f"a redirect to {other}{TRACES_PATH}{KEPT}; not followed")
    assert served == []  # the other port was never asked
