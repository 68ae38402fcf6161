"""The services and cohorts the alert engine keeps entries for, bounded apart from the
metrics' labels: a service keeps its entries while they hold verdicts, and a burst of
invented names can take only slots idle for longer than the longest window a rule looks
at. Cohorts likewise, one cap per kind of cohort (version, route)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from monitor.alerts.rule import Rule
from monitor.telemetry import LabelCap, Telemetry


class Subjects:
    def __init__(
        self,
        rules: Sequence[Rule],
        telemetry: Telemetry,
        idle_s: float,
        clock: Callable[[], float],
        *,
        forget_service: Callable[[str], None],
        forget_cohort: Callable[[str, str], None],
    ) -> None:
        """`forget_service(service)` and `forget_cohort(by, cohort)` are called when one
        loses its slot."""

        def cap(source: LabelCap) -> LabelCap:
            return LabelCap(
                source.limit,
                allowed=source.allowed,
                idle_s=max(source.idle_s, idle_s),
                max_chars=source.max_chars,
                clock=clock,
            )

        self.service = cap(telemetry.service_cap)
        self.service.on_evict(forget_service)
        self._cohorts: dict[str, LabelCap] = {}
        for rule in rules:
            by = rule.cohort_by
            if by is not None and by not in self._cohorts:
                source = telemetry.route_cap if by == "route" else telemetry.version_cap
                self._cohorts[by] = cap(source)
                self._cohorts[by].on_evict(functools.partial(forget_cohort, by))

    def cohort(self, by: str | None, value: str) -> str:
        """`value` as the cap among cohorts `by` one thing holds it ("" with no `by`)."""
        return self._cohorts[by](value) if by else ""
