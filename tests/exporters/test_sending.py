"""The exporters' sending queue on its own: its limits, what it retries and what it gives
up (each counted once, under the exporter's reason names), how a failed batch is split,
and a shutdown that sends what it can and waits for no retry past its deadline. The
exporters' own tests run it against real destinations (a disk, an HTTP server, a gRPC
collector)."""

from __future__ import annotations

import ast
import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from harness.sleep import RecordedSleep
from monitor.exporters._sending import DropReason, PermanentError, RetryableError, SendingQueue
from monitor.shared.retry import RetryPolicy
from monitor.telemetry import Telemetry, create_telemetry

STAGE = "testing"
FOREVER = RetryPolicy(base_s=0.01, max_s=0.05)
DELIVER_ALL_S = 60.0  # a deadline no passing test reaches


def dropped(t: Telemetry, reason: str) -> float:
    labels = {"stage": STAGE, "reason": reason}
    return t.registry.get_sample_value("rag_monitor_dropped_total", labels) or 0.0


class Destination:
    """Takes batches of at most `room` items; fails the rest with `error`, or all of them
    while `down`."""

    def __init__(self, room: int = 1 << 30, error: Exception | None = None) -> None:
        self.room = room
        self.error = error or RetryableError("no room")
        self.down = False
        self.taken: list[str] = []
        self.attempts: list[list[str]] = []

    async def __call__(self, batch: list[str]) -> None:
        self.attempts.append(list(batch))
        if self.down or len(batch) > self.room:
            raise self.error
        self.taken.extend(batch)


def queue(
    t: Telemetry, send: Callable[[list[str]], Awaitable[None]], **options: object
) -> tuple[SendingQueue[str], list[tuple[list[str], DropReason]]]:
    drops: list[tuple[list[str], DropReason]] = []
    settings: dict[str, object] = {"name": "test", "retry": FOREVER, "max_items": 100}
    settings.update(options)
    made: SendingQueue[str] = SendingQueue(
        send,
        t,
        STAGE,
        on_drop=lambda batch, reason: drops.append((batch, reason)),
        **settings,  # type: ignore[arg-type]
    )
    return made, drops


async def test_items_and_bytes_past_the_limits_are_refused_and_counted() -> None:
    t = create_telemetry()
    q, drops = queue(t, Destination(), max_items=3, max_bytes=100)
    assert q.put("a", 60) and q.put("b", 40)
    assert not q.put("c", 1)  # 101 bytes
    assert q.put("d", 0) and not q.put("e", 0)  # a fourth item
    assert (len(q), q.nbytes) == (3, 100)
    assert dropped(t, "queue_full") == 2 and drops == [(["c"], "queue_full"), (["e"], "queue_full")]
    await q.start()
    await q.shutdown(DELIVER_ALL_S)
    assert not q.put("f", 0)
    assert dropped(t, "shutting_down") == 1 and (len(q), q.nbytes) == (0, 0)


async def test_batches_are_sent_in_order_and_a_permanent_refusal_is_not_retried() -> None:
    t = create_telemetry()
    send = Destination(room=2, error=PermanentError("too large"))
    sent: list[list[str]] = []
    q, drops = queue(t, send, max_batch=3, on_sent=sent.append)
    for item in "abcd":
        q.put(item)
    await q.start()
    await q.shutdown(DELIVER_ALL_S)
    # "abc" is refused for good after one attempt; "d" goes on its own.
    assert send.attempts == [["a", "b", "c"], ["d"]] and sent == [["d"]]
    assert drops == [(["a", "b", "c"], "rejected")] and dropped(t, "rejected") == 3


async def test_a_failed_batch_is_halved_at_once_then_grows_back() -> None:
    t = create_telemetry()
    send = Destination(room=2)
    waits = RecordedSleep()
    q, drops = queue(t, send, max_batch=8, split_failed_batches=True, sleep=waits)
    for i in range(8):
        q.put(str(i))
    await q.start()
    await q.shutdown(DELIVER_ALL_S)
    assert [len(a) for a in send.attempts] == [8, 4, 2, 4, 2, 4, 2, 2]
    assert send.taken == [str(i) for i in range(8)]
    assert waits == [] and drops == []


