"""The audit state file as the audit sink keeps it (`saved` is its form): restored at start
with every part checked off the event loop, saved at every refresh encoded a slice at a
time on the loop (no slice holds it long, and no copy of the state is made) and written off
it, bounded to what the reader takes (`MAX_FILE_BYTES`; the oldest open traces, then the
oldest records awaiting a label, are left out first, counted). A file whose parts all read
but which cannot be restored as a whole is left in place and never written over."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from monitor.audit.saved import (
    FORMAT,
    KEY,
    VERSION,
    Awaiting,
    OpenTraces,
    Restored,
    State,
    Windows,
    decode,
    encode_bucket,
    encode_pending,
    encode_trace,
)
from monitor.audit.saved import counters as state_counters
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
# What the writer keeps the file under: the reader (`monitor.alerts.state.MAX_BYTES`, 24 MiB)
# refuses a larger one, and the envelope and the windows' keys take a little.
MAX_FILE_BYTES = 20 * 1024 * 1024
SLICE = 250  # entries encoded between two returns to the event loop (a few ms)
BUCKET_SLICE = 25  # buckets of a window (each up to a tally per slice value) likewise
_dumps = functools.partial(json.dumps, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Pair:
    evaluator: str
    reference: str


def _text_bytes(value: str) -> int:
    """At most what `value` takes in JSON (as `json.dumps` writes it, ASCII only)."""
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return len(value) + 2
    return 12 * len(value) + 2  # a character outside the BMP: two \\uXXXX escapes


def _entry_bytes(entry: list[Any]) -> int:
    """At most what one encoded entry (lists of texts, numbers and booleans) takes."""
    total = 2 + len(entry)
    for part in entry:
        if isinstance(part, str):
            total += _text_bytes(part)
        elif isinstance(part, list):
            total += _entry_bytes(part)
        elif isinstance(part, bool):
            total += 5
        else:
            total += len(str(part))  # a whole number
    return total


class KeptState:
    """The sink's state file: `restore` at start, `save` at every refresh and at shutdown."""

    def __init__(
        self,
        state: State,
        telemetry: Telemetry,
        pair: Pair,
        *,
        max_pending: int,
        service_name: Callable[[str], str],
        max_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self._state: State | None = state
        self._t = telemetry
        self._pair = pair
        self._max_pending = max_pending
        self._service_name = service_name
        self._max_bytes = max_bytes
        # The state file's own counters (one metric each, whoever asks): its writes are ours.
        _, self._saves = state_counters(telemetry)
        self._dropped = telemetry.counter("audit_state_dropped")

    async def restore(self, now: float, window_s: float, oldest: int, newest: int) -> Restored:
        """What the file restores (nothing where it has nothing usable: the reason is
        logged and counted); never raises."""
        if self._state is None:
            return Restored()
        pair = self._pair
        try:
            # Reading runs the older versions' upgrades: inside, as the parts' checks.
            unreadable = self._unreadable()
            saved = await asyncio.to_thread(self._state.load, now, window_s)
            if self._unreadable() > unreadable and self._state.path.exists():
                raise OSError("unreadable, and it could not be moved aside")
            if not saved:
                return Restored()
            restored = await asyncio.to_thread(
                decode,
                saved,
                pair.evaluator,
                pair.reference,
                oldest,
                self._max_pending,
                newest=newest,
                service_name=self._service_name,
            )
        except Exception as exc:
            self._t.child(self._dropped, "file").inc()
            log.error(
                "audit state could not be restored (%s: %s): starting empty; the file is "
                "left as it is and not written over until it is moved",
                type(exc).__name__,
                str(exc)[:200],
            )
            self._state = None
            return Restored()
        if restored.other is not None:
            log.warning("audit state not restored: %s", restored.other)
            return Restored()
        for part, count in restored.dropped.items():
            self._t.child(self._dropped, part).inc(count)
            log.error("audit state: %d %s entries could not be restored; left out", count, part)
        return restored

    def _unreadable(self) -> float:
        """Reads of the file that found it corrupt or too large so far."""
        read = self._t.registry.get_sample_value
        name = "rag_monitor_audit_state_loads_total"
        return sum(read(name, {"outcome": o}) or 0.0 for o in ("corrupt", "too_large"))

    async def save(
        self,
        now: float,
        windows: Windows,
        pending: Awaiting,
        traces: OpenTraces,
    ) -> None:
        """Encodes the state a slice at a time and writes it off the loop; a write that
        fails is counted by the state file, never raised."""
        if self._state is None:
            return
        budget = self._max_bytes - 1024
        body: dict[str, Any] = {"evaluator": self._pair.evaluator}
        body["reference"] = self._pair.reference
        encoded: dict[str, dict[str, Any]] = {}
        for n, (service, index, bucket) in enumerate(_buckets(windows)):
            counts = encode_bucket(bucket)
            encoded.setdefault(service, {})[str(index)] = counts
            budget -= _text_bytes(service) + 24 + _entry_bytes([counts["total"], counts["slices"]])
            if n % BUCKET_SLICE == BUCKET_SLICE - 1:
                await asyncio.sleep(0)
        body["windows"] = encoded
        # Newest first, so what is left out over the bound is the oldest.
        kept_pending, budget = await _newest(
            list(reversed(pending)), pending.get, encode_pending, budget
        )
        kept_traces, budget = await _newest(
            list(reversed(traces)), traces.get, encode_trace, budget
        )
        over = {
            "pending_over_size": len(pending) - len(kept_pending),
            "traces_over_size": len(traces) - len(kept_traces),
        }
        for part, count in over.items():
            if count:
                self._t.child(self._dropped, part).inc(count)
                log.error(
                    "audit state: %d %s left out of the file (over %d bytes, what the reader "
                    "takes)",
                    count,
                    part.split("_")[0],
                    self._max_bytes,
                )
        body["pending"] = kept_pending[::-1]
        body["traces"] = kept_traces[::-1]
        await asyncio.to_thread(self._write, now, body)

    def _write(self, now: float, body: dict[str, Any]) -> None:
        """The file in the state file's envelope, atomically: each entry dumped apart, so
        that no single encoding holds the interpreter (the loop's thread waits for it)
        longer than one entry takes. A failure is logged and counted, never raised."""
        assert self._state is not None
        path = self._state.path
        head = {"format": FORMAT, "version": VERSION, "saved_at": now}
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "wb") as out:
                out.write(_dumps(head)[:-1].encode() + f',"{KEY}":{{'.encode())
                out.write(f'"evaluator":{_dumps(body["evaluator"])},'.encode())
                out.write(f'"reference":{_dumps(body["reference"])},"windows":{{'.encode())
                for n, (service, buckets) in enumerate(body["windows"].items()):
                    out.write(f"{',' if n else ''}{_dumps(service)}:{{".encode())
                    parts = (f"{_dumps(i)}:{_dumps(b)}" for i, b in buckets.items())
                    out.write(",".join(parts).encode() + b"}")
                out.write(b'},"pending":[')
                for n, entry in enumerate(body["pending"]):
                    out.write((b"," if n else b"") + _dumps(entry).encode())
                out.write(b'],"traces":[')
                for n, entry in enumerate(body["traces"]):
                    out.write((b"," if n else b"") + _dumps(entry).encode())
                out.write(b"]}}")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            tmp = None
            self._saves.labels("ok").inc()
        except OSError as exc:
            log.error("could not write the audit state file %s: %s", path, exc)
            self._saves.labels("error").inc()
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


async def _newest(
    keys: list[Any],
    get: Callable[[Any], Any],
    encode: Callable[[Any, Any], list[Any]],
    budget: int,
) -> tuple[list[list[Any]], int]:
    """The entries of `keys` (newest first) encoded while `budget` bytes last, a slice at a
    time (an entry gone since the slice began is skipped)."""
    out: list[list[Any]] = []
    for start in range(0, len(keys), SLICE):
        for key in keys[start : start + SLICE]:
            value = get(key)
            if value is None:
                continue
            entry = encode(key, value)
            budget -= _entry_bytes(entry)
            if budget < 0:
                return out, budget
            out.append(entry)
        await asyncio.sleep(0)
    return out, budget


def _buckets(windows: Windows) -> Iterator[tuple[str, int, Any]]:
    for service, buckets in list(windows.items()):
        for index, bucket in list(buckets.items()):
            yield service, index, bucket
