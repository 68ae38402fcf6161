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
import gc
import itertools
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

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
SLICE = 50  # entries encoded between two returns to the event loop (about a millisecond)
BUCKET_SLICE = 5  # buckets of a window (each up to a tally per slice value) likewise
_dumps = functools.partial(json.dumps, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Pair:
    evaluator: str
    reference: str


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
        with _uncollected():
            return await self._restore(now, window_s, oldest, newest)

    async def _restore(self, now: float, window_s: float, oldest: int, newest: int) -> Restored:
        assert self._state is not None
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
                _decoded,
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
        fails is counted by the state file, never raised. Each entry is encoded to its JSON
        text at once: texts are no containers the garbage collector walks, so the encoding
        of a large state starts no collection of it."""
        if self._state is None:
            return
        budget = self._max_bytes - 1024
        services: dict[str, list[str]] = {}
        for n, (service, index, bucket) in enumerate(_buckets(windows)):
            text = f"{_dumps(str(index))}:{_dumps(encode_bucket(bucket))}"
            services.setdefault(service, []).append(text)
            budget -= len(text) + 1
            if n % BUCKET_SLICE == BUCKET_SLICE - 1:
                await asyncio.sleep(0)
        encoded = []
        for service, buckets in services.items():
            encoded.append(f"{_dumps(service)}:{{{','.join(buckets)}}}")
            budget -= len(encoded[-1]) - sum(map(len, buckets))
        # Newest first, so what is left out over the bound is the oldest.
        kept_pending, left_pending, budget = await _newest(
            reversed(pending), pending.get, encode_pending, budget
        )
        kept_traces, left_traces, budget = await _newest(
            reversed(traces), traces.get, encode_trace, budget
        )
        over = {"pending_over_size": left_pending, "traces_over_size": left_traces}
        for part, count in over.items():
            if count > 0:
                self._t.child(self._dropped, part).inc(count)
                log.error(
                    "audit state: %d %s left out of the file (over %d bytes, what the reader "
                    "takes)",
                    count,
                    part.split("_")[0],
                    self._max_bytes,
                )
        kept_pending.reverse()
        kept_traces.reverse()
        await asyncio.to_thread(self._write, now, encoded, kept_pending, kept_traces)

    def _write(self, now: float, windows: list[str], pending: list[str], traces: list[str]) -> None:
        """The file in the state file's envelope, atomically, from the entries' texts. A
        failure is logged and counted, never raised."""
        assert self._state is not None
        path = self._state.path
        head = {"format": FORMAT, "version": VERSION, "saved_at": now}
        pair = self._pair
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            with os.fdopen(fd, "wb") as out:
                out.write(_dumps(head)[:-1].encode() + f',"{KEY}":{{'.encode())
                out.write(f'"evaluator":{_dumps(pair.evaluator)},'.encode())
                out.write(f'"reference":{_dumps(pair.reference)},"windows":{{'.encode())
                _texts(out, windows)
                out.write(b'},"pending":[')
                _texts(out, pending)
                out.write(b'],"traces":[')
                _texts(out, traces)
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
    keys: Iterator[Any],
    get: Callable[[Any], Any],
    encode: Callable[[Any, Any], list[Any]],
    budget: int,
) -> tuple[list[str], int, int]:
    """The entries of `keys` (newest first; an iterator that copies each service's keys as
    it reaches them, so that the loop is never held for a copy of all) encoded to their
    JSON text while `budget` bytes last, a slice at a time (an entry gone since the slice
    began is skipped); and how many were left out for want of room. Only those are left
    out: entries that arrive while the save runs are not counted against the size (the
    next save takes them)."""
    out: list[str] = []
    while True:
        chunk = list(itertools.islice(keys, SLICE))
        if not chunk:
            return out, 0, budget
        for n, key in enumerate(chunk):
            value = get(key)
            if value is None:
                continue
            text = _dumps(encode(key, value))
            budget -= len(text) + 1
            if budget < 0:
                left = sum(1 for k in chunk[n:] if get(k) is not None)
                return out, left + await _still_there(keys, get), budget
            out.append(text)
        await asyncio.sleep(0)


async def _still_there(keys: Iterator[Any], get: Callable[[Any], Any]) -> int:
    """How many of `keys` (what an over-size save did not reach) are still held, counted a
    slice at a time."""
    count = 0
    while chunk := list(itertools.islice(keys, SLICE)):
        count += sum(1 for key in chunk if get(key) is not None)
        await asyncio.sleep(0)
    return count


def _decoded(saved: dict[str, Any], *args: Any, **kwargs: Any) -> Restored:
    """`decode`, and what was parsed freed here, a slice at a time: freed whole by the
    loop's thread (its last holder), its millions of objects would hold the loop as long."""
    try:
        return decode(saved, *args, **kwargs)
    finally:
        for part in saved.values():
            while isinstance(part, list) and part:
                del part[-SLICE:]
            while isinstance(part, dict) and part:
                part.popitem()
        saved.clear()


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """No garbage collection while the state is read and checked, and none of it walked by
    a later one (`gc.freeze`): each collection would walk the millions of objects a state
    at its bounds is made of, holding the interpreter, and so the event loop, for as long
    (a second and more). What the state holds makes no reference cycles: what leaves it is
    freed by its count, as before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


def _texts(out: BinaryIO, texts: list[str]) -> None:
    """`texts` written comma-separated, a slice at a time (no copy of them all), and
    freed as they go (here, not all at once by the loop's thread)."""
    first = True
    texts.reverse()
    while texts:
        chunk = texts[-SLICE:][::-1]
        del texts[-SLICE:]
        out.write((b"" if first else b",") + ",".join(chunk).encode())
        first = False


def _buckets(windows: Windows) -> Iterator[tuple[str, int, Any]]:
    for service, buckets in list(windows.items()):
        for index, bucket in list(buckets.items()):
            yield service, index, bucket
