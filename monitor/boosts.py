"""Sampling rates raised by alert rules while their evidence builds (evidence-driven
sampling, `alerts.rules[].boost`).

The alert engine raises and lowers a boost per (evaluator, service) as a rule's evidence
comes and goes; the sampler reads the rate in force when it decides a trace. Sampling stays
one decision per trace id: a boosted rate samples a superset of the base rate's traces. The
view the sampler reads is replaced whole on every change, so reading it takes no lock (the
sampler runs in the trace stage's thread, the engine on the event loop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

Boosts = Mapping[tuple[str, str], float]
"""`(evaluator, service) -> rate`: the boosts in force."""


class SamplingBoosts:
    """The boosts in force: `(evaluator, service) -> rate`, the largest any rule asks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked: dict[tuple[str, str], dict[str, float]] = {}
        self._view: Boosts = {}
        self._watchers: list[Callable[[Boosts], None]] = []

    def on_change(self, hook: Callable[[Boosts], None]) -> None:
        """Call `hook(view)` with every new view, in the order the views were made (under
        the lock: a hook must be quick and must not raise or lower a boost)."""
        with self._lock:
            self._watchers.append(hook)

    def raise_rate(self, evaluator: str, service: str, rule: str, rate: float) -> None:
        """`rule` asks that `evaluator` sample `service` at `rate` at least."""
        with self._lock:
            self._asked.setdefault((evaluator, service), {})[rule] = rate
            self._publish()

    def lower_rate(self, evaluator: str, service: str, rule: str) -> None:
        """`rule` no longer asks for more of `service`."""
        with self._lock:
            asked = self._asked.get((evaluator, service))
            if asked is None or asked.pop(rule, None) is None:
                return
            if not asked:
                del self._asked[(evaluator, service)]
            self._publish()

    def active(self) -> Boosts:
        """Every boost in force."""
        return self._view

    def _publish(self) -> None:
        self._view = view = {key: max(asked.values()) for key, asked in self._asked.items()}
        for hook in self._watchers:
            hook(view)
