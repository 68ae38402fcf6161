"""The audit window across restarts: what the audit sink keeps (each service's buckets of
counts, the sums of the traces still open, and the audited records awaiting a label) as JSON in its own state file beside the
alert rules' (`<alerts.state_file>.audit`), through the same `StateFile` (atomic writes,
bounded size, a corrupt file moved aside, a foreign one ignored, each counted in
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
from typing import Any, Protocol

from prometheus_client import Counter

from monitor.audit.estimate import Tally, Trace, Traces
from monitor.records.where import DIMENSIONS
from monitor.telemetry import Telemetry

# The file (`StateFile` of `monitor.alerts.state`, handed in by the wiring): its format
# tag, version and key, and its path, the alert state file's with SUFFIX added.
FORMAT = "rag-monitor-audit-state"
VERSION = 2
KEY = "audit"
SUFFIX = ".audit"
OPEN_TRACES = 200_000  # traces whose sums are kept (the least recently seen dropped first)
TALLY_COUNTS = 6 + 2 * len(Traces.__slots__)  # a `Tally` as a flat list of counts


def counters(telemetry: Telemetry) -> tuple[Counter, Counter]:
    """The audit state file's reads at start and writes, by outcome (as the alerts')."""
    loads = telemetry.counter("audit_state_loads", "Audit state file reads.", ("outcome",))
    return loads, telemetry.counter("audit_state_saves", "Audit state writes.", ("outcome",))


MAX_SLICE_VALUES = 20  # values of one dimension a service's bucket keeps apart


class State(Protocol):
    def load(self, now: float, max_age_s: float) -> dict[str, Any]: ...

    def save(self, now: float, rules: dict[str, Any]) -> None: ...


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


OpenTraces = OrderedDict[tuple[str, str], OpenTrace]  # (service, trace id), oldest seen first


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


def encode(
    evaluator: str,
    reference: str,
    windows: Windows,
    pending: OrderedDict[str, Pending],
    traces: OpenTraces,
) -> dict[str, Any]:
    return {
        "evaluator": evaluator,
        "reference": reference,
        "windows": {
            service: {
                str(index): {
                    "total": _counts(bucket.total),
                    "slices": [[d, v, _counts(t)] for (d, v), t in bucket.slices.items()],
                }
                for index, bucket in buckets.items()
            }
            for service, buckets in windows.items()
        },
        "pending": [
            [request_id, p.service, p.bucket, p.detector_defect, list(p.where), p.trace]
            for request_id, p in pending.items()
        ],
        "traces": [
            [service, trace, o.bucket, [[*key, *astuple(sums)] for key, sums in o.sums.items()]]
            for (service, trace), o in traces.items()
        ],
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
STATE_FORMAT = (FORMAT, VERSION, KEY, counters, UPGRADES)


@dataclass(slots=True)
class Restored:
    windows: Windows = field(default_factory=dict)
    pending: OrderedDict[str, Pending] = field(default_factory=OrderedDict)
    traces: OpenTraces = field(default_factory=OrderedDict)
    dropped: dict[str, int] = field(default_factory=dict)  # part → entries left out
    other: str | None = None  # why nothing was restored: another evaluator or reference


def decode(
    data: dict[str, Any], evaluator: str, reference: str, oldest: int, max_pending: int
) -> Restored:
    """What `data` (`encode`'s, read back) restores: buckets from `oldest` on, the newest
    `max_pending` records awaiting a label and the newest `OPEN_TRACES` open traces whose
    bucket is still in the window."""
    out = Restored()
    if data.get("evaluator") != evaluator or data.get("reference") != reference:
        out.other = (
            f"it counted {data.get('evaluator')!r} against {data.get('reference')!r}, not "
            f"{evaluator!r} against {reference!r}"
        )
        return out
    windows = data.get("windows")
    for service, buckets in (windows if isinstance(windows, dict) else {}).items():
        try:
            kept = {int(i): _bucket(b) for i, b in buckets.items() if int(i) >= oldest}
        except (AttributeError, KeyError, TypeError, ValueError):
            out.dropped["window"] = out.dropped.get("window", 0) + 1
            continue
        if kept:
            out.windows[service] = kept
    pending = data.get("pending")
    for item in pending if isinstance(pending, list) else []:
        try:
            request_id, service, bucket, defect, where, trace = item
            if not (
                isinstance(request_id, str)
                and isinstance(service, str)
                and isinstance(trace, str)
                and _count(bucket, signed=True)
                and isinstance(defect, bool)
                and isinstance(where, list)
                and len(where) == len(DIMENSIONS)
                and all(isinstance(v, str) for v in where)
            ):
                raise ValueError(item)
        except (TypeError, ValueError):
            out.dropped["pending"] = out.dropped.get("pending", 0) + 1
            continue
        if bucket >= oldest:
            out.pending[request_id] = Pending(service, bucket, defect, tuple(where), trace)
    while len(out.pending) > max_pending:
        out.pending.popitem(last=False)
    traces = data.get("traces")
    for item in traces if isinstance(traces, list) else []:
        try:
            service, trace, bucket, sums = item
            if not (
                isinstance(service, str)
                and isinstance(trace, str)
                and _count(bucket, signed=True)
                and isinstance(sums, list)
            ):
                raise ValueError(item)
            opened = OpenTrace(bucket)
            for audited, dimension, value, *counts in sums:
                if not isinstance(audited, bool) or dimension not in ("", *DIMENSIONS):
                    raise ValueError(dimension)
                if not isinstance(value, str) or len(counts) != 3:
                    raise ValueError(value)
                if not all(map(_count, counts)):
                    raise ValueError(counts)
                opened.sums[(audited, dimension, value)] = Trace(*counts)
        except (TypeError, ValueError):
            out.dropped["traces"] = out.dropped.get("traces", 0) + 1
            continue
        if bucket >= oldest:
            out.traces[(service, trace)] = opened
    while len(out.traces) > OPEN_TRACES:
        out.traces.popitem(last=False)
    return out


def _count(value: Any, *, signed: bool = False) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (signed or value >= 0)


def _tally(counts: Any) -> Tally:
    if not isinstance(counts, list) or len(counts) != TALLY_COUNTS:
        raise ValueError(counts)
    if not all(map(_count, counts)):
        raise ValueError(counts)
    size = len(Traces.__slots__)
    unaudited, audited = Traces(*counts[6 : 6 + size]), Traces(*counts[6 + size :])
    unaudited_records, flagged, agree_pass, false_alarms, misses, agree_defect = counts[:6]
    head = (unaudited_records, flagged, agree_pass, false_alarms, misses, agree_defect)
    return Tally(*head, unaudited_traces=unaudited, audited_traces=audited)


def _bucket(saved: Any) -> Bucket:
    bucket = Bucket(_tally(saved["total"]))
    for dimension, value, counts in saved["slices"]:
        if dimension not in DIMENSIONS or not isinstance(value, str):
            raise ValueError(dimension)
        bucket.slices[(dimension, value)] = _tally(counts)
        bucket.values[dimension] = bucket.values.get(dimension, 0) + 1
        if bucket.values[dimension] > MAX_SLICE_VALUES:
            raise ValueError(dimension)
    return bucket
