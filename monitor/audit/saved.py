"""The audit window across restarts: what the audit sink keeps (each service's buckets of
counts, the sums of the traces still open, and the audited records awaiting a label) as JSON in its own state file beside the
alert rules' (`<alerts.state_file>.audit`), through the same `StateFile` (atomic writes,
bounded size, a corrupt, foreign or newer file moved aside, each counted in
`audit_state_loads_total{outcome}`).

Bounded: services are capped by `pipeline.max_services`, each keeps at most `BUCKETS`
buckets of its window, a bucket at most `MAX_SLICE_VALUES` values per dimension, the
records awaiting a label at most `audit.max_pending`, the open traces at most
`OPEN_TRACES`. Version 1 (before the per-trace sums) is read as one record per trace. What is restored is only what the same
evaluator and reference counted (another pair's counts would mix two estimates); a part
that cannot be restored (a wrong type, a negative count) is left out alone and counted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import Counter

from monitor.evidence import Tally, Trace, Traces
from monitor.records.where import DIMENSIONS, MAX_CHARS, where_value
from monitor.shared import json_pieces
from monitor.telemetry import Telemetry

# The file (`StateFile` of `monitor.alerts.state`, handed in by the wiring): its format
# tag, version and key, and its path, the alert state file's with SUFFIX added.
FORMAT = "rag-monitor-audit-state"
VERSION = 2
KEY = "audit"
SUFFIX = ".audit"
OPEN_TRACES = 200_000  # traces whose sums are kept, in all (`OpenTraces.put`)
# A count past this (2**53: whole numbers a float holds exactly) is not one the audit wrote.
MAX_COUNT = 2**53
# A request id or trace id (the sampling key) longer than this is not restored.
MAX_ID_CHARS = 512
TALLY_COUNTS = 6 + 2 * len(Traces.__slots__)  # a `Tally` as a flat list of counts


def counters(telemetry: Telemetry) -> tuple[Counter, Counter]:
    """The audit state file's reads at start and writes, by outcome (as the alerts')."""
    loads = telemetry.counter("audit_state_loads")
    return loads, telemetry.counter("audit_state_saves")


MAX_SLICE_VALUES = 20  # values of one dimension a service's bucket keeps apart


class State(Protocol):
    """The state file (`StateFile` of `monitor.alerts.state`): where it is, and its read
    (moving a corrupt or oversized file aside, counted)."""

    path: Path

    def load(self, now: float, max_age_s: float) -> dict[str, Any]: ...


@dataclass(slots=True)
class Pending:
    service: str
    bucket: int  # its trace's (`OpenTrace.bucket`)
    detector_defect: bool
    where: tuple[str, ...]  # the record's dimension values (`Where`)
    trace: str  # the record's sampling key (its trace id)


SumsKey = tuple[bool, str, str]
"""(audited, dimension, value) of a tally a trace's records count in: ("", "") the
service's total, else a slice."""


@dataclass(slots=True)
class OpenTrace:
    """A trace whose records may still come (or whose audited records may still get their
    label): the bucket all its records count in (the one it was first seen in, so a trace
    leaves the window whole) and its sums so far in each tally, which the next record's
    cross products with the trace's earlier ones need (`Traces.add`)."""

    bucket: int
    sums: dict[SumsKey, Trace] = field(default_factory=dict)


TraceKey = tuple[str, str]  # (service, trace id)


