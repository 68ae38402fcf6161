"""Which evaluator revision the verdicts added to an alert entry belong to (docs/alerts.md,
"An evaluator change is not a regression"), apart from the entries that count them
(`monitor.alerts.entries`).

An entry belongs to one revision. Verdicts of another start it anew (`REPLACE`: the
entries make the new state from what of the old still holds, and the engine resolves a
page the old one held). A revision an entry replaced is judged by no rule while the
entry's own still reports (`ELSEWHERE`: its verdicts go to the kind's `Replacing` hook,
which measures the new revision's offset); only alone for a window, a rollback, does it
replace it again. An old revision's verdicts paired with the entry's own on the same
records (a results line's `previous`, replayed by `backtest`) go to the same hook (`pair`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import Enum

from monitor.alerts.kinds import Entry, Key, Replacing, RuleKind, series
from monitor.alerts.rule import Rule
from monitor.alerts.state import Replaced

log = logging.getLogger(__name__)

# Revisions an entry remembers having replaced (a rollout has two live; a third is rare).
REPLACED_KEPT = 4


class Route(Enum):
    OWN = "own"  # the entry's own revision (or the first one it learns): counted by it
    ELSEWHERE = "elsewhere"  # a revision it replaced, while its own reports: no rule's
    REPLACE = "replace"  # a new revision: the entry starts anew with it


class Revisions:
    def __init__(self, rules: Sequence[Rule], kinds: Sequence[RuleKind]) -> None:
        self._rules = rules
        # The kinds' optional hook (None: not this one's).
        self._replacing = [kind if isinstance(kind, Replacing) else None for kind in kinds]
        # key -> the revisions it replaced, oldest first, and the last verdict of its own.
        self._replaced: dict[Key, Replaced] = {}
        # Keys whose replaced revision's verdicts were said to arrive again, since the entry
        # last took a revision (said once: a rollout with both live sends them all along).
        self._told: set[Key] = set()

    def pair(
        self,
        key: Key,
        entry: Entry | None,
        histogram: Sequence[float],
        revision: str | None,
        own: Sequence[float],
        now: float,
    ) -> None:
        """An old revision's verdicts, with `own` the entry's own on the same records
        ([]: its own revision gave none)."""
        replacing = self._replacing[key[0]]
        if entry is not None and own and replacing is not None:
            replacing.add_replaced(entry.state, histogram, now, entry.firing, (revision, own))

    def route(
        self,
        key: Key,
        entry: Entry,
        histogram: Sequence[float],
        revision: str | None,
        now: float,
    ) -> Route:
        """Where verdicts of `revision` (None: not known) for `key`'s `entry` go; a
        revision the entry learns only now becomes its own."""
        replaced = self._replaced.get(key)
        if revision is None or revision == entry.revision:
            if replaced is not None and revision == entry.revision:
                self._replaced[key] = (replaced[0], now)
            return Route.OWN
        before, own_seen = replaced or ((), 0.0)
        if revision in before and now - own_seen < self._rules[key[0]].terms.window_s:
            # Late verdicts, or a rollout with both live: the revision it replaced last
            # measures the new one's offset.
            replacing = self._replacing[key[0]]
            if replacing is not None and revision == before[-1]:
                replacing.add_replaced(entry.state, histogram, now, entry.firing)
            if key not in self._told:
                self._told.add(key)
                self._switched_back(key, revision, entry.revision)
            return Route.ELSEWHERE
        if entry.revision is None:
            entry.revision = revision
            return Route.OWN
        kept = tuple(r for r in before if r != revision)[-REPLACED_KEPT + 1 :]
        self._replaced[key] = ((*kept, entry.revision), now)
        self._told.discard(key)
        return Route.REPLACE

    def _switched_back(self, key: Key, revision: str, own: str | None) -> None:
        """Verdicts of `revision`, which `key`'s entry replaced by `own`, arrive again: a
        switch back (or a rollout with both live) is said at once, not only once it has
        been alone for a window (`REPLACE`, which `Firing.new_revision` logs)."""
        rule = self._rules[key[0]]
        log.warning(
            "alert %s for %s: verdicts of %s revision %s arrive again (revision %s replaced "
            "it): judged by no rule while %s's still come (a rollout with both live, or a "
            "switch back); alone for %gs (the rule's window) they replace %s, a rollback",
            rule.config.name,
            series(key),
            rule.config.evaluator or rule.config.category,
            revision,
            own,
            own,
            rule.terms.window_s,
            own,
        )

    def saved(self, key: Key) -> list[object] | None:
        """What the state file keeps of `key`'s replaced revisions (null: none)."""
        replaced = self._replaced.get(key)
        return None if replaced is None else [list(replaced[0]), replaced[1]]

    def restore(self, key: Key, replaced: Replaced | None, now: float) -> bool:
        """Takes back what `saved` gave (checked by `state.restored_replaced`); returns
        whether its time was later than `now` (clamped to it)."""
        self._replaced.pop(key, None)
        if replaced is None:
            return False
        self._replaced[key] = (replaced[0], min(replaced[1], now))
        return replaced[1] > now

    def forget(self, key: Key) -> None:
        self._replaced.pop(key, None)
        self._told.discard(key)
