"""The audit window across restarts: what the audit sink keeps (each service's buckets of
counts, and the audited records awaiting a label) as JSON in its own state file beside the
alert rules' (`<alerts.state_file>.audit`), through the same `StateFile` (atomic writes,
bounded size, a corrupt file moved aside, a foreign one ignored, each counted in
`audit_state_loads_total{outcome}`).

Bounded: services are capped by `pipeline.max_services`, each keeps at most `BUCKETS`
buckets of its window, a bucket at most `MAX_SLICE_VALUES` values per dimension, and the
records awaiting a label at most `audit.max_pending`. What is restored is only what the same
evaluator and reference counted (another pair's counts would mix two estimates); a part
that cannot be restored (a wrong type, a negative count) is left out alone and counted.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import astuple, dataclass, field
from typing import Any, Protocol

from prometheus_client import Counter

from monitor.audit.estimate import Tally
from monitor.records.where import DIMENSIONS
from monitor.telemetry import Telemetry

# The file (`StateFile` of `monitor.alerts.state`, handed in by the wiring): its format
# tag, version and key, and its path, the alert state file's with SUFFIX added.
FORMAT = "rag-monitor-audit-state"
VERSION = 1
KEY = "audit"
SUFFIX = ".audit"


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
    bucket: int
    detector_defect: bool
    where: tuple[str, ...]  # the record's dimension values (`Where`)


@dataclass(slots=True)
class Bucket:
    """A service's counts over one bucket of the window, in all and per slice (dimension,
    value); at most `MAX_SLICE_VALUES` values of a dimension per bucket."""

    total: Tally = field(default_factory=Tally)
    slices: dict[tuple[str, str], Tally] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)  # values so far per dimension

    def tallies(self, where: tuple[str, ...]) -> list[Tally]:
        out = [self.total]
        for dimension, value in zip(DIMENSIONS, where, strict=True):
            if not value:
                continue  # not known for this record: in no slice of the dimension
            found = self.slices.get((dimension, value))
            if found is None:
                if self.values.get(dimension, 0) >= MAX_SLICE_VALUES:
                    continue
                self.values[dimension] = self.values.get(dimension, 0) + 1
                found = self.slices[(dimension, value)] = Tally()
            out.append(found)
        return out


Windows = dict[str, dict[int, Bucket]]


def encode(
    evaluator: str, reference: str, windows: Windows, pending: OrderedDict[str, Pending]
) -> dict[str, Any]:
    return {
        "evaluator": evaluator,
        "reference": reference,
        "windows": {
            service: {
                str(index): {
                    "total": list(astuple(bucket.total)),
                    "slices": [[d, v, list(astuple(t))] for (d, v), t in bucket.slices.items()],
                }
                for index, bucket in buckets.items()
            }
            for service, buckets in windows.items()
        },
        "pending": [
            [request_id, p.service, p.bucket, p.detector_defect, list(p.where)]
            for request_id, p in pending.items()
        ],
    }


@dataclass(slots=True)
class Restored:
    windows: Windows = field(default_factory=dict)
    pending: OrderedDict[str, Pending] = field(default_factory=OrderedDict)
    dropped: dict[str, int] = field(default_factory=dict)  # part → entries left out
    other: str | None = None  # why nothing was restored: another evaluator or reference


def decode(
    data: dict[str, Any], evaluator: str, reference: str, oldest: int, max_pending: int
) -> Restored:
    """What `data` (`encode`'s, read back) restores: buckets from `oldest` on, and the
    newest `max_pending` records awaiting a label whose bucket is still in the window."""
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
            request_id, service, bucket, defect, where = item
            if not (
                isinstance(request_id, str)
                and isinstance(service, str)
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
            out.pending[request_id] = Pending(service, bucket, defect, tuple(where))
    while len(out.pending) > max_pending:
        out.pending.popitem(last=False)
    return out


def _count(value: Any, *, signed: bool = False) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (signed or value >= 0)


def _tally(counts: Any) -> Tally:
    if not isinstance(counts, list) or len(counts) != 6 or not all(map(_count, counts)):
        raise ValueError(counts)
    return Tally(*counts)


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
