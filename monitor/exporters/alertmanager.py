"""Alert delivery: Alertmanager's v2 API and plain webhooks.

`AlertSender` is the engine's `Notifier`. Every target (the Alertmanager URL and each
`alerts.webhooks[]` entry) has its own bounded queue and worker task, so a slow webhook
never delays Alertmanager. A batch is POSTed as

- Alertmanager: `POST {url}/api/v2/alerts` with a list of `postableAlert`s (labels,
  annotations, `startsAt`, `endsAt`, `generatorURL`); a resolved alert carries an
  `endsAt` in the past, a firing one an `endsAt` a few re-send intervals ahead;
- webhook: the body Alertmanager itself sends to webhook receivers (`version` "4",
  `status`, `alerts[]`, `commonLabels`, ...), so existing receivers understand it.

Connection errors, timeouts, 429 and 5xx are retried with exponential backoff and jitter
(honouring `Retry-After`); other 4xx are permanent. Outcomes are counted in
`rag_monitor_alert_notifications_total{target,outcome}`; batches that never arrive are
also counted in `rag_monitor_dropped_total{stage="alerts",reason}` and logged (at most
one line per target per `_LOG_INTERVAL_S`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from monitor.component import GENERATOR, Alert
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

_STAGE = "alerts"
_LOG_INTERVAL_S = 30.0
TargetKind = Literal["alertmanager", "webhook"]


class _Permanent(Exception):
    """The target refused the batch; retrying will not help."""


@dataclass
class _Target:
    kind: TargetKind
    url: str
    headers: dict[str, str]
    queue: asyncio.Queue[list[Alert]]
    task: asyncio.Task[None] | None = None
    in_flight: int = 0
    last_log: float = field(default=0.0)


class AlertSender:
    """Queues alert batches per target and delivers them with retries.

    **Parameters:**
    - `alertmanager_url`: base URL of Alertmanager (`alerts.alertmanager.url`), or None.
    - `webhooks`: (url, headers) pairs (`alerts.webhooks[]`).
    - `queue_size`: batches waiting per target before new ones are dropped.
    - `max_attempts`, `backoff_s`, `max_backoff_s`: retry policy per batch.
    - `timeout_s`: per-attempt HTTP timeout.
    """

    def __init__(
        self,
        telemetry: Telemetry,
        *,
        alertmanager_url: str | None = None,
        webhooks: Sequence[tuple[str, Mapping[str, str]]] = (),
        queue_size: int = 100,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        timeout_s: float = 10.0,
        close_timeout_s: float = 5.0,
    ) -> None:
        self._t = telemetry
        self._targets: list[_Target] = []
        if alertmanager_url:
            url = alertmanager_url.rstrip("/") + "/api/v2/alerts"
            self._targets.append(_Target("alertmanager", url, {}, asyncio.Queue(queue_size)))
        for url, headers in webhooks:
            self._targets.append(_Target("webhook", url, dict(headers), asyncio.Queue(queue_size)))
        self._max_attempts = max_attempts
        self._backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._close_timeout = close_timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        if self._session is not None or not self._targets:
            return
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        for target in self._targets:
            target.task = asyncio.create_task(self._worker(target), name=f"alerts-{target.kind}")

    def notify(self, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        for target in self._targets:
            try:
                target.queue.put_nowait(list(alerts))
            except asyncio.QueueFull:
                self._count(target, "dropped", len(alerts))
                self._t.dropped.labels(_STAGE, "queue_full").inc(len(alerts))
                self._log(target, "queue full; dropped %d alerts", len(alerts))

    async def close(self) -> None:
        """Deliver what is queued until `close_timeout_s`, then give up (counted)."""
        tasks = [t.task for t in self._targets if t.task is not None]
        if tasks:
            try:
                async with asyncio.timeout(self._close_timeout):
                    await asyncio.gather(*(t.queue.join() for t in self._targets))
            except TimeoutError:
                for target in self._targets:
                    left = target.in_flight
                    while not target.queue.empty():
                        left += len(target.queue.get_nowait())
                        target.queue.task_done()
                    if left:
                        self._count(target, "dropped", left)
                        self._t.dropped.labels(_STAGE, "shutdown").inc(left)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for target in self._targets:
                target.task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _worker(self, target: _Target) -> None:
        while True:
            batch = await target.queue.get()
            target.in_flight = len(batch)
            try:
                await self._deliver(target, batch)
            finally:
                target.in_flight = 0
                target.queue.task_done()

    async def _deliver(self, target: _Target, batch: list[Alert]) -> None:
        body = self._body(target.kind, batch)
        for attempt in range(1, self._max_attempts + 1):
            try:
                delay = await self._post(target, body)
            except _Permanent as exc:
                self._count(target, "failed", len(batch))
                self._t.dropped.labels(_STAGE, "rejected").inc(len(batch))
                self._log(target, "refused %d alerts: %s", len(batch), exc)
                return
            if delay is None:
                self._count(target, "sent", len(batch))
                return
            if attempt == self._max_attempts:
                break
            self._count(target, "retried", len(batch))
            backoff = min(self._max_backoff, self._backoff * 2 ** (attempt - 1))
            await asyncio.sleep(max(delay, backoff * random.uniform(0.5, 1.0)))
        self._count(target, "failed", len(batch))
        self._t.dropped.labels(_STAGE, "delivery_failed").inc(len(batch))
        self._log(target, "gave up on %d alerts after %d attempts", len(batch), self._max_attempts)

    async def _post(self, target: _Target, body: Any) -> float | None:
        """None when delivered; else how long the server asked us to wait (0 if it did not)."""
        assert self._session is not None
        try:
            async with self._session.post(target.url, json=body, headers=target.headers) as resp:
                if resp.status < 300:
                    return None
                text = (await resp.text())[:200]
                if resp.status == 429 or resp.status >= 500:
                    self._log(target, "HTTP %d: %s (will retry)", resp.status, text)
                    return _retry_after(resp.headers.get("Retry-After"))
                raise _Permanent(f"HTTP {resp.status}: {text}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._log(target, "unreachable: %s (will retry)", exc or type(exc).__name__)
            return 0.0

    @staticmethod
    def _body(kind: TargetKind, batch: list[Alert]) -> Any:
        if kind == "alertmanager":
            return [alert.to_alertmanager() for alert in batch]
        common = dict(batch[0].labels)
        for alert in batch[1:]:
            common = {k: v for k, v in common.items() if alert.labels.get(k) == v}
        status = "firing" if any(a.status == "firing" for a in batch) else "resolved"
        return {
            "version": "4",
            "receiver": GENERATOR,
            "status": status,
            "groupLabels": {},
            "commonLabels": common,
            "commonAnnotations": {},
            "externalURL": batch[0].generator_url,
            "alerts": [{"status": a.status, **a.to_alertmanager()} for a in batch],
        }

    def _count(self, target: _Target, outcome: str, n: int) -> None:
        self._t.alert_notifications.labels(target.kind, outcome).inc(n)

    def _log(self, target: _Target, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - target.last_log >= _LOG_INTERVAL_S:
            target.last_log = now
            log.warning("%s %s: " + message, target.kind, target.url, *args)


def _retry_after(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        return min(max(float(value), 0.0), 300.0)
    except ValueError:
        return 0.0