class Awaiting:
    """The audited records awaiting a label, by request id, each service's apart, oldest
    first; past `bound` in all (`put`), the service holding the most drops its oldest, so
    one service's flood of audited records never drops another's."""

    def __init__(self) -> None:
        self._services: dict[str, OrderedDict[str, Pending]] = {}
        self._service_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._service_of)

    def __iter__(self) -> Iterator[str]:
        """The request ids, each service's oldest first."""
        for held in list(self._services.values()):
            yield from list(held)

    def __reversed__(self) -> Iterator[str]:
        """The request ids, each service's newest first."""
        for held in list(self._services.values()):
            yield from list(reversed(held))

    def get(self, request_id: str) -> Pending | None:
        service = self._service_of.get(request_id)
        return None if service is None else self._services[service].get(request_id)

    def pop(self, request_id: str) -> Pending | None:
        service = self._service_of.pop(request_id, None)
        if service is None:
            return None
        held = self._services[service]
        pending = held.pop(request_id)
        if not held:
            del self._services[service]
        return pending

    def put(self, request_id: str, pending: Pending, bound: int) -> list[tuple[str, Pending]]:
        """`pending` as its service's newest; what was dropped to stay within `bound`."""
        self.pop(request_id)
        self._services.setdefault(pending.service, OrderedDict())[request_id] = pending
        self._service_of[request_id] = pending.service
        dropped = []
        while len(self._service_of) > bound:
            largest = max(self._services, key=lambda s: len(self._services[s]))
            oldest = next(iter(self._services[largest]))
            gone = self.pop(oldest)
            assert gone is not None
            dropped.append((oldest, gone))
        return dropped

    def drop_older(self, oldest: int) -> list[Pending]:
        """Forgets the records whose bucket is before `oldest` (each service's come oldest
        first); returns them."""
        dropped = []
        for service in list(self._services):
            held = self._services[service]
            while held:
                request_id, pending = next(iter(held.items()))
                if pending.bucket >= oldest:
                    break
                dropped.append(self.pop(request_id) or pending)
                if service not in self._services:
                    break
        return dropped

    def items(self) -> Iterator[tuple[str, Pending]]:
        for held in list(self._services.values()):
            yield from list(held.items())


class OpenTraces:
    """The open traces, each service's apart, least recently seen first; past `bound` in
    all (`put`), the service holding the most gives up its least recently seen, so one
    service's flood drops its own sums, never another's (a service under its fair share
    keeps every one of its open traces)."""

    def __init__(self) -> None:
        self._services: dict[str, OrderedDict[str, OpenTrace]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def get(self, key: TraceKey) -> OpenTrace | None:
        service, trace = key
        held = self._services.get(service)
        return None if held is None else held.get(trace)

    def put(self, key: TraceKey, opened: OpenTrace, bound: int) -> list[TraceKey]:
        """`opened` as `key`'s most recently seen; the keys dropped to stay within `bound`."""
        service, trace = key
        held = self._services.setdefault(service, OrderedDict())
        self._count += trace not in held
        held[trace] = opened
        held.move_to_end(trace)
        dropped = []
        while self._count > bound:
            largest = max(self._services, key=lambda s: len(self._services[s]))
            oldest, _ = self._services[largest].popitem(last=False)
            self._count -= 1
            if not self._services[largest]:
                del self._services[largest]
            dropped.append((largest, oldest))
        return dropped

    def drop_older(self, oldest: int) -> None:
        """Forgets the traces whose bucket is before `oldest`."""
        for service in list(self._services):
            held = self._services[service]
            for trace in [t for t, opened in held.items() if opened.bucket < oldest]:
                del held[trace]
                self._count -= 1
            if not held:
                del self._services[service]

    def items(self) -> Iterator[tuple[TraceKey, OpenTrace]]:
        for service, held in list(self._services.items()):
            for trace, opened in list(held.items()):
                yield (service, trace), opened

    def __reversed__(self) -> Iterator[TraceKey]:
        """Each service's keys, most recently seen first."""
        for service, held in list(self._services.items()):
            for trace in list(reversed(held)):
                yield service, trace


@dataclass(slots=True)
class Bucket:
    """A service's counts over one bucket of the window, in all and per slice (dimension,
    value); at most `MAX_SLICE_VALUES` values of a dimension per bucket."""

    total: Tally = field(default_factory=Tally)
    slices: dict[tuple[str, str], Tally] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)  # values so far per dimension

    def tallies(self, where: tuple[str, ...]) -> Iterator[tuple[tuple[str, str], Tally]]:
        """The tallies a record with dimension values `where` counts in, each with its key
        (("", "") the total)."""
        yield ("", ""), self.total
        for dimension, value in zip(DIMENSIONS, where, strict=True):
            if not value:
                continue  # not known for this record: in no slice of the dimension
            found = self.slices.get((dimension, value))
            if found is None:
                if self.values.get(dimension, 0) >= MAX_SLICE_VALUES:
                    continue
                self.values[dimension] = self.values.get(dimension, 0) + 1
                found = self.slices[(dimension, value)] = Tally()
            yield (dimension, value), found


Windows = dict[str, dict[int, Bucket]]


def _counts(tally: Tally) -> list[int]:
    head = astuple(tally)[:6]
    return [*head, *astuple(tally.unaudited_traces), *astuple(tally.audited_traces)]


