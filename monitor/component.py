"""What pipeline components promise each other: the lifecycle and the consumer interfaces.

The pipeline is receivers → trace stage → evaluation stage → sinks. Each component is
built with the next one's interface and knows nothing else about it, as a Collector
receiver knows only its next consumer:

- a receiver decodes bytes into a `Delivery` (the spans or records of one request or
  message, or the records of a run of messages) and hands deliveries to a
  `TraceConsumer` (`consume`, whose answer is the backpressure);
- the trace stage assembles traces and decides sampling once, and hands each sampled
  trace (`SampledTrace`, its spans as assembled) or record (`SampledRecord`) to a
  `RecordConsumer`, the decision travelling with it;
- the evaluation stage extracts the traces' records and scores them in one task per
  batch, tells each trace's `on_extracted` what became of it, and emits results to its
  sinks.

Acknowledgement flows back the same way: every delivery, trace and record carries an optional
`OnDone`, called exactly once, with True when everything built from it is finished —
evaluated or deliberately skipped, and its results line written — or False when it was
abandoned (the process stopped first). The Kafka receiver commits offsets on it.

Finished records go to `ResultSink`s (metrics, results file, alert engine, OTLP events);
the alert engine hands the `Alert`s it decides on to `Notifier`s.

Lifecycle, the same for every component (receivers, stages, the process pool, sinks,
HTTP servers, the judge client, notifiers): `start()` returns quickly (it may do
nothing); `shutdown(deadline_s)` is idempotent, safe without `start()`, waits at most
`deadline_s` seconds and returns nothing (what it had to abandon is read from the
component, e.g. the evaluation stage's `abandoned`). The service starts downstream first
and stops upstream first, so a stage drains into a consumer that still accepts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from monitor.extraction import TraceRecords, Unreadable
from monitor.records import RagRecord, RawRecord
from monitor.records.limits import record_bytes
from monitor.results import Results
from monitor.spans import RequestSpans, Span

OnDone = Callable[[bool], None]
"""Called once, on the event loop: True = finished (and persisted), False = abandoned or
failed. Must be cheap (the Kafka receiver appends to a deque its consumer thread reads)."""
Invalid = tuple[RawRecord, str, str]
"""A record that failed validation: `(record, reason, detail)`."""
OnRejected = Callable[[list[Invalid]], None]
"""Told `(record, reason, detail)` for each record of a delivery that failed validation
when sampled; called at most once per delivery, before its `on_done`, on the event loop
(the Kafka receiver dead-letters the record's message from its consumer thread, found
through the record's `metadata`)."""
OnFailed = Callable[["RagRecord | RawRecord", str], None]
"""Told `(record, detail)` for a record of a delivery that failed in the evaluation stage
(given up after a second try, not abandoned at shutdown), before the delivery's
`on_done`; on the event loop, so cheap. The record is the one delivered
(the Kafka receiver finds and dead-letters its message through its `metadata`)."""


class Component(Protocol):
    """A receiver, stage, pool, server or client (see the lifecycle above)."""

    async def start(self) -> None:
        """Returns quickly; may do nothing."""

    async def shutdown(self, deadline_s: float) -> None:
        """Idempotent and safe without `start`; returns within `deadline_s` seconds."""


@dataclass(slots=True)
class Delivery:
    """The spans or records of one request or message, as a receiver decoded them, or
    the records of several messages acknowledged together (a Kafka partition's run of
    one-record messages: acknowledging each message costs more than reading it)."""

    source: str  # the receiver, a metric label: otlp_grpc, otlp_http, kafka, replay
    spans: list[Span] = field(default_factory=list)
    # Validated records, or `RawRecord`s validated only if sampled.
    records: Sequence[RagRecord | RawRecord] = field(default_factory=list)
    on_done: OnDone | None = None
    on_rejected: OnRejected | None = None
    on_failed: OnFailed | None = None
    # Where the spans came from (Kafka topic, partition, offset, key, headers): merged
    # into the metadata of the records extracted from the traces they start (only records
    # that are evaluated carry it). Records carry their own (`RawRecord.metadata`).
    metadata: Mapping[str, str] | None = None
    # What the receiver may hand deliveries back by (`OriginConsumer.abandon`; the Kafka
    # receiver: the partition's assignment). Read only for deliveries with `on_done`.
    origin: Hashable | None = None
    # The spans of an OTLP protobuf request, still serialized: the trace stage builds
    # those of the traces some evaluator may sample and counts the others.
    unbuilt: RequestSpans | None = None
    # `spans` are GenAI log events (`/v1/logs`): the trace stage keeps those of the
    # traces some evaluator may sample (and a service's first, see its README).
    log_events: bool = False


@dataclass(frozen=True, slots=True)
class Refused:
    """The trace stage did not take a delivery: the receiver pushes back (HTTP 503 +
    `Retry-After`, gRPC `UNAVAILABLE`, a paused Kafka partition, replay waits) and still
    owns it. `reason`: "queue_full" (the evaluation stage holds what its bounds allow) or
    "shutting_down"."""

    reason: str

    def __bool__(self) -> bool:
        return False


class Accepted:
    """The trace stage took a delivery (truthy, where `Refused` is falsy)."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True


ACCEPTED = Accepted()


class TraceConsumer(Protocol):
    """The trace stage, as receivers see it. On the event loop only: a receiver running
    in a thread of its own (Kafka's) calls through the loop and waits for the answer."""

    def refuses(self) -> bool:
        """Whether a delivery would be refused now: a cheap check before reading a
        request body. True counts one refusal, as the caller then turns the request away
        with a retryable status."""

    def consume(self, deliveries: Sequence[Delivery]) -> Accepted | Refused:
        """Take all of `deliveries` or none, at once: their spans are assembled and the
        traces they complete sampled before it returns. `Refused` (counted by the stage)
        leaves the deliveries to the caller, whose `on_done` will not be called."""

    async def put(self, deliveries: Sequence[Delivery]) -> bool:
        """`consume`, waiting for room instead of refusing (for receivers that read at
        their own pace, such as replay). False once the stage is stopping."""


class OriginConsumer(TraceConsumer, Protocol):
    """The trace stage, as a receiver that may hand its input back sees it (Kafka: a
    delivery's `origin` is its partition's assignment)."""

    def flush(self) -> None:
        """Release every open trace now, evaluated on what it has (the Kafka receiver's
        graceful shutdown: its messages should be finished and committed)."""

    def holds(self, origins: Collection[Hashable]) -> int:
        """How many acknowledged deliveries of `origins` wait in open traces: a receiver
        about to give them away waits for the others to finish, not for these."""

    def suspend(self, origins: Collection[Hashable]) -> None:
        """The receiver stopped reading `origins` and does not know yet whether it will
        read them again (a Kafka partition revoked, the next assignment pending): open
        traces holding an acknowledged delivery of theirs are not released for idleness
        until `resume` or `abandon` names those origins (their spans cannot come
        meanwhile); they still count in the assembly bounds."""

    def resume(self, origins: Collection[Hashable]) -> None:
        """The receiver reads `origins` again (a partition given back): their open traces
        age again, from now."""

    def abandon(self, origins: Collection[Hashable]) -> None:
        """Hand back what came from `origins` and is not evaluated yet: every open trace
        all of whose acknowledged deliveries (those with `on_done`) came from `origins` is
        dropped unevaluated (counted, logged) and those deliveries' `on_done` get False:
        the receiver gave their input away, and its next reader reads them again whole.
        A trace that also holds spans of an acknowledged delivery from elsewhere stays
        open."""


class TraceObserver(Protocol):
    """Sees what the trace stage made of each trace (for `/debug/records`); called on
    the event loop, so it must be quick."""

    def extracted(self, record: RagRecord, source: str) -> None:
        """A record was extracted (or received) and goes to evaluation."""

    def no_record(self, trace_id: str, service: str, source: str, reason: str, spans: int) -> None:
        """A trace (or a record, `spans` 0) gave nothing to evaluate, and why."""

    def kept_spans(self, trace_id: str, spans: Sequence[Span]) -> None:
        """The spans of a sampled trace that gave no record, an incomplete or a suspect one
        (told before its records and its `no_record`)."""


@dataclass(slots=True)
class SampledRecord:
    """A record on its way to evaluation, with the sampling decision made for it."""

    record: RagRecord
    source: str
    sampled: frozenset[str]  # the evaluators that sample it (never empty)
    on_done: OnDone | None = None
    # Told why when the record failed in the evaluation stage (not when abandoned),
    # before `on_done(False)`: its delivery's `on_failed`, bound to the record.
    on_failed: Callable[[str], None] | None = None

    @property
    def size(self) -> int:
        """What the record holds in memory, about (`record_bytes`)."""
        return record_bytes(self.record)


@dataclass(slots=True)
class SampledTrace:
    """A released trace that some evaluator samples, on its way to extraction and
    evaluation: its spans as assembled, with the sampling decision made for it."""

    spans: Sequence[Span]
    source: str
    sampled: frozenset[str]  # the evaluators that sample it (never empty)
    # Told what extraction made of it (its records with `metadata` merged in), once,
    # before any of them is evaluated: the trace stage counts them, or why there are
    # none. Called on the event loop.
    on_extracted: Callable[[TraceRecords | Unreadable], None]
    # Called once every record built from it is finished (at once when it gives none).
    on_done: OnDone | None = None
    # Merged into the metadata of its records (the delivery's: Kafka topic, offset…).
    metadata: Mapping[str, str] | None = None
    size: int = 0  # bytes of its spans as received


class RecordConsumer(Protocol):
    """The evaluation stage, as the trace stage sees it (on the event loop)."""

    @property
    def full(self) -> bool:
        """Whether it holds what its bounds allow: the trace stage refuses new deliveries
        until it has room again."""

    def take(self, items: Sequence[SampledRecord | SampledTrace]) -> int:
        """Take items in order, at once, past the bounds if need be (they come from
        deliveries already accepted); returns how many were taken: fewer only once it
        stopped accepting (the caller still owns the rest)."""

    async def room(self) -> bool:
        """Return once it is not `full`: True, or False once it stopped accepting."""


@dataclass(frozen=True, slots=True)
class Held:
    """What one alert rule's baseline of an evaluator holds (`AlertEngine.baselines`): the
    evaluator revision it was learned with, and the revision scoring in shadow beside it
    with when its first pair came (None and 0: none)."""

    revision: str | None
    shadow: str | None = None
    shadow_since: float = 0.0


@dataclass(frozen=True, slots=True)
class Evaluated:
    """One record's results as sinks get them; most read `record` and `results` only."""

    record: RagRecord
    results: Results
    # By evaluator, its next revision's verdict scored in shadow (`evaluators[].next`): only
    # the alert engine reads it (their offset before the switch); never the service's.
    shadow: Results = field(default_factory=dict)


class ResultSink(Protocol):
    """Every consumer of finished records (metrics, audit, results file, alert engine,
    OTLP events): the evaluation stage hands each one every batch it finished, in one
    `emit` call, so that per-series work is shared by the batch."""

    async def start(self) -> None: ...

    def emit(self, batch: Sequence[Evaluated]) -> Sequence[asyncio.Future[bool]] | None:
        """Must not block. A sink that persists results returns one future per record of
        `batch`, in order: True once its results are written, False if they never will
        be (the sink shut down first); the record's `on_done` waits for it, so a Kafka
        offset is not committed before its results line is in the file. Other sinks
        queue what they send, count their drops, return None."""

    async def shutdown(self, deadline_s: float) -> None:
        """Flush what is queued, within `deadline_s`; writes still owed then resolve
        False."""


GENERATOR = "rag-monitor"
"""The `generator` label of every alert."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One notification: an alert rule's state for one service at one moment."""

    rule: str
    service: str
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime
    generator_url: str

    def to_alertmanager(self) -> dict[str, object]:
        """The `postableAlert` object of Alertmanager's v2 API."""
        return {
            "labels": self.labels,
            "annotations": self.annotations,
            "startsAt": _iso(self.starts_at),
            "endsAt": _iso(self.ends_at),
            "generatorURL": self.generator_url,
        }


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Notifier(Protocol):
    """Delivers alerts (Alertmanager, webhooks); `notify` never blocks: it queues and
    counts what it drops."""

    async def start(self) -> None: ...

    def notify(self, alerts: Sequence[Alert]) -> None: ...

    async def shutdown(self, deadline_s: float) -> None: ...
