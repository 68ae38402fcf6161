"""What the alert engine keeps per (rule, service, cohort): the entries its rules' kinds
judge, the conversations still gathering verdicts, the evaluator revision each entry
belongs to, and how all of it is saved to and restored from the state file.

An entry belongs to one evaluator revision (`monitor.alerts.revisions` says where each
revision's verdicts go): `add` with verdicts of another starts it anew from what of the old
state still holds (`Keeper.new_state`; the replaced entry is returned, so that the engine
can resolve a page it held).

Conversation memory is bounded per process (docs/alerts.md, "Conversations"): all entries'
conversations, and the requests remembered as asked (`Units.seen`), hold at most `budget`
bytes, counted at `OPEN_BYTES`, `CLOSED_BYTES` and `SEEN_BYTES` each; past it the oldest
go first, process-wide, down to `EVICT_TO` of it (`_evict`).
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.alerts.gauges import SenderScreen
from monitor.alerts.kinds import (
    Entry,
    Key,
    RuleKind,
    Screening,
    Shadowing,
    series,
)
from monitor.alerts.revisions import Revisions, Route
from monitor.alerts.rule import Origin, Rule, fingerprint, saved_by
from monitor.alerts.state import Part, add_part, clamp_future, restored_replaced, restored_where
from monitor.config import CONVERSATION_BUDGET as CONVERSATION_BUDGET
from monitor.evidence import Arrival, Unit, Units, conversation_key, saved_number

log = logging.getLogger(__name__)


# What one conversation holds in memory, at most (`tests/alerts/test_alerts_memory.py`
# measures it): open, with its sums and times; closed, remembered for its return.
OPEN_BYTES = 320
CLOSED_BYTES = 256
# A request remembered as asked once, or with the verdicts it counted (`Units.seen`).
SEEN_BYTES = 256
# An eviction goes this far below the budget, so that the next one waits for a share of it.
EVICT_TO = 0.9


def conversation_bytes(units: Units) -> int:
    return units.held(OPEN_BYTES, CLOSED_BYTES, SEEN_BYTES)


@functools.cache
def _levels(steps: int) -> tuple[float, ...]:
    """The level of each of a histogram's `steps + 1` bins: every verdict asks for them."""
    return tuple(k / steps for k in range(steps + 1))


@dataclass(frozen=True, slots=True)
class Added:
    """What `Entries.add` did: whether an evaluation is due now, and the entry a new
    evaluator revision replaced (with the revision that replaced it)."""

    due: bool = False
    replaced: Entry | None = None
    revision: str | None = None