def encode_bucket(bucket: Bucket) -> dict[str, Any]:
    return {
        "total": _counts(bucket.total),
        "slices": [[d, v, _counts(t)] for (d, v), t in bucket.slices.items()],
    }


def encode_pending(request_id: str, p: Pending) -> list[Any]:
    return [request_id, p.service, p.bucket, p.detector_defect, list(p.where), p.trace]


def encode_trace(key: tuple[str, str], o: OpenTrace) -> list[Any]:
    service, trace = key
    return [service, trace, o.bucket, [[*k, *astuple(sums)] for k, sums in o.sums.items()]]


def encode(
    evaluator: str,
    reference: str,
    windows: Windows,
    pending: Awaiting,
    traces: OpenTraces,
) -> dict[str, Any]:
    """The whole state at once (`kept.KeptState.save` encodes the same a slice at a time)."""
    return {
        "evaluator": evaluator,
        "reference": reference,
        "windows": {
            service: {str(index): encode_bucket(bucket) for index, bucket in buckets.items()}
            for service, buckets in windows.items()
        },
        "pending": [encode_pending(request_id, p) for request_id, p in pending.items()],
        "traces": [encode_trace(key, o) for key, o in traces.items()],
    }


def _upgrade_1(data: dict[str, Any]) -> None:
    """Version 1 counted each record as a trace of its own: no trace sums (zero excess),
    an awaiting record its own trace, no open traces."""
    windows = data.get("windows")
    for buckets in (windows if isinstance(windows, dict) else {}).values():
        for bucket in buckets.values() if isinstance(buckets, dict) else []:
            if not isinstance(bucket, dict):
                continue
            if isinstance(bucket.get("total"), list):
                bucket["total"] = [*bucket["total"], *[0] * (TALLY_COUNTS - 6)]
            for part in bucket.get("slices") or []:
                if isinstance(part, list) and len(part) == 3 and isinstance(part[2], list):
                    part[2] = [*part[2], *[0] * (TALLY_COUNTS - 6)]
    pending = data.get("pending")
    for item in pending if isinstance(pending, list) else []:
        if isinstance(item, list) and item:
            item.append(item[0])


UPGRADES: dict[int, Callable[[dict[str, Any]], None]] = {1: _upgrade_1}
# What the wiring's `StateFormat` is made of, after its name.
STATE_FORMAT = (FORMAT, VERSION, KEY, counters, UPGRADES, json_pieces.loads)


@dataclass(slots=True)
class Restored:
    windows: Windows = field(default_factory=dict)
    pending: Awaiting = field(default_factory=Awaiting)
    traces: OpenTraces = field(default_factory=OpenTraces)
    dropped: dict[str, int] = field(default_factory=dict)  # part → entries left out
    other: str | None = None  # why nothing was restored: another evaluator or reference


