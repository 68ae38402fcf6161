"""Sampling rates raised by alert rules while their evidence builds (evidence-driven
sampling, `alerts.rules[].boost`).

The alert engine raises and lowers a boost per (evaluator, service) as a rule's evidence
comes and goes; the sampler reads the rate in force when it decides a trace. Sampling stays
one decision per trace id: a boosted rate samples a superset of the base rate's traces.

A change costs what it changes: the rate in force of one (evaluator, service) is updated in
place and each watcher is told that key alone, so raising or lowering one service's boost
costs the same with one boosted service or a thousand. The alert engine changes the boosts
and the trace stage's sampler reads them, both on the event loop: no lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

Boosts = Mapping[tuple[str, str], float]
"""`(evaluator, service) -> rate`: the boosts in force."""

Watcher = Callable[[str, str, float | None], None]
"""`(evaluator, service, rate)`: that key's rate in force now (None: no boost)."""


class SamplingBoosts:
    """The boosts in force: `(evaluator, service) -> rate`, the largest any rule asks."""

    def __init__(self) -> None:
        self._asked: dict[tuple[str, str], dict[str, float]] = {}
        self._rates: dict[tuple[str, str], float] = {}
        self._view: Boosts = MappingProxyType(self._rates)
        self._watchers: list[Watcher] = []

    def on_change(self, hook: Watcher) -> None:
        """Call `hook(evaluator, service, rate)` with every change of a key's rate, in the
        order of the changes (a hook must not raise or lower a boost)."""
        self._watchers.append(hook)

    def raise_rate(self, evaluator: str, service: str, rule: str, rate: float) -> None:
        """`rule` asks that `evaluator` sample `service` at `rate` at least."""
        self._asked.setdefault((evaluator, service), {})[rule] = rate
        self._publish(evaluator, service)

    def lower_rate(self, evaluator: str, service: str, rule: str) -> None:
        """`rule` no longer asks for more of `service`."""
        asked = self._asked.get((evaluator, service))
        if asked is None or asked.pop(rule, None) is None:
            return
        if not asked:
            del self._asked[(evaluator, service)]
        self._publish(evaluator, service)

    def active(self) -> Boosts:
        """Every boost in force (a read-only view that follows the changes)."""
        return self._view

    def _publish(self, evaluator: str, service: str) -> None:
        key = (evaluator, service)
        asked = self._asked.get(key)
        rate = max(asked.values()) if asked else None
        if rate == self._rates.get(key):
            return
        if rate is None:
            del self._rates[key]
        else:
            self._rates[key] = rate
        for hook in self._watchers:
            hook(evaluator, service, rate)
