"""Alert delivery: retries/backoff/permanent errors against a real HTTP webhook receiver,
and the engine's alerts going through a real Alertmanager (`prometheus-alertmanager`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from harness.servers import alertmanager, http_json, webhook
from harness.sleep import RecordedSleep
from harness.wait import wait_until_async
from monitor.alerts import AlertEngine
from monitor.component import Alert, Evaluated
from monitor.config import AbsoluteRule
from monitor.exporters.alertmanager import WEBHOOK_REPEAT_S, AlertSender
from monitor.records import RagRecord
from monitor.results import EvalResult
from monitor.telemetry import Telemetry, create_telemetry

pytestmark = pytest.mark.asyncio


def alert(status: str = "firing", service: str = "shop") -> Alert:
    now = datetime.now(UTC)
    return Alert(
        rule="hallucination",
        service=service,
        status=status,  # type: ignore[arg-type]
        labels={"alertname": "hallucination", "service": service, "severity": "page"},
        annotations={"summary": "too many unsupported answers"},
        starts_at=now - timedelta(minutes=1),
        ends_at=now + timedelta(minutes=4) if status == "firing" else now,
        generator_url="http://monitor:9464/metrics",
    )


def count(t: Telemetry, name: str, **labels: str) -> float:
    return t.registry.get_sample_value(f"rag_monitor_{name}_total", labels) or 0.0


async def eventually(check: Callable[[], object], within_s: float = 20.0) -> None:
    """Poll `check` (it reads state written by another thread or process)."""
    await wait_until_async(check, within_s, "the condition")


# A deadline no test reaches: shutdown returns once the queues are delivered.
DELIVER_ALL_S = 60.0


@contextlib.asynccontextmanager
async def throttling(retry_afters: list[str]) -> AsyncIterator[tuple[str, list[Any]]]:
    """An HTTP server answering 429 with each `Retry-After` in turn, then 200; yields its
    URL and the bodies it took."""
    answers = list(retry_afters)
    taken: list[Any] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        if answers:
            return web.Response(status=429, headers={"Retry-After": answers.pop(0)})
        taken.append(body)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/hook", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/hook", taken
    finally:
        await runner.cleanup()


async def test_retry_after_in_seconds_or_as_http_date_is_waited_for_and_capped() -> None:
    t = create_telemetry()
    wall = 1_800_000_000.0  # the time of day the date is read against: a whole second
    soon = format_datetime(datetime.fromtimestamp(wall, UTC) + timedelta(seconds=40), usegmt=True)
    waits = RecordedSleep()
    async with throttling(["7", soon, "86400"]) as (url, taken):
        sender = AlertSender(
            t, webhooks=[(url, {})], backoff_s=0.01, sleep=waits, wall_clock=lambda: wall
        )
        await sender.start()
        sender.notify([alert()])
        await eventually(lambda: taken)
        await sender.shutdown(DELIVER_ALL_S)
    assert waits[0] == 7
    assert waits[1] == 40  # the date, measured from our time of day
    assert waits[2] == 300  # a server cannot park a sender for a day
    assert count(t, "alert_notifications", target="webhook", outcome="sent") == 1


async def test_unreadable_retry_after_is_counted_logged_and_backed_off_on_our_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = create_telemetry()
    waits = RecordedSleep()
    async with throttling(["in a minute"]) as (url, taken):
        sender = AlertSender(t, webhooks=[(url, {})], backoff_s=0.01, sleep=waits)
        await sender.start()
        with caplog.at_level(logging.WARNING, logger="monitor.exporters.alertmanager"):
            sender.notify([alert()])
            await eventually(lambda: taken)
        await sender.shutdown(DELIVER_ALL_S)
    assert count(t, "retry_after_invalid", client="webhook") == 1
    assert len(waits) == 1 and 0 <= waits[0] <= 0.01
    assert "not an HTTP-date: 'in a minute'" in caplog.text


async def test_webhook_gets_alertmanager_style_body_after_retries() -> None:
    t = create_telemetry()
    with webhook() as hook:
        hook.statuses = [503, 429]
        waits = RecordedSleep()
        sender = AlertSender(
            t, webhooks=[(hook.url, {"X-Token": "s3cret"})], backoff_s=0.01, sleep=waits
        )
        await sender.start()
        sender.notify([alert(), alert(service="cart")])
        await eventually(lambda: hook.bodies)
        await sender.shutdown(DELIVER_ALL_S)
    (body,) = hook.bodies
    assert body["version"] == "4" and body["status"] == "firing"
    assert body["commonLabels"] == {"alertname": "hallucination", "severity": "page"}
    assert [a["labels"]["service"] for a in body["alerts"]] == ["shop", "cart"]
    assert body["alerts"][0]["endsAt"].endswith("Z")
    assert count(t, "alert_notifications", target="webhook", outcome="retried") == 4
    assert count(t, "alert_notifications", target="webhook", outcome="sent") == 2
    # Full jitter below base · 2^n: the first retry waits at most 0.01 s, the second 0.02 s.
    assert len(waits) == 2 and 0 <= waits[0] <= 0.01 and 0 <= waits[1] <= 0.02


async def test_client_error_is_permanent_and_counted() -> None:
    t = create_telemetry()
    with webhook() as hook:
        hook.statuses = [400]
        sender = AlertSender(t, webhooks=[(hook.url, {})], backoff_s=0.01)
        await sender.start()
        sender.notify([alert()])
        await sender.shutdown(DELIVER_ALL_S)
        assert hook.bodies == [] and hook.statuses == []
    assert count(t, "alert_notifications", target="webhook", outcome="failed") == 1
    assert count(t, "dropped", stage="alerts", reason="rejected") == 1


async def test_unreachable_alertmanager_gives_up_after_max_attempts(closed_port: int) -> None:
    t = create_telemetry()
    url = f"http://127.0.0.1:{closed_port}"
    waits = RecordedSleep()
    sender = AlertSender(
        t, alertmanager_url=url, max_attempts=3, backoff_s=0.01, timeout_s=1, sleep=waits
    )
    await sender.start()
    sender.notify([alert()])
    await sender.shutdown(DELIVER_ALL_S)
    assert len(waits) == 2
    assert count(t, "alert_notifications", target="alertmanager", outcome="retried") == 2
    assert count(t, "alert_notifications", target="alertmanager", outcome="failed") == 1
    assert count(t, "dropped", stage="alerts", reason="delivery_failed") == 1


async def test_full_queue_drops_and_counts_without_blocking(closed_port: int) -> None:
    t = create_telemetry()
    url = f"http://127.0.0.1:{closed_port}"
    sender = AlertSender(t, alertmanager_url=url, queue_size=2, max_attempts=1)
    for _ in range(5):  # not started: nothing drains the queue
        sender.notify([alert()])
    assert count(t, "dropped", stage="alerts", reason="queue_full") == 3
    assert count(t, "alert_notifications", target="alertmanager", outcome="dropped") == 3
    await sender.shutdown(0.5)


async def test_engine_alert_reaches_webhook_through_real_alertmanager(tmp_path: Path) -> None:
    """Engine → AlertSender → Alertmanager v2 API → Alertmanager's webhook receiver."""
    t = create_telemetry()
    rule = AbsoluteRule(
        name="hallucination",
        evaluator="local_groundedness",
        max_defect_rate=0.1,
        min_samples=20,
        severity="page",
    )
    with webhook() as hook, alertmanager(tmp_path, hook.url) as am:
        sender = AlertSender(t, alertmanager_url=am, backoff_s=0.05)
        engine = AlertEngine(
            [rule], t, [sender], evaluation_interval_s=0.2, generator_url="http://mon:9464/metrics"
        )
        await engine.start()
        for i in range(25):
            engine.emit(
                [
                    Evaluated(
                        RagRecord(request_id=str(i), service="shop", response="x"),
                        {"local_groundedness": EvalResult(name="local_groundedness", passed=False)},
                    )
                ]
            )
        await eventually(lambda: any(a["status"] == "firing" for a in hook.alerts()))
        (active,) = await asyncio.to_thread(http_json, f"{am}/api/v2/alerts")
        assert active["labels"]["alertname"] == "hallucination"
        assert active["labels"]["service"] == "shop"
        assert active["generatorURL"] == "http://mon:9464/metrics"
        assert "Wilson" in active["annotations"]["description"]
        for i in range(1000):
            engine.emit(
                [
                    Evaluated(
                        RagRecord(request_id=f"g{i}", service="shop", response="x"),
                        {"local_groundedness": EvalResult(name="local_groundedness", passed=True)},
                    )
                ]
            )
        await eventually(lambda: any(a["status"] == "resolved" for a in hook.alerts()))
        await engine.shutdown(DELIVER_ALL_S)
    firing = next(a for a in hook.alerts() if a["status"] == "firing")
    assert firing["labels"]["generator"] == "rag-monitor" and firing["labels"]["severity"] == "page"
    assert count(t, "alert_notifications", target="alertmanager", outcome="sent") >= 2


