"""Alert delivery: Alertmanager's v2 API and plain webhooks.

`AlertSender` is the engine's `Notifier`. Every target (the Alertmanager URL and each
`alerts.webhooks[]` entry) has its own sending queue (`SendingQueue`,
`monitor/exporters/_sending.py`: bounded, one worker), so a slow webhook never delays
Alertmanager. A batch is POSTed as

- Alertmanager: `POST {url}/api/v2/alerts` with a list of `postableAlert`s (labels,
  annotations, `startsAt`, `endsAt`, `generatorURL`); a resolved alert carries an
  `endsAt` in the past, a firing one an `endsAt` a few re-send intervals ahead;
- webhook: the body Alertmanager itself sends to webhook receivers (`version` "4",
  `status`, `alerts[]`, `commonLabels`, ...), so existing receivers understand it. As
  Alertmanager notifies them, a webhook is told of a firing alert once, again every
  `WEBHOOK_REPEAT_S` while it fires (Alertmanager's default `repeat_interval`), and of its
  resolve: not of the engine's re-sends, which keep Alertmanager's copy from expiring and
  would be a chat message a minute. A batch a webhook never took is told again at the next
  re-send.

Connection errors, timeouts, 429 and 5xx are retried under the retry policy
(`monitor/shared/retry.py`: exponential backoff with full jitter, capped; a `Retry-After` in
seconds or as an HTTP-date is honoured up to `_RETRY_AFTER_MAX_S`, an unreadable one is
counted in `rag_monitor_retry_after_invalid_total{client}` and ignored); other 4xx are
permanent. Outcomes are counted per alert in
`rag_monitor_alert_notifications_total{target,outcome}`; alerts that never arrive are
also counted in `rag_monitor_dropped_total{stage="alerts",reason}` (`queue_full`,
`shutting_down`, `rejected`, `delivery_failed`, `shutdown`) and logged (at most one line
per target and kind of trouble per `_LOG_INTERVAL_S`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import aiohttp

from monitor.component import GENERATOR, Alert
from monitor.exporters._sending import DropReason, PermanentError, RetryableError, SendingQueue
from monitor.shared.retry import InvalidRetryAfter, RetryPolicy, parse_retry_after
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)

_STAGE = "alerts"
_LOG_INTERVAL_S = 30.0
_RETRY_AFTER_MAX_S = 300.0
_QUEUE_BYTES = 16 << 20
TargetKind = Literal["alertmanager", "webhook"]
# How often a webhook is told again of an alert that still fires.
WEBHOOK_REPEAT_S = 4 * 3600.0
AlertKey = tuple[tuple[str, str], ...]
# Alerts the queue gave up on after taking them failed; those it never took were dropped.
_OUTCOMES: dict[DropReason, str] = {"rejected": "failed", "failed": "failed"}


@dataclass(frozen=True, slots=True)
class _Batch:
    """One POST: its body, how many alerts it carries, and their identities (labels)."""

    alerts: int
    body: bytes
    keys: tuple[AlertKey, ...] = ()


def _alerts(batch: _Batch) -> int:
    return batch.alerts


@dataclass
class _Target:
    kind: TargetKind
    url: str
    headers: dict[str, str]
    # A webhook's firing alerts it was told of, and when (`AlertSender._news`).
    told: dict[AlertKey, float] = field(default_factory=dict)


def _key(alert: Alert) -> AlertKey:
    return tuple(sorted(alert.labels.items()))


class AlertSender:
    """Queues alert batches per target and delivers them with retries.

    **Parameters:**
    - `alertmanager_url`: base URL of Alertmanager (`alerts.alertmanager.url`), or None.
    - `webhooks`: (url, headers) pairs (`alerts.webhooks[]`).
    - `queue_size`, `queue_bytes`: batches (and their bytes) waiting per target before
      new ones are dropped.
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
        queue_bytes: int = _QUEUE_BYTES,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        timeout_s: float = 10.0,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`wall_clock` is what a `Retry-After` HTTP-date and a webhook's repeat are
        measured from."""
        self._t = telemetry
        self._wall_clock = wall_clock
        targets: list[_Target] = []
        if alertmanager_url:
            url = alertmanager_url.rstrip("/") + "/api/v2/alerts"
            targets.append(_Target("alertmanager", url, {}))
        for url, headers in webhooks:
            targets.append(_Target("webhook", url, dict(headers)))
        retry = RetryPolicy(
            base_s=backoff_s,
            max_s=max_backoff_s,
            max_attempts=max_attempts,
            retry_after_max_s=_RETRY_AFTER_MAX_S,
        )
        rng = rng or random.Random()
        self._queues = [
            (
                target,
                SendingQueue[_Batch](
                    partial(self._post, target),
                    telemetry,
                    _STAGE,
                    name=f"{target.kind} {target.url}",
                    retry=retry,
                    max_items=queue_size,
                    max_bytes=queue_bytes,
                    count=_alerts,
                    reasons={"failed": "delivery_failed"},
                    on_sent=partial(self._sent, target),
                    on_retry=partial(self._retried, target),
                    on_drop=partial(self._dropped, target),
                    rng=rng,
                    sleep=sleep,
                    logger=log,
                ),
            )
            for target in targets
        ]
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._quiet = RateLimitedLog(log, _LOG_INTERVAL_S)

    async def start(self) -> None:
        if self._session is not None or not self._queues:
            return
        self._session = aiohttp.ClientSession(timeout=self._timeout)
        for _, queue in self._queues:
            await queue.start()

    def notify(self, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        now = self._wall_clock()
        for target, queue in self._queues:
            batch = alerts if target.kind == "alertmanager" else self._news(target, alerts, now)
            if not batch:
                continue
            body = json.dumps(self._body(target.kind, batch)).encode()
            keys = tuple(_key(alert) for alert in batch) if target.kind == "webhook" else ()
            queue.put(_Batch(len(batch), body, keys), len(body))

    @staticmethod
    def _news(target: _Target, alerts: Sequence[Alert], now: float) -> list[Alert]:
        """What webhook `target` is to be told of `alerts`: a firing alert it was not told
        of in the last `WEBHOOK_REPEAT_S`, and every resolve."""
        told = target.told
        for key in [key for key, at in told.items() if now - at >= WEBHOOK_REPEAT_S]:
            del told[key]  # told again if it still fires (fleet alerts end without a resolve)
        out = []
        for alert in alerts:
            key = _key(alert)
            if alert.status == "resolved":
                told.pop(key, None)
                out.append(alert)
            elif key not in told:
                told[key] = now
                out.append(alert)
        return out

    async def shutdown(self, deadline_s: float) -> None:
        """Deliver what is queued until `deadline_s`, then give up (counted). Safe without
        `start` and safe to call twice."""
        await asyncio.gather(*(queue.shutdown(deadline_s) for _, queue in self._queues))
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _post(self, target: _Target, batches: list[_Batch]) -> None:
        """POST one batch (the queue sends them one at a time). Raises `RetryableError`
        (worth retrying) or `PermanentError`."""
        assert self._session is not None
        (batch,) = batches
        headers = {"Content-Type": "application/json", **target.headers}
        try:
            async with self._session.post(target.url, data=batch.body, headers=headers) as resp:
                if resp.status < 300:
                    return
                text = (await resp.text())[:200]
                if resp.status == 429 or resp.status >= 500:
                    self._log(target, "retry", "HTTP %d: %s (will retry)", resp.status, text)
                    retry_after = self._retry_after(target, resp.headers.get("Retry-After"))
                    raise RetryableError(f"HTTP {resp.status}", retry_after)
                raise PermanentError(f"HTTP {resp.status}: {text}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            self._log(target, "retry", "unreachable: %s (will retry)", exc or type(exc).__name__)
            raise RetryableError(f"unreachable: {exc or type(exc).__name__}") from None

    def _retry_after(self, target: _Target, value: str | None) -> float | None:
        try:
            return parse_retry_after(value, now=self._wall_clock())
        except InvalidRetryAfter as exc:
            self._t.counter("retry_after_invalid").labels(target.kind).inc()
            self._log(target, "retry_after", "%s; backing off on our own", exc)
            return None

    @staticmethod
    def _body(kind: TargetKind, batch: Sequence[Alert]) -> Any:
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

    def _sent(self, target: _Target, batches: list[_Batch]) -> None:
        self._count(target, "sent", batches)

    def _retried(self, target: _Target, batches: list[_Batch], error: Exception) -> None:
        self._count(target, "retried", batches)

    def _dropped(self, target: _Target, batches: list[_Batch], reason: DropReason) -> None:
        self._count(target, _OUTCOMES.get(reason, "dropped"), batches)
        for batch in batches:  # never arrived: told at the next re-send
            for key in batch.keys:
                target.told.pop(key, None)

    def _count(self, target: _Target, outcome: str, batches: list[_Batch]) -> None:
        n = sum(batch.alerts for batch in batches)
        self._t.counter("alert_notifications").labels(target.kind, outcome).inc(n)

    def _log(self, target: _Target, trouble: str, message: str, *args: object) -> None:
        self._quiet.warning(
            f"{target.kind} {target.url} {trouble}",
            "%s %s: " + message,
            target.kind,
            target.url,
            *args,
        )
