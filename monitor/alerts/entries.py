"""What the alert engine keeps per (rule, service, cohort): the entries its rules' kinds
judge, the conversations still gathering verdicts, the evaluator revision each entry
belongs to, and how all of it is saved to and restored from the state file.

An entry belongs to one evaluator revision: `add` with verdicts of another starts it anew
(the replaced entry is returned, so that the engine can resolve a page it held), and late
verdicts of the revision just replaced, within one window of the change, are left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.alerts.kinds import Entry, Kind, Named
from monitor.alerts.rule import Rule, fingerprint
from monitor.alerts.units import Arrival, Unit, Units
from monitor.alerts.window import saved_number
from monitor.records.where import DIMENSIONS, MAX_CHARS

log = logging.getLogger(__name__)

# The last second a `Where` alert's `startsAt` can say (9999-12-31T23:59:59Z).
LAST_SECOND = 253_402_300_799.0

Key = tuple[int, str, str]  # (rule index, service, cohort)


@dataclass(frozen=True, slots=True)
class Added:
    """What `Entries.add` did: whether an evaluation is due now, and the entry a new
    evaluator revision replaced (with the revision that replaced it)."""

    due: bool = False
    replaced: Entry | None = None
    revision: str | None = None


class Entries:
    def __init__(self, rules: Sequence[Rule], kinds: Sequence[Kind], idle_s: float) -> None:
        self._rules = rules
        self._kinds = kinds
        self._idle_s = idle_s
        self._entries: dict[Key, Entry] = {}
        self._conversations: dict[Key, Units] = {}
        # key -> (revision replaced, when): its late verdicts are left out for one window.
        self._replaced: dict[Key, tuple[str, float]] = {}

    def __iter__(self) -> Iterator[Key]:
        return iter(self._entries)

    def __getitem__(self, key: Key) -> Entry:
        return self._entries[key]

    def items(self) -> Iterator[tuple[Key, Entry]]:
        return iter(list(self._entries.items()))

    def values(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def add(
        self,
        key: Key,
        histogram: Sequence[float],
        revision: str | None,
        conversation: int | None,
        now: float,
        request: int | None = None,
    ) -> Added:
        """`histogram[k]` verdicts at level `k / steps` for `key`, of evaluator `revision`
        (None: not known), `conversation` and `request` (their keys: the conversation id's,
        the request's fingerprint; None: not known)."""
        kind = self._kinds[key[0]]
        entry = self._entries.get(key)
        replaced = None
        if entry is None:
            entry = self._entries[key] = Entry(kind.new_state(), revision)
        elif revision is not None and revision != entry.revision:
            late = self._replaced.get(key)
            if late is not None and late[0] == revision:
                if now - late[1] < self._rules[key[0]].window_s:
                    return Added()
            if entry.revision is None:
                entry.revision = revision
            else:
                replaced = entry
                self._replaced[key] = (entry.revision, now)
                self._conversations.pop(key, None)
                entry = self._entries[key] = Entry(kind.new_state(), revision)
        arrival: Arrival | None = None
        closed: list[Unit] = []
        conversations = self._conversations.get(key)
        if conversations is None:
            conversations = self._conversations[key] = self._units(key)
        steps = len(histogram) - 1
        levels = [k / steps for k in range(steps + 1)]
        if conversation is not None or request is not None:
            arrival, closed = conversations.add(conversation, request, histogram, levels, now)
            if arrival is not None and not arrival.counted:
                histogram = [0.0] * len(histogram)
        else:
            conversations.traffic(histogram, levels, now)
        due = kind.add(entry.state, histogram, arrival, now)
        for unit in closed:
            due = kind.add_unit(entry.state, unit, now) or due
        return Added(due, replaced, revision if replaced is not None else None)

    def _units(self, key: Key) -> Units:
        i, service, cohort = key
        where = f"{service}/{cohort}" if cohort else service
        return Units(self._idle_s, f"alert {self._rules[i].config.name} for {where}")

    def fallback(self, key: Key) -> bool:
        """Whether `key`'s conversation ids are set aside as no conversations."""
        units = self._conversations.get(key)
        return units is not None and units.fallback

    def close_idle(self, key: Key, now: float) -> None:
        """Hands the conversations of `key` quiet long enough by `now` to its kind."""
        conversations = self._conversations.get(key)
        if conversations is not None:
            for unit in conversations.close_idle(now):
                self._kinds[key[0]].add_unit(self._entries[key].state, unit, now)

    def groups(self) -> dict[tuple[int, str], dict[str, Entry]]:
        """The entries of each (rule index, service), by cohort."""
        out: dict[tuple[int, str], dict[str, Entry]] = {}
        for (i, service, cohort), entry in self._entries.items():
            out.setdefault((i, service), {})[cohort] = entry
        return out

    def drop(self, keys: Sequence[Key]) -> None:
        for key in keys:
            self._entries.pop(key, None)
            self._conversations.pop(key, None)

    def firing(self) -> list[tuple[str, str]]:
        """(rule, service) pairs currently firing; for a cohort rule the service is
        written `service/cohort`."""
        return sorted(
            (self._rules[i].config.name, f"{service}/{cohort}" if cohort else service)
            for (i, service, cohort), entry in self._entries.items()
            if entry.firing
        )

    # -- the state file --------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Every entry: `{rule: {"fingerprint", "services": {service: {cohort: entry}}}}`
        (cohort `""` for a rule without cohorts)."""
        out: dict[str, Any] = {}
        for key, entry in self._entries.items():
            i, service, cohort = key
            rule = self._rules[i]
            saved = out.setdefault(
                rule.config.name, {"fingerprint": fingerprint(rule), "services": {}}
            )
            conversations = self._conversations.get(key)
            saved["services"].setdefault(service, {})[cohort] = {
                "revision": entry.revision,
                "firing": entry.firing,
                "started_at": entry.started_at,
                "last_sent": entry.last_sent,
                "where": list(entry.where) if entry.where is not None else None,
                "conversations": conversations.snapshot() if conversations is not None else [],
                "state": self._kinds[i].snapshot(entry.state),
            }
        return out

    def restore(self, saved: dict[str, Any], place: Callable[[int, str, str], Key]) -> int:
        """Takes back what `snapshot` gave, for rules that still exist with the same
        evaluator and windows (`place` gives a saved (rule index, service, cohort) its key
        under the caps); anything else is logged and left out. Returns how many entries
        (one rule and service) were malformed."""
        dropped = 0
        by_name = {rule.config.name: i for i, rule in enumerate(self._rules)}
        for name, raw in saved.items():
            i = by_name.get(name)
            if i is None or not isinstance(raw, dict):
                log.warning("alert state of rule %s left out: the rule is gone", name)
                continue
            if raw.get("fingerprint") != fingerprint(self._rules[i]):
                log.warning("alert state of rule %s left out: the rule changed", name)
                continue
            services = raw.get("services")
            if not isinstance(services, dict):
                log.error("alert state of rule %s is malformed (no services): left out", name)
                dropped += 1
                continue
            for service, cohorts in services.items():
                try:
                    restored = {
                        str(cohort): self._restored(i, saved_entry)
                        for cohort, saved_entry in cohorts.items()
                    }
                except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
                    log.error(
                        "alert state of rule %s, service %s, is malformed (%r): left out",
                        name,
                        service,
                        exc,
                    )
                    dropped += 1
                    continue
                for cohort, (entry, conversations) in restored.items():
                    key = place(i, str(service), cohort)
                    self._entries[key] = entry
                    if len(conversations) or conversations.fallback:
                        self._conversations[key] = conversations
        return dropped

    def _restored(self, i: int, saved: Any) -> tuple[Entry, Units]:
        kind = self._kinds[i]
        state = kind.new_state()
        kind.restore(state, saved["state"])
        firing, revision = saved["firing"], saved["revision"]
        if not isinstance(firing, bool):
            raise TypeError("firing is not true or false")
        if revision is not None and not isinstance(revision, str):
            raise TypeError("revision is not text")
        conversations = Units(self._idle_s, f"alert {self._rules[i].config.name}")
        conversations.restore(saved["conversations"])
        entry = Entry(
            state,
            revision,
            firing,
            saved_number(saved["started_at"]),
            saved_number(saved["last_sent"]),
            where=_restored_where(saved.get("where"), firing),
        )
        return entry, conversations


def _restored_where(raw: Any, firing: bool) -> Named | None:
    """A saved entry's `where`, `[dimension, value, named at]` or null (absent in a file
    saved before it was kept: no `Where` alert), checked; raises TypeError or ValueError."""
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 3:
        raise TypeError("where is not [dimension, value, time]")
    dimension, value, at = raw
    if not isinstance(dimension, str) or dimension not in DIMENSIONS:
        raise ValueError(f"where names no dimension ({dimension!r})")
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CHARS:
        raise ValueError(f"where names no value ({value!r})")
    at = saved_number(at, nonnegative=True)
    if at > LAST_SECOND:
        raise ValueError(f"where was named at {at!r}, past year 9999")
    if not firing:
        raise ValueError("where is kept only while the page fires")
    return Named(dimension, value, at)
