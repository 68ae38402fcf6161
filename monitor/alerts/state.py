"""The alert engine's state file (`alerts.state_file`): windows and firing states across
restarts, written atomically, loaded without ever raising (docs/alerts.md, "State across
restarts"). A file of an older version is read through `UPGRADES`, one step per version, so
what is restored is always of this version's form.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import Counter

from monitor.alerts.kinds import Entry, Named
from monitor.evidence import saved_number
from monitor.records.where import DIMENSIONS, where_value
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)

FORMAT = "rag-monitor-alert-state"
VERSION = 4
# What loads within the Helm chart's 512 MiB beside the sidecar's own memory: parsing and
# restoring take several times the file's size (`tests/alerts/test_alerts_memory.py`).
MAX_BYTES = 24 * 1024 * 1024
# The last second a `Where` alert's `startsAt` can say (9999-12-31T23:59:59Z).
LAST_SECOND = 253_402_300_799.0

# One saved entry: (rule, the rule's fingerprint, service, cohort, the entry).
Part = tuple[str, str, str, str, dict[str, Any]]


def _upgrade_2(rules: dict[str, Any]) -> None:
    """Version 2 to 3, in place: entries gain the slice their page named, cohorts their
    last full window, regression rules their changeover; an SLO rule's severity and a
    regression rule's firing flag move out of the state. What is not of the expected form
    is left for the restore to refuse."""
    for rule, entry in _entries(rules):
        state = entry.get("state")
        if not isinstance(state, dict):
            continue
        entry.setdefault("where", None)
        # An SLO rule's state held the severity its alert fired at; the entry does.
        entry["severity"] = state.pop("severity", None) if "windows" in state else None
        if "history" in state:  # a regression rule's
            state.pop("firing", None)
            for key in ("pinned", "changeover", "translated"):
                state.setdefault(key, None)
        elif "current" in state:  # an absolute or cohort rule's
            state.setdefault("units", [])
            if "|by " in str(rule.get("fingerprint")):
                state.setdefault("seen", None)


# A regression rule's changeover: its numbers before the overlap's, and the overlap's as
# version 3 wrote them at first (none), then with the paired differences (15 + 3).
_CHANGEOVER_HEAD = 9
_OVERLAP_V3 = (0, 15, 18)


def _upgrade_3(rules: dict[str, Any]) -> None:
    """Version 3 to 4, in place: every entry gains the revisions it replaced (none known);
    a regression rule's changeover an overlap of its full form (an empty one where none
    was kept; no paired differences where those were not), the revision it replaced (not
    known) and its interim sums (none). What is not of the expected form is left for the
    restore to refuse."""
    for _, entry in _entries(rules):
        entry.setdefault("replaced", None)
        state = entry.get("state")
        if not isinstance(state, dict) or "history" not in state:
            continue
        change = state.get("changeover")
        if isinstance(change, list) and len(change) - _CHANGEOVER_HEAD in _OVERLAP_V3:
            overlap = change[_CHANGEOVER_HEAD:] or [-1, *[0.0] * 14]
            overlap += [0.0] * (18 - len(overlap))
            state["changeover"] = change[:_CHANGEOVER_HEAD] + overlap
        state.setdefault("replaced", None)
        state.setdefault("interim", None)


def _entries(rules: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each saved entry of a file's rules, with its rule (what is not a dict skipped)."""
    for rule in rules.values():
        services = rule.get("services") if isinstance(rule, dict) else None
        for cohorts in services.values() if isinstance(services, dict) else ():
            for entry in cohorts.values() if isinstance(cohorts, dict) else ():
                if isinstance(entry, dict):
                    yield rule, entry


# Version -> what makes a file of that version one of the next.
UPGRADES: dict[int, Callable[[dict[str, Any]], None]] = {2: _upgrade_2, 3: _upgrade_3}


@dataclass(frozen=True, slots=True)
class StateFormat:
    """What a state file holds: its name in log lines, its format and version, the key of
    what it holds, and its counters of loads and saves (by outcome)."""

    name: str
    format: str
    version: int
    key: str
    counters: Callable[[Telemetry], tuple[Counter, Counter]]
    # Version -> what makes what a file of that version holds that of the next.
    upgrades: Mapping[int, Callable[[dict[str, Any]], None]] = field(default_factory=dict)
    # How the file's bytes are parsed (ValueError on a bad file): in a thread, one that
    # gives the event loop the interpreter lock as it goes keeps a large file from
    # stalling it (`monitor.shared.json_pieces`).
    parse: Callable[[bytes], Any] = json.loads


def _alert_counters(telemetry: Telemetry) -> tuple[Counter, Counter]:
    loads = telemetry.counter("alert_state_loads")
    saves = telemetry.counter("alert_state_saves")
    return loads, saves


ALERTS = StateFormat("alert", FORMAT, VERSION, "rules", _alert_counters, UPGRADES)