async def test_shutdown_gives_up_at_its_deadline_and_counts_what_was_left(closed_port: int) -> None:
    t = create_telemetry()
    url = f"http://127.0.0.1:{closed_port}"
    sender = AlertSender(t, alertmanager_url=url, backoff_s=30, max_backoff_s=30)
    await sender.start()
    sender.notify([alert()])
    sender.notify([alert(), alert(service="cart")])
    await sender.shutdown(0.3)
    assert count(t, "dropped", stage="alerts", reason="shutdown") == 3
    assert count(t, "alert_notifications", target="alertmanager", outcome="dropped") == 3


async def test_a_webhook_is_told_of_an_alert_once_not_at_each_re_send() -> None:
    """The engine re-sends a firing alert every minute (so Alertmanager's copy does not
    expire); a webhook — a chat, a pager bridge — is told as Alertmanager tells one: once,
    again after `WEBHOOK_REPEAT_S`, and of the resolve. A batch it never took (refused) is
    told at the next re-send. Alertmanager itself gets every re-send."""
    t = create_telemetry()
    wall = [1_000.0]
    with webhook() as hook, webhook() as am:
        hook.statuses = [400]  # the first batch is refused: dropped
        sender = AlertSender(
            t, alertmanager_url=am.url, webhooks=[(hook.url, {})], wall_clock=lambda: wall[0]
        )
        await sender.start()
        refused = partial(count, t, "alert_notifications", target="webhook", outcome="failed")
        sent = partial(count, t, "alert_notifications", target="webhook", outcome="sent")
        sender.notify([alert(service="店")])
        await eventually(lambda: refused() == 1)
        for _ in range(3):  # re-sends a minute apart: the first delivers what was refused
            wall[0] += 60
            sender.notify([alert(service="店")])
        wall[0] += 60
        sender.notify([alert(service="店"), alert(service="cart")])
        await eventually(lambda: sent() == 2)
        sender.notify([alert("resolved", service="店"), alert(service="cart")])
        wall[0] += WEBHOOK_REPEAT_S
        sender.notify([alert(service="cart")])
        await eventually(lambda: sent() == 4)
        await sender.shutdown(DELIVER_ALL_S)
    told = [[(a["status"], a["labels"]["service"]) for a in body["alerts"]] for body in hook.bodies]
    assert told == [
        [("firing", "店")],
        [("firing", "cart")],
        [("resolved", "店")],
        [("firing", "cart")],
    ]
    assert len(am.bodies) == 7  # every notify, re-sends included