class Entries:
    """The entries (see the module docstring); `on_evict(open, closed)` is told of every
    eviction the conversation budget made, how many open and closed conversations went."""

    def __init__(
        self,
        rules: Sequence[Rule],
        kinds: Sequence[RuleKind],
        idle_s: float,
        budget: int = CONVERSATION_BUDGET,
        on_evict: Callable[[int, int], None] | None = None,
    ) -> None:
        self._rules = rules
        self._kinds = kinds
        # The kinds' optional hook (None: not this one's).
        self._screening = [kind if isinstance(kind, Screening) else None for kind in kinds]
        self._shadowing = [kind if isinstance(kind, Shadowing) else None for kind in kinds]
        self._idle_s = idle_s
        self._entries: dict[Key, Entry] = {}
        self._conversations: dict[Key, Units] = {}
        self._budget = budget
        self._on_evict = on_evict
        # What `_conversations` hold, in `conversation_bytes`.
        self.conversation_bytes = 0
        self._revisions = Revisions(rules, kinds)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._entries)

    def __getitem__(self, key: Key) -> Entry:
        return self._entries[key]

    def screens(self) -> Iterator[tuple[Key, SenderScreen]]:
        """Each entry's sender screen, of the kinds that screen their senders."""
        for key, entry in list(self._entries.items()):
            if (screening := self._screening[key[0]]) is not None:
                yield key, screening.screen(entry.state)

    def items(self) -> Iterator[tuple[Key, Entry]]:
        return iter(list(self._entries.items()))

    def values(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def add(
        self,
        key: Key,
        histogram: Sequence[float],
        revision: str | None,
        origin: Origin,
        now: float,
        paired: Sequence[float] | None = None,
    ) -> Added:
        """`histogram[k]` verdicts at level `k / steps` for `key`, of evaluator `revision`
        (None: not known), from `origin` (its conversation id, request fingerprint and
        sender); with `paired` (the entry's own verdicts on the same records), a previous
        revision's, judged by no rule (`Revisions.pair`)."""
        kind = self._kinds[key[0]]
        entry = self._entries.get(key)
        if paired is not None:
            self._revisions.pair(key, entry, histogram, revision, paired, now)
            return Added()
        conversation, request, sender = origin.conversation, origin.fingerprint, origin.sender
        replaced = None
        if entry is None:
            entry = self._entries[key] = Entry(kind.new_state(series=series(key)), revision)
        else:
            route = self._revisions.route(key, entry, histogram, revision, now)
            if route is Route.ELSEWHERE:
                return Added()
            if route is Route.REPLACE:
                replaced = entry
                self._forget_conversations(key)
                state = kind.new_state(entry, now, series(key))
                if (shadowing := self._shadowing[key[0]]) is not None:
                    shadowing.switched(state, replaced, revision)
                entry = self._entries[key] = Entry(state, revision)
        arrival: Arrival | None = None
        closed: list[Unit] = []
        conversations = self._conversations.get(key)
        if conversations is None:
            conversations = self._conversations[key] = self._units(key)
        levels = _levels(len(histogram) - 1)
        if conversation is not None or request is not None:
            held = conversation_bytes(conversations)
            arrival, closed = conversations.add(
                None if conversation is None else conversation_key(conversation),
                None if request is None else conversation_key(request),
                histogram,
                levels,
                now,
            )
            self.conversation_bytes += conversation_bytes(conversations) - held
            if arrival is not None and not arrival.counted:
                histogram = [0.0] * len(histogram)
        else:
            conversations.traffic(histogram, levels, now)
        due = kind.add(entry.state, histogram, arrival, now, entry.firing)
        if (screening := self._screening[key[0]]) is not None:
            screening.sent(entry.state, sender, histogram, arrival, now)
        for unit in closed:
            due = kind.add_unit(entry.state, unit, now) or due
        if self.conversation_bytes > self._budget:
            due = self._evict(now) or due
        return Added(due, replaced, revision if replaced is not None else None)

    def add_shadow(
        self,
        key: Key,
        histogram: Sequence[float],
        revision: str,
        own: Sequence[float],
        own_revision: str | None,
        now: float,
    ) -> None:
        """A shadowed `revision`'s verdicts on one record beside the entry's own (`own`, of
        `own_revision`): to its kind (`Shadowing`) where the entry exists and belongs to
        `own_revision`; never counted as the entry's."""
        entry = self._entries.get(key)
        shadowing = self._shadowing[key[0]]
        if entry is None or shadowing is None or not own or revision == entry.revision:
            return
        if own_revision is None or own_revision == entry.revision:
            shadowing.add_shadow(entry.state, revision, histogram, own, now, entry.firing)

    def _units(self, key: Key) -> Units:
        return Units(self._idle_s, f"alert {self._rules[key[0]].config.name} for {series(key)}")

    def fallback(self, key: Key) -> bool:
        """Whether `key`'s conversation ids are set aside as no conversations."""
        units = self._conversations.get(key)
        return units is not None and units.fallback

    def advance(self, key: Key, now: float) -> None:
        """Time moves to `now` for `key`: its conversations quiet long enough close into
        units, handed to its kind, and then the kind's state moves (`Keeper.advance`)."""
        kind, entry = self._kinds[key[0]], self._entries[key]
        conversations = self._conversations.get(key)
        if conversations is not None:
            held = conversation_bytes(conversations)
            for unit in conversations.close_idle(now):
                kind.add_unit(entry.state, unit, now)
            self.conversation_bytes += conversation_bytes(conversations) - held
        kind.advance(entry.state, now, entry.firing)

    def _evict(self, now: float) -> bool:
        """The oldest conversations, process-wide, until they hold `EVICT_TO` of the budget:
        the closed ones remembered longest (or requests asked longest ago), then, in an entry
        with none, the open one quiet longest, closed into its unit early; True when such a
        unit makes an evaluation due."""
        oldest = [
            (at, key) for key, c in self._conversations.items() if (at := c.oldest()) < math.inf
        ]
        heapq.heapify(oldest)
        due, opened, closed = False, 0, 0
        while self.conversation_bytes > self._budget * EVICT_TO and oldest:
            _, key = heapq.heappop(oldest)
            conversations = self._conversations[key]
            held = conversation_bytes(conversations)
            unit = conversations.evict()
            self.conversation_bytes += conversation_bytes(conversations) - held
            if unit is None:
                closed += 1
            else:
                opened += 1
                due = self._kinds[key[0]].add_unit(self._entries[key].state, unit, now) or due
            if (at := conversations.oldest()) < math.inf:
                heapq.heappush(oldest, (at, key))
        if self._on_evict is not None:
            self._on_evict(opened, closed)
        return due

    def _forget_conversations(self, key: Key) -> None:
        conversations = self._conversations.pop(key, None)
        if conversations is not None:
            self.conversation_bytes -= conversation_bytes(conversations)

    def groups(self) -> dict[tuple[int, str], dict[str, Entry]]:
        """The entries of each (rule index, service), by cohort."""
        out: dict[tuple[int, str], dict[str, Entry]] = {}
        for (i, service, cohort), entry in self._entries.items():
            out.setdefault((i, service), {})[cohort] = entry
        return out

    def drop(self, keys: Sequence[Key]) -> None:
        for key in keys:
            self._entries.pop(key, None)
            self._forget_conversations(key)
            self._revisions.forget(key)

    def firing(self) -> list[tuple[str, str]]:
        """(rule, service) pairs currently firing, the service as `series` writes it."""
        return sorted(
            (self._rules[key[0]].config.name, series(key))
            for key, entry in self._entries.items()
            if entry.firing
        )

    # -- the state file --------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Every entry: `{rule: {"fingerprint", "services": {service: {cohort: entry}}}}`
        (cohort `""` for a rule without cohorts)."""
        out: dict[str, Any] = {}
        for part in self.snapshot_parts():
            add_part(out, part)
        return out

    def snapshot_parts(self) -> Iterator[Part]:
        """`snapshot`, one entry at a time: (rule, its fingerprint, service, cohort, the
        entry saved); an entry dropped while this runs is left out."""
        for key in list(self._entries):
            entry = self._entries.get(key)
            if entry is None:
                continue
            i, service, cohort = key
            rule = self._rules[i]
            conversations = self._conversations.get(key)
            saved = {
                "revision": entry.revision,
                "firing": entry.firing,
                "started_at": entry.started_at,
                "last_sent": entry.last_sent,
                "where": list(entry.where) if entry.where is not None else None,
                "conversations": (
                    conversations.snapshot()
                    if conversations is not None and _held(conversations)
                    else []
                ),
                "state": entry.state.snapshot(),
                "replaced": self._revisions.saved(key),
            }
            if entry.severity is not None:  # only a kind whose pages say theirs has one
                saved["severity"] = entry.severity
            yield rule.config.name, fingerprint(rule), service, cohort, saved

    def restore(
        self,
        saved: dict[str, Any],
        place: Callable[[int, str, str], Key],
        now: float,
        *,
        release: bool = False,
    ) -> int:
        """Takes back what `snapshot` gave, for rules that still exist with the same
        evaluator and windows (`place` gives a saved (rule index, service, cohort) its key
        under the caps); anything else is logged and left out. A firing state's times,
        and when a replaced revision's successor last reported, later than `now` (a
        hand-edited file, a wall clock stepped back) are clamped to `now`, logged.
        Conversations past the budget are evicted as they come, and with `release` each
        service is taken out of `saved` once restored, so what was parsed is freed as it
        is restored. Returns how many entries (one rule and service) were
        malformed."""
        dropped = 0
        by_name = {rule.config.name: i for i, rule in enumerate(self._rules)}
        for name, raw in saved.items():
            i = by_name.get(name)
            if i is None or not isinstance(raw, dict):
                log.warning("alert state of rule %s left out: the rule is gone", name)
                continue
            if not saved_by(self._rules[i], raw.get("fingerprint")):
                log.warning("alert state of rule %s left out: the rule changed", name)
                continue
            services = raw.get("services")
            if not isinstance(services, dict):
                log.error("alert state of rule %s is malformed (no services): left out", name)
                dropped += 1
                continue
            for service in list(services):
                cohorts = services.pop(service) if release else services[service]
                try:
                    restored = {
                        str(cohort): (
                            self._restored((i, str(service), str(cohort)), saved_entry),
                            restored_replaced(saved_entry["replaced"]),
                        )
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
                for cohort, ((entry, conversations), replaced) in restored.items():
                    later = clamp_future(entry, now)
                    key = place(i, str(service), cohort)
                    later |= self._revisions.restore(key, replaced, now)
                    if later:
                        log.warning(
                            "alert state of rule %s, service %s: a time later than now "
                            "(started_at, last_sent, where or replaced) clamped to now",
                            name,
                            service,
                        )
                    self._entries[key] = entry
                    self._forget_conversations(key)
                    if _held(conversations):
                        self._conversations[key] = conversations
                        self.conversation_bytes += conversation_bytes(conversations)
                if self.conversation_bytes > self._budget:
                    self._evict(now)
        return dropped

    def _restored(self, key: Key, saved: Any) -> tuple[Entry, Units]:
        state = self._kinds[key[0]].new_state(series=series(key))
        state.restore(saved["state"])
        firing, revision, severity = saved["firing"], saved["revision"], saved.get("severity")
        if not isinstance(firing, bool):
            raise TypeError("firing is not true or false")
        if revision is not None and not isinstance(revision, str):
            raise TypeError("revision is not text")
        if severity is not None and not isinstance(severity, str):
            raise TypeError("severity is not text")
        conversations = self._units(key)
        conversations.restore(saved["conversations"])
        entry = Entry(
            state,
            revision,
            firing,
            saved_number(saved["started_at"]),
            saved_number(saved["last_sent"]),
            where=restored_where(saved["where"], firing),
            severity=severity,
        )
        return entry, conversations


def _held(units: Units) -> bool:
    """Whether `units` hold anything the state file keeps (an entry's units are made with
    its first verdict, so most are empty)."""
    return bool(len(units) or units.remembered or units.fallback)
