"""The partitions a consumer-group member owns, as the rebalance callbacks say, and what
becomes of their open traces when they move.

Open traces are never released cut by a rebalance. On a revoke, their messages stay
unfinished (the commit stops before them) and the trace stage suspends them: however long
the group takes to rejoin, no span of theirs can come, so they are not released for
idleness. The assignment then says which partitions come back: one given straight back
carries on with its tracker (the client kept its read position) and its open traces age
again; the open traces of one given away are handed back to the trace stage unevaluated
(`abandon`), and the next owner reads their messages again whole. A trace that also holds
messages of a partition we keep stays open (deploy/kafka.md, "Rebalances"). Consumer
thread only (kafka-python runs the callbacks inside `poll`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from typing import Any, Protocol

from kafka import AsyncConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.net.selector import KernelEvent

from monitor.receivers.kafka._commits import Commits, finished_before
from monitor.receivers.kafka._loop import StageThroughLoop
from monitor.receivers.kafka._offsets import PartitionTracker
from monitor.receivers.kafka._status import LagGauge
from monitor.telemetry import RateLimitedLog

log = logging.getLogger(__name__)

# How long a revoke waits for the revoked partitions' messages in flight to finish;
# messages waiting in open traces are not waited for. The wait yields to the client's IO
# loop between looks, so heartbeats go on meanwhile.
REVOKE_GRACE_S = 3.0
_REVOKE_LOOK_S = 0.005

# What a revoke yields between its looks: seconds to wait, and its end value the commit it
# sent (a kafka-python future) or None.
Revoking = Generator[float, None, Any]


class Rebalanced(Protocol):
    """What the listener tells of a rebalance (`KafkaReceiver`)."""

    def _on_revoked(self, revoked: set[TopicPartition]) -> Revoking: ...

    def _on_assigned(self, assigned: set[TopicPartition]) -> None: ...

    def _commit_failed(self, exc: BaseException) -> None: ...


class Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    """Awaited by kafka-python's IO loop, so that the revocation's commit is done (and its
    outcome known) before the group is joined again, while heartbeats go on."""

    def __init__(self, receiver: Rebalanced) -> None:
        self._receiver = receiver

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        revoking = self._receiver._on_revoked(revoked)
        while True:
            try:
                delay = next(revoking)
            except StopIteration as done:
                sent = done.value
                break
            # The client's IO loop runs its other tasks (heartbeats) meanwhile, where a
            # blocking sleep would hold them all (kafka-python's own sleep event: its loop
            # is not asyncio's).
            await KernelEvent("_sleep", delay)
        if sent is not None:
            try:
                await sent
            except Exception as exc:
                self._receiver._commit_failed(exc)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._receiver._on_assigned(assigned)


class Partitions:
    """The partitions owned, each with its tracker (`trackers`); those revoked and not
    yet known to be given back or away (`leaving`). `settle` takes in the completions
    waiting for the consumer thread."""

    def __init__(
        self,
        stage: StageThroughLoop,
        commits: Commits,
        lag: LagGauge,
        quiet: RateLimitedLog,
        settle: Callable[[], None],
    ) -> None:
        self._stage = stage
        self._commits = commits
        self._lag = lag
        self._log = quiet
        self._settle = settle
        self.trackers: dict[TopicPartition, PartitionTracker] = {}
        # Ours by the rebalance callbacks: the client's assignment set still lists revoked
        # partitions until the next assignment arrives.
        self.assigned: set[TopicPartition] = set()
        self.leaving: dict[TopicPartition, PartitionTracker] = {}
        self.joined = False  # an assignment came since the last (re)connection

    def tracker(self, tp: TopicPartition, consumer: KafkaConsumer | None) -> PartitionTracker:
        tracker = self.trackers.get(tp)
        if tracker is None:
            tracker = PartitionTracker(tp.topic, tp.partition)
            tracker.skip = finished_before(consumer, tp, self._log)
            self.trackers[tp] = tracker
        return tracker

    def revoked(
        self, revoked: set[TopicPartition], consumer: KafkaConsumer | None, *, closing: bool
    ) -> Revoking:
        """Yields the seconds to wait before each new look at the messages in flight, and
        ends with the commit sent for the revoked partitions (a kafka-python future), if
        any. `closing`: the member is leaving at shutdown, which drained already."""
        # Open traces are not released here: one released now would be evaluated cut
        # short. Their messages stay unfinished, so the commit below stops before them.
        mine = [self.trackers[tp] for tp in revoked if tp in self.trackers]
        if mine:
            self._stage.suspend(mine)
        deadline = time.monotonic() + (0 if closing else REVOKE_GRACE_S)
        # Messages waiting in open traces finish only when more spans come: the grace is
        # for the others. Asked again after each wait, the completions taken in first:
        # queued messages join open traces while it runs.
        self._settle()
        while (
            mine
            and sum(t.outstanding for t in mine) > self._stage.holds(mine)
            and time.monotonic() < deadline
        ):
            yield _REVOKE_LOOK_S
            self._settle()
        sent = self._commits.commit(consumer, mine, wait=False)
        for tp in revoked:
            leaving = self.trackers.pop(tp, None)
            if leaving is not None:
                self.leaving[tp] = leaving
            self.assigned.discard(tp)
            self._lag.remove(tp)
        if revoked:
            log.info("kafka: partitions revoked: %s", names(revoked))
        return sent

    def assigned_now(self, assigned: set[TopicPartition]) -> None:
        self.joined = True
        self.assigned |= assigned
        # A partition given straight back carries on with its tracker: the client kept
        # its read position, so its unfinished messages are not read again.
        back = [self.leaving.pop(tp) for tp in assigned & self.leaving.keys()]
        for tracker in back:
            self.trackers[TopicPartition(tracker.topic, tracker.partition)] = tracker
        if back:
            self._stage.resume(back)
        self.give_away()
        log.info("kafka: partitions assigned: %s", names(assigned) or "none")

    def give_away(self) -> None:
        """The partitions revoked and not given back: their open traces are abandoned
        unevaluated, not released. One released or kept would be evaluated cut (now, or
        at idle timeout) while the next owner, which reads their unfinished, uncommitted
        messages again, evaluates it whole."""
        gone = list(self.leaving.values())
        self.leaving.clear()
        if not gone:
            return
        for tracker in gone:
            tracker.given_away = True  # what fails now was abandoned, not failed
        self._stage.abandon(gone)
        self._settle()  # the abandoned messages: never finished, no longer awaited
        for tracker in gone:
            tracker.revoked = True  # its late completions are ignored

    def hand_back(self) -> None:
        """Shutdown, like a revoke: the open traces made of our messages alone are handed
        back unevaluated (their messages stay uncommitted; the next owner reads them
        whole), never released cut. What else holds our messages open (a trace that also
        has spans from OTLP) is released, so that the drain does not wait for it.
        Partitions revoked and not assigned again yet are leaving with the rest."""
        self._stage.abandon([*self.trackers.values(), *self.leaving.values()])
        self._stage.flush()


def names(partitions: set[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(partitions))