class StateFile:
    def __init__(self, path: str, telemetry: Telemetry, state_format: StateFormat = ALERTS) -> None:
        self.path = Path(path)
        self._format = state_format
        self._name = f"{state_format.name} state file"
        self._loads, self._saves = state_format.counters(telemetry)
        # A file that could not be read nor moved aside: never written over.
        self._blocked = False

    def load(self, now: float, max_age_s: float) -> dict[str, Any]:
        """The saved rules (`{}` when there is nothing usable; the reason is logged and
        counted). A file saved more than `max_age_s` before `now` is stale: every window
        it holds has expired."""
        outcome, rules = self._read(now, max_age_s)
        self._loads.labels(outcome).inc()
        if outcome in ("too_large", "corrupt", "foreign"):
            self._set_aside(outcome)
        return rules

    def _set_aside(self, outcome: str) -> None:
        """Moves a file that could not be read (or is not this build's to read: another
        program's, a later release's) out of the next save's way, kept as it was."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.{outcome}-{stamp}")
        n = 0
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{self.path.name}.{outcome}-{stamp}.{n}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.error(
                "%s %s could not be moved aside (%s): it is not overwritten; the state is "
                "not saved until it is moved",
                self._name,
                self.path,
                exc,
            )
            self._blocked = True
            return
        log.error("%s %s moved to %s: it is kept as it was", self._name, self.path, aside)

    def _read(self, now: float, max_age_s: float) -> tuple[str, dict[str, Any]]:
        try:
            size = self.path.stat().st_size
            if size > MAX_BYTES:
                log.error(
                    "%s %s is %d bytes (over %d): starting empty",
                    self._name,
                    self.path,
                    size,
                    MAX_BYTES,
                )
                return "too_large", {}
            data = self._format.parse(self.path.read_bytes())
        except FileNotFoundError:
            log.info("%s %s does not exist yet: starting empty", self._name, self.path)
            return "missing", {}
        except (OSError, ValueError, RecursionError) as exc:
            log.error("%s %s is unreadable (%s): starting empty", self._name, self.path, exc)
            return "corrupt", {}
        stored = self._format
        if not isinstance(data, dict) or data.get("format") != stored.format:
            log.error("%s is not an %s of rag-monitor: starting empty", self.path, self._name)
            return "foreign", {}
        version = data.get("version")
        if version != stored.version and version not in stored.upgrades:
            log.error(
                "%s %s has version %r (this build reads %s): starting empty",
                self._name,
                self.path,
                version,
                ", ".join(str(v) for v in (*stored.upgrades, stored.version)),
            )
            return "foreign", {}
        saved_at, rules = data.get("saved_at"), data.get(stored.key)
        if (
            isinstance(saved_at, bool)
            or not isinstance(saved_at, int | float)
            or not abs(saved_at) < 1e12
            or not isinstance(rules, dict)
        ):
            log.error(
                "%s %s lacks saved_at or %s: starting empty", self._name, self.path, stored.key
            )
            return "corrupt", {}
        if now - saved_at > max_age_s:
            log.warning(
                "%s %s was saved %.0f s ago, longer than the longest window (%.0f s): "
                "starting empty",
                self._name,
                self.path,
                now - saved_at,
                max_age_s,
            )
            return "stale", {}
        while isinstance(version, int) and version != stored.version:
            stored.upgrades[version](rules)
            version += 1
        return "loaded", rules

    def save(self, now: float, rules: dict[str, Any]) -> None:
        """Writes the state atomically; a failure is logged and counted, never raised."""
        if self._blocked:
            log.error("%s not saved: %s, unreadable, is still in its place", self._name, self.path)
            self._saves.labels("error").inc()
            return
        body = json.dumps(
            {
                "format": self._format.format,
                "version": self._format.version,
                "saved_at": now,
                self._format.key: rules,
            },
            separators=(",", ":"),
        ).encode()
        tmp: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            with os.fdopen(fd, "wb") as out:
                out.write(body)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
            tmp = None
            self._saves.labels("ok").inc()
        except OSError as exc:
            log.error("could not write %s %s: %s", self._name, self.path, exc)
            self._saves.labels("error").inc()
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


# -- an entry's saved form (`monitor.alerts.entries`) ---------------------------------


def add_part(snapshot: dict[str, Any], part: Part) -> None:
    """Adds one of `Entries.snapshot_parts` to a snapshot being built."""
    name, rule_fingerprint, service, cohort, entry = part
    saved = snapshot.setdefault(name, {"fingerprint": rule_fingerprint, "services": {}})
    saved["services"].setdefault(service, {})[cohort] = entry


def clamp_future(entry: Entry, now: float) -> bool:
    """Clamps `entry`'s firing times to `now`; True when one was later."""
    later = max(entry.started_at, entry.last_sent) > now
    entry.started_at, entry.last_sent = min(entry.started_at, now), min(entry.last_sent, now)
    if entry.where is not None and entry.where.at > now:
        entry.where, later = entry.where._replace(at=now), True
    return later


def restored_where(raw: Any, firing: bool) -> Named | None:
    """A saved entry's `where`, `[dimension, value, named at]` or null, checked; raises
    TypeError or ValueError."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 3:
        raise TypeError("where is not [dimension, value, time]")
    dimension, value, at = raw
    if not isinstance(dimension, str) or dimension not in DIMENSIONS:
        raise ValueError(f"where names no dimension ({dimension!r})")
    if not isinstance(value, str) or not value:
        raise ValueError(f"where names no value ({value!r})")
    if value != where_value(value):  # what a live value becomes, never restored otherwise
        raise ValueError(f"where value {value!r} is no label value (unshown characters, length)")
    at = saved_number(at, nonnegative=True)
    if at > LAST_SECOND:
        raise ValueError(f"where was named at {at!r}, past year 9999")
    if not firing:
        raise ValueError("where is kept only while the page fires")
    return Named(dimension, value, at)


# The revisions an entry replaced, and the last verdict of its own (`entries.Entries`).
Replaced = tuple[tuple[str, ...], float]


def restored_replaced(raw: Any) -> Replaced | None:
    """A saved entry's `replaced`, `[[revision, ...], last verdict of its own]` or null,
    checked; raises TypeError or ValueError."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 2 or not isinstance(raw[0], list):
        raise TypeError("replaced is not [[revision, ...], time]")
    revisions, seen = raw
    if not revisions or not all(isinstance(r, str) for r in revisions):
        raise TypeError("replaced names no revisions")
    return tuple(revisions), saved_number(seen, nonnegative=True)
