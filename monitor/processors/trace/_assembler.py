"""Trace assembly: buffer spans by trace id until the trace is whole.

A trace is released when
- `root_ended`: its root span has arrived (spans are exported when they end, so the root
  has ended) and every span's parent is present — the children it references were seen;
- `idle_timeout`: no span of it arrived for `idle_timeout_s` (a child lost in transit, a
  root whose parent lives in another service without the OTLP "parent is remote" flag);
  unless the caller keeps it (`expire`'s `keep`: its spans cannot come now, their source
  is suspended), or a span its spans name as parent has not come (a step still running:
  OTLP carries only ended spans) and `idle_timeout_s + missing_parent_wait_s` since its
  first span have not passed, when it ages again from then. A service whose last trace
  so kept was released still missing that parent (a parent that never comes) has its
  traces cut at the idle timeout, until one of its traces is whole;
- `evicted`: `max_open_traces` traces are open and a new one starts, or the open traces
  hold more than `max_open_bytes` of spans; the least recently active ones are released
  early (counted);
- `flushed`: the source of its spans asked for it (a Kafka partition is handed to another
  replica);
- `shutdown`: the monitor is stopping;
- `events_only`: only GenAI log events of it arrived, never a span, and it was idle for
  `idle_timeout_s` or pushed out of the bound such traces have of their own (below).

A trace can also be abandoned (`abandon`): forgotten unevaluated when the source of its
spans hands them back (a Kafka partition moved to another replica, which reads them
again whole).

GenAI instrumentations may write a model call's messages only as OTLP log events (event
spans, `monitor.spans.LOG_EVENT_KEY`), which the SDK exports apart from the spans, before
or after them. Events for a trace still being assembled always join it. A trace that
becomes whole while one of its GenAI model calls has no output yet, on the span or from an
event (`monitor.extraction.awaits_log_events`), waits up to `log_events_wait_s` for its
events, and is released (`root_ended`) as soon as every such call has its output event
(the conventions table's `output_events`, the last its instrumentation writes) or the grace
ends. A service whose traces waited out `QUIET_AFTER` graces in a row without any event
(content capture off: nothing will come) has its traces released at once, until it sends
an event again. Events can also arrive before their spans, or for
traces whose spans never come: a trace holding nothing but events lives apart from the
others, bounded to a quarter of `max_open_traces` and of `max_open_bytes`, so that any
number of events for unknown trace ids never pushes out a trace that has spans. It joins
the others with its first span; pushed out of its own bound or idle, it is released as
`events_only` (its events are never evaluated) and not remembered as released, so spans
of it that come later start it afresh.

Spans can end after their trace's root (a callback that traces a model call once the
request returned; the next export batch of the app's SDK): a whole trace waits
`late_spans_wait_s` after it became whole before it is released (`root_ended`; the wait
holds it among the open traces, within their bounds), and spans that come meanwhile join
it. A sender (`_late_spans`: a service's replica, told by the address the receiver saw,
then the instance id it claims) whose last whole traces waited in vain is released at
once, until a span of it ends after the root or misses its record. Spans of
a trace already released are dropped, and reported with their service and what released
their trace (`on_late`), so one request never becomes two partial records (only released
traces are remembered: spans of an abandoned one start it afresh); the memory of released
ids is bounded in time and by `max_open_traces` (`_released`). The assembler is single-threaded, synchronous and pure
apart from the `on_drop` and `on_late` callbacks; the trace stage runs it on the loop.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from monitor.conventions import LOG_EVENTS, OUTPUT_EVENTS, VERDICT_EVENTS
from monitor.extraction import awaits_log_events
from monitor.processors.trace._in_a_row import InARow
from monitor.processors.trace._late_spans import Sender, sender_of
from monitor.processors.trace._released import Released
from monitor.spans import LOG_EVENT_KEY, Span

Trigger = Literal["root_ended", "idle_timeout", "evicted", "flushed", "shutdown", "events_only"]
TRIGGERS: tuple[Trigger, ...] = (
    "root_ended",
    "idle_timeout",
    "evicted",
    "flushed",
    "shutdown",
    "events_only",
)
# The share of `max_open_traces` and `max_open_bytes` that traces holding nothing but log
# events may take.
EVENTS_ONLY_SHARE = 4
MAX_SPANS_PER_TRACE = 5_000  # a runaway trace (spans opened in a loop) holds bounded memory


@dataclass(slots=True)
class _Open:
    last_seen: float
    source: str
    spans: dict[str, Span] = field(default_factory=dict)
    missing_parents: set[str] = field(default_factory=set)
    has_root: bool = False
    size: int = 0
    service: str = ""  # the root's
    sender: Sender = ("", "", "")  # who sent its root (`_late_spans`)
    events_only: bool = False  # no span yet, only GenAI log events
    # GenAI model calls without their output yet, and the calls whose output event came.
    awaiting: set[str] | None = None
    answered: set[str] | None = None
    heard: bool = False  # a log event of it arrived
    root_at: float | None = None  # when its root arrived
    whole_at: float | None = None  # when it was first whole
    first_seen: float = 0.0
    # The spans its GenAI log events belong to: one not arrived yet is a model call that
    # started (its input events are written then) and has not ended.
    event_parents: set[str] | None = None


@dataclass(slots=True)  # not frozen: one is built per trace, and frozen init costs 3x
class FinishedTrace:
    trace_id: str
    spans: list[Span]
    trigger: Trigger
    source: str  # the receiver that delivered the trace's last span
    # Released by `idle_timeout` while a span its spans name as parent had not arrived.
    incomplete: bool = False


class TraceAssembler:
    def __init__(
        self,
        *,
        idle_timeout_s: float,
        max_open_traces: int,
        max_open_bytes: int = 1 << 62,
        on_drop: Callable[[str, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_events_wait_s: float = 0.0,
        log_events: frozenset[str] = LOG_EVENTS,
        late_spans_wait_s: float = 0.0,
        on_late: Callable[[str, str, int], None] | None = None,
        open_calls_wait_s: float = 0.0,
        missing_parent_wait_s: float = 0.0,
    ) -> None:
        """`log_events`: the events the receivers take log records as (event spans by
        these names are log events, not spans). `on_late(service, outcome, n)`: `n` spans
        of `service` came after their trace's root: `joined` it within the wait, or missed
        its record, released by `outcome` (a trigger)."""
        self._idle = idle_timeout_s
        self._late_wait = late_spans_wait_s
        self._open_wait = open_calls_wait_s
        self._parent_wait = missing_parent_wait_s
        # Services whose last trace kept for a missing parent never saw it (bounded).
        self._parents_lost: OrderedDict[str, None] = OrderedDict()
        self._on_late = on_late or (lambda service, outcome, n: None)
        self._log_events = log_events
        self._log_wait = log_events_wait_s
        # Services whose last graces ended without an event → how many in a row.
        self._quiet: InARow[str] = InARow(max_open_traces)
        self._punctual: InARow[Sender] = InARow(max_open_traces)  # on time, by sender
        self._held: OrderedDict[str, float] = OrderedDict()  # whole traces → release time
        self._max = max_open_traces
        self._max_bytes = max_open_bytes
        self._bytes = 0
        self._on_drop = on_drop or (lambda reason, n: None)
        self._clock = clock
        self._open: OrderedDict[str, _Open] = OrderedDict()
        # Released traces → what released them and who sent their root (`_pairs`: one of each).
        self._released: Released[tuple[Trigger, Sender]] = Released(max_open_traces, clock)
        self._pairs: dict[tuple[Trigger, Sender], tuple[Trigger, Sender]] = {}
        self._events_only: OrderedDict[str, _Open] = OrderedDict()  # only log events, own bounds
        self._events_only_bytes = 0
        self._max_events_only = max(1, max_open_traces // EVENTS_ONLY_SHARE)
        self._max_events_only_bytes = max_open_bytes // EVENTS_ONLY_SHARE

    @property
    def open_traces(self) -> int:
        return len(self._open) + len(self._events_only)

    @property
    def open_bytes(self) -> int:
        """Approximate bytes held by the spans of open traces (`Span.size`)."""
        return self._bytes + self._events_only_bytes

    def is_open(self, trace_id: str) -> bool:
        """Whether spans of `trace_id` are buffered (the Kafka receiver tracks which
        messages a trace holds, to commit their offsets once it is evaluated)."""
        return trace_id in self._open or trace_id in self._events_only

    def add(
        self,
        spans: Iterable[Span],
        source: str,
        now: float | None = None,
        address: str | None = None,
    ) -> list[FinishedTrace]:
        """Buffer spans; return the traces they completed (and any evicted to make room).
        `address`: the client's that sent them, where the receiver knows it."""
        now = self._clock() if now is None else now
        finished: list[FinishedTrace] = []
        touched: dict[str, _Open] = {}
        late: Tally[tuple[str, str]] = Tally()  # (service, outcome) → spans after the root
        late_senders: set[Sender] = set()  # whose released traces had spans come late
        oversize = 0
        for span in spans:
            event = span.name in self._log_events and span.attribute(LOG_EVENT_KEY) is not None
            # A verdict an app sends about its trace says nothing of whether its model
            # calls send their content as log events.
            content = event and span.name not in VERDICT_EVENTS
            if content:
                self._quiet.reset(span.service)
            trace_id = span.trace_id
            trace = (
                touched.get(trace_id) or self._open.get(trace_id) or self._events_only.get(trace_id)
            )
            if trace is None:
                released = self._released.get(trace_id)
                if released is not None:
                    late[span.service, released[0]] += 1
                    late_senders.add(released[1])
                    continue
                trace = _Open(now, source, events_only=event, first_seen=now)
                self._admit(trace_id, trace, touched, finished)
            elif trace.events_only and not event:  # its first span: it joins the others
                del self._events_only[trace_id]
                self._events_only_bytes -= trace.size
                trace.events_only = False
                self._bytes += trace.size
                self._admit(trace_id, trace, touched, finished)
            touched[trace_id] = trace
            if len(trace.spans) >= MAX_SPANS_PER_TRACE:
                oversize += 1
                continue
            span_id = span.span_id
            # A span sent twice is counted twice: the bound errs on the safe side.
            trace.size += span.size
            if trace.events_only:
                self._events_only_bytes += span.size
            else:
                self._bytes += span.size
            trace.spans[span_id] = span
            trace.missing_parents.discard(span_id)
            if trace.root_at is not None and trace.root_at < now and not event:
                late[span.service, "joined"] += 1
            if event:
                trace.heard = trace.heard or content
                if trace.event_parents is None:
                    trace.event_parents = set()
                trace.event_parents.add(span.parent_span_id)
                if span.name in OUTPUT_EVENTS:
                    if trace.answered is None:
                        trace.answered = set()
                    trace.answered.add(span.parent_span_id)
            elif self._log_wait > 0 and awaits_log_events(span):
                if trace.awaiting is None:
                    trace.awaiting = set()
                trace.awaiting.add(span_id)
            if span.is_root:
                trace.has_root = True
                trace.service = span.service
                trace.sender = sender_of(span, address)
                if trace.root_at is None:
                    trace.root_at = now
            elif span.parent_span_id not in trace.spans:
                trace.missing_parents.add(span.parent_span_id)
        for trace_id, trace in touched.items():
            trace.last_seen = now
            trace.source = source
            if trace.events_only:
                self._events_only.move_to_end(trace_id)
            elif trace.has_root and not trace.missing_parents:
                if trace.whole_at is None:
                    trace.whole_at = now
                    if self._parents_lost:
                        self._parents_lost.pop(trace.service, None)
                release_at = self._release_at(trace)
                if release_at > now:
                    if self._held.get(trace_id) != release_at:
                        self._held.pop(trace_id, None)
                        self._held[trace_id] = release_at
                    self._open.move_to_end(trace_id)
                    continue
                del self._open[trace_id]
                finished.append(self._release(trace_id, trace, "root_ended"))
            else:
                self._open.move_to_end(trace_id)
        while self._bytes > self._max_bytes and self._open:
            old_id, old = self._open.popitem(last=False)
            finished.append(self._release(old_id, old, "evicted"))
        while self._events_only_bytes > self._max_events_only_bytes and self._events_only:
            old_id, old = self._events_only.popitem(last=False)
            finished.append(self._release(old_id, old, "events_only"))
        if late:
            for (service, outcome), n in late.items():
                self._on_late(service, outcome, n)
            for sender in late_senders:  # they send late spans after all
                self._punctual.reset(sender)
            missed = sum(n for (_, outcome), n in late.items() if outcome != "joined")
            if missed:
                self._on_drop("late_span", missed)
        if oversize:
            self._on_drop("trace_too_large", oversize)
        return finished

    def expire(
        self, now: float | None = None, keep: Callable[[str], bool] | None = None
    ) -> list[FinishedTrace]:
        """Release whole traces whose wait for log events is over, and traces idle for
        `idle_timeout_s` (oldest first) unless `keep(trace_id)`: such a trace is kept and
        ages again from `now`."""
        now = self._clock() if now is None else now
        finished = []
        while self._held:
            trace_id, release_at = next(iter(self._held.items()))
            if now < release_at:
                break
            del self._held[trace_id]
            held = self._open.pop(trace_id, None)
            if held is not None:
                if held.awaiting:
                    self._waited_out(held)
                self._late_wait_over(held)
                finished.append(self._release(trace_id, held, "root_ended"))
        idle: tuple[tuple[OrderedDict[str, _Open], Trigger], ...] = (
            (self._open, "idle_timeout"),
            (self._events_only, "events_only"),
        )
        for traces, trigger in idle:
            while traces:
                trace_id, trace = next(iter(traces.items()))
                if now - trace.last_seen < self._idle:
                    break
                if (
                    (keep is not None and keep(trace_id))
                    or self._calls_open(trace, now)
                    or self._parent_coming(trace, now)
                ):
                    trace.last_seen = now
                    traces.move_to_end(trace_id)
                    continue
                del traces[trace_id]
                if trace.missing_parents and self._parent_wait > 0 and not trace.events_only:
                    self._parent_lost(trace)
                # A whole trace waits for late spans no longer than the idle timeout.
                whole = trace_id in self._held and not trace.missing_parents
                finished.append(self._release(trace_id, trace, "root_ended" if whole else trigger))
        return finished

    def drain(self) -> list[FinishedTrace]:
        """Release everything still open (shutdown)."""
        return self._release_all("shutdown")

    def flush(self) -> list[FinishedTrace]:
        """Release everything still open now (the spans' source is handing its input
        away); later spans of these traces count as late."""
        return self._release_all("flushed")

    def _release_all(self, trigger: Trigger) -> list[FinishedTrace]:
        finished = [self._release(tid, trace, trigger) for tid, trace in self._open.items()]
        finished += [self._release(t, trace, trigger) for t, trace in self._events_only.items()]
        self._open.clear()
        self._events_only.clear()
        return finished

    def _admit(
        self,
        trace_id: str,
        trace: _Open,
        touched: dict[str, _Open],
        finished: list[FinishedTrace],
    ) -> None:
        """A new trace among the open ones, or among those of nothing but events; the
        least recently active one pushed out to stay within that bound."""
        traces, bound, trigger = self._pool(trace)
        if len(traces) >= bound:
            old_id, old = traces.popitem(last=False)
            touched.pop(old_id, None)
            finished.append(self._release(old_id, old, trigger))
        traces[trace_id] = trace

    def _pool(self, trace: _Open) -> tuple[OrderedDict[str, _Open], int, Trigger]:
        """Where `trace` is kept, its bound in traces, and the trigger of being pushed out."""
        if trace.events_only:
            return self._events_only, self._max_events_only, "events_only"
        return self._open, self._max, "evicted"

    def abandon(self, trace_ids: Iterable[str]) -> int:
        """Forget these open traces without releasing them: not evaluated, and not
        remembered as released, so spans of them that arrive later start them afresh
        instead of counting as late. Returns how many spans were dropped."""
        spans = 0
        for trace_id in trace_ids:
            trace = self._open.pop(trace_id, None) or self._events_only.pop(trace_id, None)
            if trace is None:
                continue
            self._held.pop(trace_id, None)
            self._take_bytes(trace)
            spans += len(trace.spans)
        return spans

    def _calls_open(self, trace: _Open, now: float) -> bool:
        """Whether idle expiry keeps a trace because a model call of it is still open: a
        GenAI log event of it belongs to a span that has not arrived (spans are exported
        when they end; instrumentations write a call's input events as it starts), for
        up to `open_calls_wait_s` since the trace's first span or event."""
        if not trace.event_parents or now - trace.first_seen >= self._open_wait:
            return False
        return any(parent not in trace.spans for parent in trace.event_parents)

    def _parent_coming(self, trace: _Open, now: float) -> bool:
        """Whether idle expiry keeps a trace because a span its spans name as parent has
        not come, within `idle_timeout_s + missing_parent_wait_s` of its first span, and
        its service's last trace so kept did see its parent (a trace of nothing but log
        events has its own bound: `events_only`)."""
        if trace.events_only or not trace.missing_parents:
            return False
        if now - trace.first_seen >= self._idle + self._parent_wait:
            return False
        return not self._parents_lost or _service(trace) not in self._parents_lost

    def _parent_lost(self, trace: _Open) -> None:
        """A trace released while a parent was missing: its service's next traces are cut
        at the idle timeout until one of them is whole."""
        self._parents_lost[_service(trace)] = None
        self._parents_lost.move_to_end(_service(trace))
        while len(self._parents_lost) > self._max:
            self._parents_lost.popitem(last=False)

    def _release_at(self, trace: _Open) -> float:
        """When a whole trace is released: `late_spans_wait_s` after it became whole, or
        `log_events_wait_s` while a model call of it waits for its output event."""
        whole_at = trace.whole_at or 0.0
        late_wait = self._late_wait if self._awaits_late(trace) else 0.0
        if self._waits(trace):
            return whole_at + max(self._log_wait, late_wait)
        return whole_at + late_wait

    def _awaits_late(self, trace: _Open) -> bool:
        """Whether a whole trace waits for late spans: one of its spans ended after its
        root, or the sender of its root is not known to be punctual."""
        if self._late_wait <= 0:
            return False
        if not self._punctual.reached(trace.sender):
            return True
        return self._ends_after_root(trace)

    def _ends_after_root(self, trace: _Open) -> bool:
        """Whether a span of the trace (not a log event) ended after its root."""
        spans = trace.spans.values()
        root_end = max((s.end_unix_nano for s in spans if s.is_root), default=None)
        if root_end is None:
            return False
        events = self._log_events
        return any(
            s.end_unix_nano > root_end
            for s in spans
            if not (s.name in events and s.attribute(LOG_EVENT_KEY) is not None)
        )

    def _late_wait_over(self, trace: _Open) -> None:
        """A whole trace waited for late spans: its sender was on time, or late."""
        if self._late_wait <= 0:
            return
        if self._ends_after_root(trace):
            self._punctual.reset(trace.sender)
        else:
            self._punctual.count(trace.sender)

    def _waits(self, trace: _Open) -> bool:
        """Whether a whole trace waits for log events: a model call of it has no output
        yet, and its service is not known to send none."""
        if not trace.awaiting or self._quiet.reached(trace.service):
            return False
        return not trace.awaiting <= (trace.answered or set())

    def _waited_out(self, trace: _Open) -> None:
        """A grace ended: a service whose traces hear no event graces in a row is quiet."""
        if trace.heard:
            self._quiet.reset(trace.service)
        else:
            self._quiet.count(trace.service)

    def _take_bytes(self, trace: _Open) -> None:
        if trace.events_only:
            self._events_only_bytes -= trace.size
        else:
            self._bytes -= trace.size

    def _release(self, trace_id: str, trace: _Open, trigger: Trigger) -> FinishedTrace:
        self._held.pop(trace_id, None)
        self._take_bytes(trace)
        if not trace.events_only:  # spans of it that come later start it afresh
            if len(self._pairs) >= self._max:
                self._pairs.clear()
            pair = self._pairs.setdefault((trigger, trace.sender), (trigger, trace.sender))
            self._released.add(trace_id, pair)
        incomplete = trigger == "idle_timeout" and bool(trace.missing_parents)
        spans = list(trace.spans.values())
        return FinishedTrace(trace_id, spans, trigger, trace.source, incomplete)


def _service(trace: _Open) -> str:
    """The service of a trace that may have no root: its root's, else its first span's."""
    if trace.service:
        return trace.service
    return next((s.service for s in trace.spans.values()), "")
