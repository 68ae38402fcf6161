"""Alert delivery: retries/backoff/permanent errors against a real HTTP webhook receiver,
and the engine's alerts going through a real Alertmanager (`prometheus-alertmanager`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.alerts import AlertEngine
from monitor.component import Alert
from monitor.config import AlertRule
from monitor.evaluators.base import EvalResult
from monitor.exporters.alertmanager import AlertSender
from monitor.records import RagRecord
from monitor.telemetry import Telemetry, create_telemetry
from tests._servers import alertmanager, free_port, http_json, webhook
from tests._wait import wait_until_async

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


async def test_webhook_gets_alertmanager_style_body_after_retries() -> None:
    t = create_telemetry()
    with webhook() as hook:
        hook.statuses = [503, 429]
        sender = AlertSender(t, webhooks=[(hook.url, {"X-Token": "s3cret"})], backoff_s=0.01)
        await sender.start()
        sender.notify([alert(), alert(service="cart")])
        await eventually(lambda: hook.bodies)
        await sender.close()
    (body,) = hook.bodies
    assert body["version"] == "4" and body["status"] == "firing"
    assert body["commonLabels"] == {"alertname": "hallucination", "severity": "page"}
    assert [a["labels"]["service"] for a in body["alerts"]] == ["shop", "cart"]
    assert body["alerts"][0]["endsAt"].endswith("Z")
    assert count(t, "alert_notifications", target="webhook", outcome="retried") == 4
    assert count(t, "alert_notifications", target="webhook", outcome="sent") == 2


async def test_client_error_is_permanent_and_counted() -> None:
    t = create_telemetry()
    with webhook() as hook:
        hook.statuses = [400]
        sender = AlertSender(t, webhooks=[(hook.url, {})], backoff_s=0.01)
        await sender.start()
        sender.notify([alert()])
        await sender.close()
        assert hook.bodies == [] and hook.statuses == []
    assert count(t, "alert_notifications", target="webhook", outcome="failed") == 1
    assert count(t, "dropped", stage="alerts", reason="rejected") == 1


async def test_unreachable_alertmanager_gives_up_after_max_attempts() -> None:
    t = create_telemetry()
    url = f"http://127.0.0.1:{free_port()}"
    sender = AlertSender(t, alertmanager_url=url, max_attempts=3, backoff_s=0.01, timeout_s=1)
    await sender.start()
    sender.notify([alert()])
    await sender.close()
    assert count(t, "alert_notifications", target="alertmanager", outcome="retried") == 2
    assert count(t, "alert_notifications", target="alertmanager", outcome="failed") == 1
    assert count(t, "dropped", stage="alerts", reason="delivery_failed") == 1


async def test_full_queue_drops_and_counts_without_blocking() -> None:
    t = create_telemetry()
    url = f"http://127.0.0.1:{free_port()}"
    sender = AlertSender(t, alertmanager_url=url, queue_size=2, max_attempts=1, close_timeout_s=0.5)
    for _ in range(5):  # not started: nothing drains the queue
        sender.notify([alert()])
    assert count(t, "dropped", stage="alerts", reason="queue_full") == 3
    assert count(t, "alert_notifications", target="alertmanager", outcome="dropped") == 3
    await sender.close()


async def test_engine_alert_reaches_webhook_through_real_alertmanager(tmp_path: Path) -> None:
    """Engine → AlertSender → Alertmanager v2 API → Alertmanager's webhook receiver."""
    t = create_telemetry()
    rule = AlertRule(
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
                RagRecord(request_id=str(i), service="shop", response="x"),
                {"local_groundedness": EvalResult(name="local_groundedness", passed=False)},
            )
        await eventually(lambda: any(a["status"] == "firing" for a in hook.alerts()))
        (active,) = await asyncio.to_thread(http_json, f"{am}/api/v2/alerts")
        assert active["labels"]["alertname"] == "hallucination"
        assert active["labels"]["service"] == "shop"
        assert active["generatorURL"] == "http://mon:9464/metrics"
        assert "Wilson" in active["annotations"]["description"]
        for i in range(1000):
            engine.emit(
                RagRecord(request_id=f"g{i}", service="shop", response="x"),
                {"local_groundedness": EvalResult(name="local_groundedness", passed=True)},
            )
        await eventually(lambda: any(a["status"] == "resolved" for a in hook.alerts()))
        await engine.shutdown(10)
    firing = next(a for a in hook.alerts() if a["status"] == "firing")
    assert firing["labels"]["generator"] == "rag-monitor" and firing["labels"]["severity"] == "page"
    assert count(t, "alert_notifications", target="alertmanager", outcome="sent") >= 2


async def test_close_gives_up_at_its_deadline_and_counts_what_was_left() -> None:
    t = create_telemetry()
    url = f"http://127.0.0.1:{free_port()}"
    sender = AlertSender(
        t, alertmanager_url=url, backoff_s=30, max_backoff_s=30, close_timeout_s=0.3
    )
    await sender.start()
    sender.notify([alert()])
    sender.notify([alert(), alert(service="cart")])
    await sender.close()
    assert count(t, "dropped", stage="alerts", reason="shutdown") == 3
    assert count(t, "alert_notifications", target="alertmanager", outcome="dropped") == 3