def decode(
    data: dict[str, Any],
    evaluator: str,
    reference: str,
    oldest: int,
    max_pending: int,
    *,
    newest: int | None = None,
    service_name: Callable[[str], str] = str,
) -> Restored:
    """What `data` (`encode`'s, read back) restores: buckets from `oldest` to `newest` (a
    bucket ahead of `newest` is dropped as a bad part: it would stay in the window for
    ever), the newest `max_pending` records awaiting a label and the newest `OPEN_TRACES`
    open traces whose bucket is in the window. Every count, bucket, name and id is bounded
    (`MAX_COUNT`, `MAX_ID_CHARS`, `MAX_CHARS`); a service name is kept only where
    `service_name` (the service label cap) keeps it as it is, a dimension's value only as a
    live record's would be (`where_value`). Each bucket, awaiting record and open trace
    that fails is dropped alone and counted."""
    out = Restored()
    if data.get("evaluator") != evaluator or data.get("reference") != reference:
        out.other = (
            f"it counted {str(data.get('evaluator'))[:80]!r} against "
            f"{str(data.get('reference'))[:80]!r}, not {evaluator!r} against {reference!r}"
        )
        return out
    names: dict[str, bool] = {}

    def known(service: Any) -> bool:
        if not isinstance(service, str) or not 0 < len(service) <= MAX_CHARS:
            return False
        if service not in names:
            names[service] = service_name(service) == service
        return names[service]

    def in_window(bucket: int) -> bool:
        return bucket >= oldest and (newest is None or bucket <= newest)

    def drop(part: str) -> None:
        out.dropped[part] = out.dropped.get(part, 0) + 1

    windows = data.get("windows")
    for service, buckets in (windows if isinstance(windows, dict) else {}).items():
        if not known(service) or not isinstance(buckets, dict):
            drop("window")
            continue
        kept: dict[int, Bucket] = {}
        for index, saved in buckets.items():
            try:
                bucket = _index(index)
                if newest is not None and bucket > newest:
                    raise ValueError(f"bucket {bucket} is ahead of now ({newest})")
                if bucket >= oldest:
                    kept[bucket] = _bucket(saved)
            except (AttributeError, KeyError, TypeError, ValueError):
                drop("window")
        if kept:
            out.windows[service] = kept
    pending = data.get("pending")
    for item in pending if isinstance(pending, list) else []:
        try:
            request_id, service, bucket, defect, where, trace = item
            if not (
                _id(request_id)
                and known(service)
                and _id(trace)
                and _bucket_index(bucket, newest)
                and isinstance(defect, bool)
                and isinstance(where, list)
                and len(where) == len(DIMENSIONS)
                and all(map(_where_value, where))
            ):
                raise ValueError("pending")
        except (TypeError, ValueError):
            drop("pending")
            continue
        if in_window(bucket):
            out.pending.put(
                request_id, Pending(service, bucket, defect, tuple(where), trace), max_pending
            )
    traces = data.get("traces")
    for item in traces if isinstance(traces, list) else []:
        try:
            service, trace, bucket, sums = item
            if not (
                known(service)
                and _id(trace)
                and _bucket_index(bucket, newest)
                and isinstance(sums, list)
            ):
                raise ValueError("traces")
            opened = OpenTrace(bucket)
            for audited, dimension, value, *counts in sums:
                if not isinstance(audited, bool) or dimension not in ("", *DIMENSIONS):
                    raise ValueError(dimension)
                if not _where_value(value) or len(counts) != 3:
                    raise ValueError(value)
                if not all(map(_count, counts)) or max(counts[1:]) > counts[0]:
                    raise ValueError("a trace's sums")
                opened.sums[(audited, dimension, value)] = Trace(*counts)
        except (TypeError, ValueError):
            drop("traces")
            continue
        if in_window(bucket):
            out.traces.put((service, trace), opened, OPEN_TRACES)
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _bucket_index(value: Any, newest: int | None) -> bool:
    """A bucket index of the saved form, not ahead of `newest`."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_COUNT:
        return False
    return newest is None or value <= newest


def _index(key: Any) -> int:
    """A window's bucket key (its index as a string); raises ValueError."""
    if not isinstance(key, str) or len(key) > 20:
        raise ValueError("bucket key")
    index = int(key)
    if abs(index) > MAX_COUNT:
        raise ValueError("bucket key")
    return index


def _where_value(value: Any) -> bool:
    """A dimension's value as a live record's is (`where_value`: unshown characters
    replaced, cut to `MAX_CHARS`), or none (`""`): never restored otherwise."""
    return isinstance(value, str) and value == where_value(value)


def _id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS


def _tally(counts: Any) -> Tally:
    if not isinstance(counts, list) or len(counts) != TALLY_COUNTS:
        raise ValueError(counts)
    if not all(map(_count, counts)):
        raise ValueError("a count is not a whole number from 0 to MAX_COUNT")
    if counts[1] > counts[0]:
        raise ValueError("more unaudited defects than unaudited records")
    size = len(Traces.__slots__)
    unaudited, audited = Traces(*counts[6 : 6 + size]), Traces(*counts[6 + size :])
    if unaudited.joined > counts[0] or audited.joined > sum(counts[2:6]):
        raise ValueError("more records joined a trace than were counted")
    unaudited_records, flagged, agree_pass, false_alarms, misses, agree_defect = counts[:6]
    head = (unaudited_records, flagged, agree_pass, false_alarms, misses, agree_defect)
    return Tally(*head, unaudited_traces=unaudited, audited_traces=audited)


def _bucket(saved: Any) -> Bucket:
    bucket = Bucket(_tally(saved["total"]))
    for dimension, value, counts in saved["slices"]:
        if dimension not in DIMENSIONS or not _where_value(value):
            raise ValueError(dimension)
        bucket.slices[(dimension, value)] = _tally(counts)
        bucket.values[dimension] = bucket.values.get(dimension, 0) + 1
        if bucket.values[dimension] > MAX_SLICE_VALUES:
            raise ValueError(dimension)
    return bucket