async def test_without_splitting_the_policy_spends_its_attempts_then_the_batch_is_dropped() -> None:
    t = create_telemetry()
    send = Destination(room=1)
    waits = RecordedSleep()
    retried: list[list[str]] = []
    policy = RetryPolicy(base_s=1, max_s=2, max_attempts=3)
    q, drops = queue(
        t,
        send,
        retry=policy,
        max_batch=2,
        reasons={"failed": "gave_up"},
        on_retry=lambda batch, error: retried.append(batch),
        sleep=waits,
        rng=random.Random(3),
    )
    q.put("a")
    q.put("b")
    await q.start()
    await q.shutdown(DELIVER_ALL_S)
    assert send.attempts == [["a", "b"]] * 3 and retried == [["a", "b"]] * 2
    assert len(waits) == 2 and 0 <= waits[0] <= 1 and 0 <= waits[1] <= 2
    assert drops == [(["a", "b"], "failed")] and dropped(t, "gave_up") == 2


async def test_any_exception_from_send_is_retried_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = create_telemetry()
    failures = [KeyError("bug")]

    async def send(batch: list[str]) -> None:
        if failures:
            raise failures.pop()

    sent: list[list[str]] = []
    q, drops = queue(t, send, on_sent=sent.append, sleep=RecordedSleep())
    q.put("a")
    await q.start()
    await q.shutdown(DELIVER_ALL_S)
    assert sent == [["a"]] and drops == []
    assert "test: sending raised KeyError('bug')" in caplog.text


async def test_shutdown_waits_for_no_retry_past_its_deadline() -> None:
    """The destination asks for 600 s once shutdown has begun: the queue does not wait,
    and what it holds is dropped as left at shutdown."""
    t = create_telemetry()
    entered = asyncio.Event()
    answer = asyncio.Event()

    async def send(batch: list[str]) -> None:
        entered.set()
        await answer.wait()
        raise RetryableError("busy", retry_after=600)

    waits = RecordedSleep()
    policy = RetryPolicy(base_s=1, max_s=1000, retry_after_max_s=1000)
    q, drops = queue(t, send, retry=policy, sleep=waits)
    q.put("a")
    q.put("b")
    await q.start()
    await entered.wait()
    closing = asyncio.create_task(q.shutdown(DELIVER_ALL_S))
    await asyncio.sleep(0)  # one turn of the loop: the shutdown begins
    assert not q.put("late")
    answer.set()
    await closing
    assert waits == []
    assert drops[-1] == (["a", "b"], "shutdown") and dropped(t, "shutdown") == 2


async def test_at_the_deadline_an_attempt_in_flight_is_abandoned_and_counted() -> None:
    t = create_telemetry()
    entered = asyncio.Event()

    async def send(batch: list[str]) -> None:
        entered.set()
        await asyncio.Event().wait()  # the destination hangs

    q, drops = queue(t, send)
    q.put("a")
    await q.start()
    await entered.wait()
    assert q.in_flight == 1
    q.put("b")
    await q.shutdown(0.05)
    assert drops == [(["a", "b"], "shutdown")] and q.in_flight == 0
    await q.shutdown(0.05)  # twice: nothing more happens
    assert dropped(t, "shutdown") == 2


async def test_shutdown_without_start_counts_what_was_queued() -> None:
    t = create_telemetry()
    q, drops = queue(t, Destination())
    q.put("a")
    await q.shutdown(1)
    assert drops == [(["a"], "shutdown")]


def test_the_queue_knows_no_stage_and_no_exporter() -> None:
    """Shared machinery: it imports only the bounded queue, the retry policy and the
    telemetry."""
    source = Path(__file__).parents[2] / "monitor" / "exporters" / "_sending.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert {m for m in imported if m.split(".")[0] == "monitor"} == {
        "monitor.shared.bounded",
        "monitor.shared.retry",
        "monitor.telemetry",
    }
