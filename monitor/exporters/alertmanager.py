"""Alert delivery: Alertmanager's v2 API and plain webhooks.

`AlertSender` is the engine's `Notifier`. Every target (the Alertmanager URL and each
`alerts.webhooks[]` entry) has its own bounded queue and worker task, so a slow webhook
never delays Alertmanager. A batch is POSTed as

- Alertmanager: `POST {url}/api/v2/alerts` with a list of `postableAlert`s (labels,
  annotations, `startsAt`, `endsAt`, `generatorURL`); a resolved alert carries an
  `endsAt` in the past, a firing one an `endsAt` a few re-send intervals ahead;
- webhook: the body Alertmanager itself sends to webhook receivers (`version` "4",
  `status`, `alerts[]`, `commonLabels`, ...), so existing receivers understand it.

Connection errors, timeouts, 429 and 5xx are retried under the retry policy
(`monitor/retry.py`: exponential backoff with full jitter, capped; a `Retry-After` in
seconds or as an HTTP-date is honoured up to `_RETRY_AFTER_MAX_S`, an unreadable one is
counted in `rag_monitor_retry_after_invalid_total{client}` and ignored); other 4xx are
permanent. Outcomes are counted in `rag_monitor_alert_notifications_total{target,outcome}`;
batches that never arrive are also counted in `rag_monitor_dropped_total{stage="alerts",
reason}` and logged (at most one line per target and kind of trouble per `_LOG_INTERVAL_S`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from monitor.component import GENERATOR, Alert
from monitor.retry import InvalidRetryAfter, Retry, RetryPolicy, parse_retry_after
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

_STAGE = "alerts"
_LOG_INTERVAL_S = 30.0
_RETRY_AFTER_MAX_S = 300.0
TargetKind = Literal["alertmanager", "webhook"]


class _Permanent(Exception):
    """The target refused the batch; retrying will not help."""


class _Transient(Exception):
    """The batch did not arrive; another attempt may. `retry_after`: the wait the server
    asked for, if it asked readably."""

    def __init__(self, retry_after: float | None) -> None:
        super().__init__()
        self.retry_after = retry_after


@dataclass
class _Target:
    kind: TargetKind
    url: str
    headers: dict[str, str]
    queue: asyncio.Queue[list[Alert]]
    task: asyncio.Task[None] | None = None
    in_flight: int = 0


class AlertSender:
    """Queues alert batches per target and delivers them with retries.

    **Parameters:**
    - `alertmanager_url`: base URL of Alertmanager (`alerts.alertmanager.url`), or None.
    - `webhooks`: (url, headers) pairs (`alerts.webhooks[]`).
    - `queue_size`: batches waiting per target before new ones are dropped.
    - `max_attempts`, `backoff_s`, `max_backoff_s`: retry policy per batch.
    - `timeout_s`: per-attempt HTTP timeout.
    - `rng`, `sleep`: the backoff's randomness and its wait (tests inject them).
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
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._t = telemetry
        self._targets: list[_Target] = []
        if alertmanager_url:
            url = alertmanager_url.rstrip("/") + "/api/v2/alerts"
            self._targets.append(_Target("alertmanager", url, {}, asyncio.Queue(queue_size)))
        for url, headers in webhooks:
            self._targets.append(_Target("webhook", url, dict(headers), asyncio.Queue(queue_size)))
        self._retry = RetryPolicy(
            base_s=backoff_s,
            max_s=max_backoff_s,
            max_attempts=max_attempts,
            retry_after_max_s=_RETRY_AFTER_MAX_S,
        )
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._quiet = RateLimitedLog(log, _LOG_INTERVAL_S)

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
                self._log(target, "queue_full", "queue full; dropped %d alerts", len(alerts))

    async def shutdown(self, deadline_s: float) -> None:
        """Deliver what is queued until `deadline_s`, then give up (counted). Safe without
        `start` and safe to call twice."""
        tasks = [t.task for t in self._targets if t.task is not None]
        if tasks:
            try:
                async with asyncio.timeout(deadline_s):
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
        retry = Retry(self._retry, self._rng)
        while True:
            try:
                await self._post(target, body)
            except _Permanent as exc:
                self._count(target, "failed", len(batch))
                self._t.dropped.labels(_STAGE, "rejected").inc(len(batch))
                self._log(target, "refused", "refused %d alerts: %s", len(batch), exc)
                return
            except _Transient as exc:
                delay = retry.next_delay(exc.retry_after)
                if delay is None:
                    break
                self._count(target, "retried", len(batch))
                await self._sleep(delay)
                continue
            self._count(target, "sent", len(batch))
            return
        self._count(target, "failed", len(batch))
        self._t.dropped.labels(_STAGE, "delivery_failed").inc(len(batch))
        self._log(
            target,
            "gave_up",
            "gave up on %d alerts after %d attempts",
            len(batch),
            retry.failures,
        )

    async def _post(self, target: _Target, body: Any) -> None:
        """POST `body`. Raises `_Transient` (worth retrying) or `_Permanent`."""
        assert self._session is not None
        try:
            async with self._session.post(target.url, json=body, headers=target.headers) as resp:
                if resp.status < 300:
                    return
                text = (await resp.text())[:200]
                if resp.status == 429 or resp.status >= 500:
                    self._log(target, "retry", "HTTP %d: %s (will retry)", resp.status, text)
                    raise _Transient(self._retry_after(target, resp.headers.get("Retry-After")))
                raise _Permanent(f"HTTP {resp.status}: {text}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._log(target, "retry", "unreachable: %s (will retry)", exc or type(exc).__name__)
            raise _Transient(None) from None

    def _retry_after(self, target: _Target, value: str | None) -> float | None:
        try:
            return parse_retry_after(value)
        except InvalidRetryAfter as exc:
            self._t.retry_after_invalid.labels(target.kind).inc()
            self._log(target, "retry_after", "%s; backing off on our own", exc)
            return None

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

    def _log(self, target: _Target, trouble: str, message: str, *args: object) -> None:
        self._quiet.warning(
            f"{target.kind} {target.url} {trouble}",
            "%s %s: " + message,
            target.kind,
            target.url,
            *args,
        )
