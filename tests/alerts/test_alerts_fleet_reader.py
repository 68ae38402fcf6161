"""The fleet reader (`alerts.fleet`) against a scripted Prometheus query API serving every bad
answer a real one, a proxy in front of it or an attacker could: a JSON list or string, a
`metric` that is a list, NaN and +Inf samples, 100 MB of `[`, 100 MB and 1 MB of bytes
that are not UTF-8, JSON nested past the stack, a gzip bomb, HTTP errors, a server that
never answers, one that is not there, redirects to another host. Each read fails alone:
counted by outcome, logged without the answer, and the next good answer is read and counted
as if nothing happened. Counter quirks (a series missing from one answer, a series reading
lower once) are never verdicts; a counter that started again is. The password of the URL
reaches the server and never the log. The good path against a real Prometheus is
`test_alerts_fleet_prometheus.py`."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from harness.wait import wait_until_async
from monitor.__main__ import main
from monitor.alerts.fleet import OUTCOMES, FleetReader
from monitor.config import AlertBaseline, AlertFleet, Config, RegressionRule
from monitor.service import Service
from monitor.telemetry import Telemetry, create_telemetry

RULE = RegressionRule(name="regression", evaluator="local_groundedness", baseline=AlertBaseline())
LIMIT = 64 * 1024
PASSWORD = "s3cret-pw"
Answer = Callable[[web.Request], Any]


def series(instance: str, outcome: str, value: float | str) -> dict[str, Any]:
    labels = {
        "__name__": "rag_monitor_evaluations_total",
        "instance": instance,
        "service": "shop",
        "evaluator": "local_groundedness",
        "outcome": outcome,
    }
    return {"metric": labels, "value": [1700000000.0, str(value)]}


def vector(*result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": list(result)}}


def counts(passes: int, fails: int, instance: str = "a") -> dict[str, Any]:
    return vector(series(instance, "pass", passes), series(instance, "fail", fails))


@dataclass
class QueryApi:
    """A Prometheus query API that answers each request with the next scripted answer: a
    JSON document, or a handler of its own (`web.Request -> web.StreamResponse`)."""

    answers: list[Any] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    url: str = ""
    # Set when the server stops: what waits on it (a server that never answers) returns.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.auth.append(request.headers.get("Authorization"))
        answer = self.answers.pop(0)
        if callable(answer):
            response: web.StreamResponse = await answer(request)
            return response
        return web.json_response(answer)


@asynccontextmanager
async def query_api() -> AsyncIterator[QueryApi]:
    api = QueryApi()
    app = web.Application()
    app.router.add_get("/api/v1/query", api.handle)
    app.router.add_get("/moved/api/v1/query", api.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    api.url = f"http://monitor:{PASSWORD}@127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield api
    finally:
        api.stopping.set()
        await runner.cleanup()


class Reader:
    """A fleet reader of one rule, its sink and session, and its clock."""

    def __init__(self, url: str, telemetry: Telemetry, timeout_s: float = 5.0) -> None:
        self.now = 1000.0
        config = AlertFleet(
            prometheus_url=url, timeout_s=timeout_s, max_response_bytes=LIMIT, query_interval_s=15
        )
        self.reader = FleetReader(config, [RULE], telemetry, clock=lambda: self.now)
        self.got: list[tuple[str, str, str, list[float]]] = []
        self.revisions: list[str | None] = []
        self.telemetry = telemetry

    def sink(
        self, rule: str, service: str, cohort: str, histogram: list[float], revision: str | None
    ) -> None:
        self.got.append((rule, service, cohort, histogram))
        self.revisions.append(revision)

    async def read(
        self, session: aiohttp.ClientSession, after_s: float = 15
    ) -> list[tuple[str, str, str, list[float]]]:
        """One read, `after_s` after the last; what it handed to the sink."""
        before = len(self.got)
        self.now += after_s
        await self.reader.read_once(session, self.sink)
        return self.got[before:]

    def reads(self, outcome: str) -> float:
        value = self.telemetry.registry.get_sample_value(
            "rag_monitor_alert_fleet_reads_total", {"outcome": outcome}
        )
        return value or 0.0

    def ignored(self, reason: str) -> float:
        value = self.telemetry.registry.get_sample_value(
            "rag_monitor_alert_fleet_series_ignored_total", {"reason": reason}
        )
        return value or 0.0


def raw(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=body, status=status, headers=headers)

    return answer


def streamed(chunk: bytes, total: int, api: QueryApi) -> Answer:
    """`total` bytes of `chunk`, written while the client reads; what was written before it
    went away is recorded."""

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        written = 0
        try:
            while written < total:
                await response.write(chunk)
                written += len(chunk)
        except (ConnectionError, RuntimeError):
            pass
        api.written.append(written)
        return response

    return answer


def never_answers(api: QueryApi) -> Answer:
    async def answer(request: web.Request) -> web.Response:
        await api.stopping.wait()
        return web.Response(status=503)

    return answer


def redirect(to: str) -> Answer:
    async def answer(request: web.Request) -> web.Response:
        raise web.HTTPFound(to)

    return answer


NOT_UTF8 = b"\xff\xfe\x80" * (1 << 20)
GZIP_BOMB = gzip.compress(b"[" * (4 << 20))


def bad_answers(api: QueryApi) -> list[tuple[str, Any, str]]:
    """(what, answer, the outcome it is counted under)."""
    return [
        ("a JSON list", [1, 2, 3], "malformed"),
        ("a JSON string", "success", "malformed"),
        ("an error", {"status": "error", "errorType": "bad_data", "error": "x"}, "malformed"),
        (
            "a matrix",
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            "malformed",
        ),
        (
            "a vector that is no list",
            {"status": "success", "data": {"resultType": "vector", "result": 5}},
            "malformed",
        ),
        ("HTTP 500", raw(b"oops", status=500), "http_error"),
        (
            "HTTP 422 from Prometheus",
            raw(json.dumps({"status": "error", "errorType": "execution"}).encode(), status=422),
            "http_error",
        ),
        ("100 MB of '['", streamed(b"[" * (1 << 20), 100 << 20, api), "too_large"),
        ("100 MB that is not UTF-8", streamed(NOT_UTF8[: 1 << 20], 100 << 20, api), "too_large"),
        ("a length past the bound", raw(b"[" * (LIMIT + 1)), "too_large"),
        ("a gzip bomb", raw(GZIP_BOMB, headers={"Content-Encoding": "gzip"}), "too_large"),
        ("bytes that are not UTF-8", raw(NOT_UTF8[: LIMIT - 3]), "not_json"),
        ("JSON nested past the stack", raw(b"[" * (LIMIT - 1)), "not_json"),
        ("half a document", raw(json.dumps(counts(1, 1)).encode()[:-7]), "not_json"),
        (
            "a redirect to another host",
            redirect("http://attacker.invalid/api/v1/query"),
            "redirect",
        ),
    ]


async def test_every_bad_answer_is_counted_and_logged_and_the_next_read_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry)
        api.answers.append(counts(100, 10))
        assert await reader.read(session) == []  # the first read learns the counters
        passes, fails = 100, 10
        for what, answer, outcome in bad_answers(api):
            caplog.clear()
            before = reader.reads(outcome)
            api.answers.append(answer)
            # A minute on: a failure is logged once a minute per rule and outcome.
            with caplog.at_level(logging.WARNING, logger="monitor.alerts.fleet"):
                assert await reader.read(session, after_s=60) == [], what
            assert reader.reads(outcome) == before + 1, what
            (line,) = [r.getMessage() for r in caplog.records]
            assert f"failed ({outcome}:" in line and "127.0.0.1" in line, (what, line)
            assert len(line) < 400 and "[[[" not in line and "\\xff" not in line, (what, line)
            assert PASSWORD not in line, what
            # The next good answer counts what was added since the last good one.
            passes, fails = passes + 7, fails + 3
            api.answers.append(counts(passes, fails))
            assert await reader.read(session) == [("regression", "shop", "", [7.0, 3.0])], what
        # The streams were cut off near the bound, not read to their end.
        assert api.written and all(w < 100 << 20 for w in api.written)
        assert reader.reads("ok") == 1 + len(bad_answers(api))
        assert set(OUTCOMES) >= {o for _, _, o in bad_answers(api)}
        # Credentials reach the server as a header, never in the URL.
        assert all(a is not None and a.startswith("Basic ") for a in api.auth)


async def test_unreachable_and_silent_prometheus_fail_alone() -> None:
    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry, timeout_s=0.5)
        api.answers.extend([counts(10, 1), never_answers(api), counts(20, 2)])
        await reader.read(session)
        async with asyncio.timeout(30):  # bounded by the reader's own timeout
            assert await reader.read(session) == []
        assert reader.reads("timeout") == 1
        assert await reader.read(session) == [("regression", "shop", "", [10.0, 1.0])]
        port = api.url.rsplit(":", 1)[1]
    # The server is gone: nothing listens on its port now.
    closed = Reader(f"http://127.0.0.1:{port}", telemetry)
    async with aiohttp.ClientSession() as session:
        assert await closed.read(session) == []
    assert closed.reads("unreachable") == 1


async def test_bad_series_are_skipped_alone() -> None:
    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry)
        good = [series("a", "pass", 10), series("a", "fail", 1)]
        api.answers.append(vector(*good, series("b", "pass", 5)))
        await reader.read(session)
        api.answers.append(
            vector(
                series("a", "pass", 12),
                series("a", "fail", 2),
                {"metric": ["service", "shop"], "value": [1.0, "3"]},  # a metric that is a list
                {"metric": {"service": 5}, "value": [1.0, "3"]},
                {"metric": {"service": "shop"}, "value": "3"},
                {"metric": {"service": "shop"}},
                "a series that is text",
                series("b", "pass", "NaN"),
                series("b", "pass", "+Inf"),
                series("b", "pass", "-3"),
                series("b", "pass", "1e400"),
                series("b", "pass", "lots"),
            )
        )
        assert await reader.read(session) == [("regression", "shop", "", [2.0, 1.0])]
        assert reader.ignored("malformed") == 6
        assert reader.ignored("bad_value") == 4
        assert reader.reads("ok") == 2


async def test_counter_quirks_are_never_verdicts_and_a_restart_counts_from_the_new_start() -> None:
    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry)
        api.answers.append(counts(1000, 900))
        await reader.read(session)
        # One answer without the fail series: nothing new, and nothing counted again when
        # it is back.
        api.answers.append(vector(series("a", "pass", 1010)))
        assert await reader.read(session) == [("regression", "shop", "", [10.0, 0.0])]
        api.answers.append(counts(1020, 905))
        assert await reader.read(session) == [("regression", "shop", "", [10.0, 5.0])]
        # One answer reading the fail series lower: nothing; the next at the old value or
        # above counts what was added since the old value.
        api.answers.append(counts(1030, 600))
        assert await reader.read(session) == [("regression", "shop", "", [10.0, 0.0])]
        assert reader.ignored("fell") == 1
        api.answers.append(counts(1040, 907))
        assert await reader.read(session) == [("regression", "shop", "", [10.0, 2.0])]
        # A replica that restarted reads lower on every answer: counted from its new start.
        api.answers.extend([counts(5, 4), counts(9, 6)])
        assert await reader.read(session) == []
        assert await reader.read(session) == [("regression", "shop", "", [4.0, 2.0])]
        # A replica that appears later is learned, not counted: its count may predate us.
        api.answers.append(
            vector(*counts(19, 7)["data"]["result"], *counts(500, 500, "b")["data"]["result"])
        )
        assert await reader.read(session) == [("regression", "shop", "", [10.0, 1.0])]


async def test_a_redirect_on_the_same_host_is_followed() -> None:
    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry)
        same_host = api.url.split("@", 1)[1] + "/moved/api/v1/query"
        api.answers.extend([redirect("http://" + same_host), counts(10, 1)])
        await reader.read(session)
        api.answers.extend([redirect("/moved/api/v1/query"), counts(12, 2)])
        assert await reader.read(session) == [("regression", "shop", "", [2.0, 1.0])]
        assert reader.reads("ok") == 2 and reader.reads("redirect") == 0
        assert all(a is not None and a.startswith("Basic ") for a in api.auth)


async def test_a_rule_without_a_read_for_a_while_says_so() -> None:
    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry)
        started = reader.now
        assert reader.reader.stale() is None
        gauge = "rag_monitor_alert_fleet_last_read_timestamp_seconds"
        assert telemetry.registry.get_sample_value(gauge, {"rule": "regression"}) == started
        api.answers.append(counts(1, 1))
        await reader.read(session)
        good = reader.now
        assert telemetry.registry.get_sample_value(gauge, {"rule": "regression"}) == good
        for _ in range(4):
            api.answers.append([1])
            await reader.read(session)
        # Four query intervals (15 s) and more without a good read.
        stale = reader.reader.stale()
        assert stale is not None and "regression for 60s (malformed:" in stale
        assert PASSWORD not in stale
        assert telemetry.registry.get_sample_value(gauge, {"rule": "regression"}) == good
        api.answers.append(counts(2, 2))
        await reader.read(session)
        assert reader.reader.stale() is None


async def test_reads_resume_after_failures_under_run() -> None:
    telemetry = create_telemetry()
    async with query_api() as api:
        config = AlertFleet(prometheus_url=api.url, query_interval_s=0.5, max_response_bytes=LIMIT)
        reader = FleetReader(config, [RULE], telemetry)
        got: list[list[float]] = []
        api.answers.extend([counts(1, 1), "x", [1], raw(b"\xff"), counts(3, 2)])
        task = asyncio.create_task(reader.run(lambda rule, s, c, h, r: got.append(h)))
        try:
            await wait_until_async(lambda: got, 30, "a count after three failed reads")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert got == [[2.0, 1.0]]


async def test_readyz_names_a_fleet_rule_without_a_read_and_stays_ready() -> None:
    """A running monitor whose fleet Prometheus is not there: ready (a sidecar's readiness
    is its pod's), saying which rule has not read for how long."""
    async with query_api() as api:
        port = api.url.rsplit(":", 1)[1]
    now = [1_700_000_000.0]
    config = Config.model_validate(
        {
            "receivers": {"otlp": {"grpc": {"enabled": False}, "http": {"enabled": False}}},
            "evaluators": [{"name": "local_safety"}],
            "pipeline": {"processes": 0},
            "alerts": {
                "rules": [{"name": "regression", "evaluator": "local_safety", "baseline": {}}],
                "fleet": {"prometheus_url": f"http://user:{PASSWORD}@127.0.0.1:{port}"},
            },
        }
    )
    service = Service(config, serve_http=False, with_receivers=False, wall_clock=lambda: now[0])
    await service.start()
    try:
        unreachable = {"outcome": "unreachable"}
        metric = "rag_monitor_alert_fleet_reads_total"
        registry = service.telemetry.registry
        await wait_until_async(
            lambda: (registry.get_sample_value(metric, unreachable) or 0) >= 1,
            30,
            "a failed read",
        )
        assert service.ready() == (True, "ready")
        now[0] += 61
        ready, said = service.ready()
        assert ready
        assert said.splitlines()[0] == "ready"
        assert said.splitlines()[1].startswith(
            "alerts.fleet: no read of the counters from http://127.0.0.1:"
        )
        assert "regression for 61s (unreachable:" in said and PASSWORD not in said
    finally:
        await service.shutdown(5)


def test_check_config_probes_the_fleet_and_never_prints_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], closed_port: int
) -> None:
    """A wrong (but well-formed) URL fails `check-config --probe` naming the read that
    failed; a password in the URL shows in neither the summary nor the problem."""
    path = tmp_path / "monitor.yaml"
    closed = f"http://monitor:{PASSWORD}@127.0.0.1:{closed_port}"
    fleet = {"prometheus_url": closed, "timeout_s": 2}
    rules = [{"name": "regression", "evaluator": "local_groundedness", "baseline": {}}]
    path.write_text(yaml.safe_dump({"alerts": {"fleet": fleet, "rules": rules}}))
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr()
    assert "alerts judged on the fleet's counters in http://monitor:<masked>@127.0.0.1:" in out.out
    assert PASSWORD not in out.out + out.err
    assert main(["check-config", str(path), "--probe"]) == 1
    out = capsys.readouterr()
    assert out.err.startswith(
        "alerts.fleet.prometheus_url: reading rule regression's counters from http://127.0.0.1:"
    ), out.err
    assert "failed (unreachable:" in out.err and PASSWORD not in out.out + out.err


