"""Fair admission while the evaluation stage is full: one service's flood (traces waiting
for log events that never come, a burst of one app) does not refuse another service's
traces.

The trace stage counts, per service, the sampled traces and records it handed to the
evaluation stage that are not finished yet (at most `pipeline.max_services` services at
once: past them, a spray of invented names counts as one, `other`).
While the evaluation stage is full, a delivery of spans is still taken when each of its
services holds less than its share of the stage's items (`pipeline.queue_size` over the
number of services holding items, the delivery's own counted); the others are refused as
before. Each service takes at most its share past the bound, so the stage holds at most
twice `pipeline.queue_size` items; at that, everything is refused without decoding it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from monitor.component import OnDone

OTHER = "other"


class FairShares:
    def __init__(self, capacity: int, max_services: int) -> None:
        """`capacity`: the evaluation stage's bound in items; `max_services`: how many
        services are counted apart."""
        self._capacity = capacity
        self._max_services = max_services
        self._held: Counter[str] = Counter()
        self._total = 0

    def _label(self, service: str) -> str:
        held = self._held
        return service if service in held or len(held) < self._max_services else OTHER

    @property
    def exhausted(self) -> bool:
        """Whether no service may add any more, whatever its share."""
        return self._total >= 2 * self._capacity

    def admits(self, services: Iterable[str]) -> bool:
        """Whether each of `services` holds less than its share of the stage's items."""
        labels = {self._label(service) for service in services}
        if not labels or self.exhausted:
            return False
        holding = len(self._held.keys() | labels)
        return all(self._held[label] * holding < self._capacity for label in labels)

    def hold(self, service: str, on_done: OnDone | None) -> OnDone:
        """Count an item of `service` handed on; the callback to give it in place of
        `on_done`, which counts it out when it is finished (or abandoned)."""
        label = self._label(service)
        self._held[label] += 1
        self._total += 1

        def done(ok: bool) -> None:
            self._held[label] -= 1
            if not self._held[label]:
                del self._held[label]
            self._total -= 1
            if on_done is not None:
                on_done(ok)

        return done