async def test_each_series_reaches_the_engine_with_its_evaluator_revision() -> None:
    """A rollout: replica a on revision r1, replica b on r2 (joined from each replica's
    `rag_monitor_evaluator_revision_info`); a replica without one counts without it."""

    def revised(instance: str, revision: str | None, passes: int, fails: int) -> list[Any]:
        out = counts(passes, fails, instance)["data"]["result"]
        if revision is not None:
            for item in out:
                item["metric"] = {**item["metric"], "revision": revision}
                del item["metric"]["__name__"]  # what a join answers
        return list(out)

    telemetry = create_telemetry()
    async with query_api() as api, aiohttp.ClientSession() as session:
        reader = Reader(api.url, telemetry)
        api.answers.append(
            vector(
                *revised("a", "r1", 10, 1), *revised("b", "r2", 10, 1), *revised("c", None, 1, 1)
            )
        )
        await reader.read(session)
        api.answers.append(
            vector(
                *revised("a", "r1", 20, 2), *revised("b", "r2", 15, 4), *revised("c", None, 2, 1)
            )
        )
        got = await reader.read(session)
    assert sorted(zip(reader.revisions, got, strict=True), key=str) == [
        ("r1", ("regression", "shop", "", [10.0, 1.0])),
        ("r2", ("regression", "shop", "", [5.0, 3.0])),
        (None, ("regression", "shop", "", [1.0, 0.0])),
    ]
    query = reader.reader._query_text(RULE)
    assert "group_left(revision) rag_monitor_evaluator_revision_info" in query
    assert query.endswith(
        ' or on(instance, job, evaluator) rag_monitor_evaluations_total{evaluator="local_groundedness",outcome=~"pass|fail"}'
    )
