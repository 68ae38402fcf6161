"""The boosts alert rules raise (`boost`): a rule's evaluator samples a service at the
boost's rate while the rule's evidence for it builds, with the rule's own thresholds met
(a judgment's p-value is 1 until then), or it fires; lowered when the evidence fades or
the entries that raised it are gone (dropped, or their slots evicted). The sampler's side
is `monitor.boosts`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from monitor.alerts.gauges import AlertGauges
from monitor.alerts.kinds import Entry, Judgment
from monitor.alerts.rule import Rule
from monitor.boosts import SamplingBoosts

log = logging.getLogger(__name__)


class RaisedBoosts:
    """Which (rule index, service) has raised its boost."""

    def __init__(
        self, rules: Sequence[Rule], boosts: SamplingBoosts | None, gauges: AlertGauges
    ) -> None:
        self._rules = rules
        self._boosts = boosts
        self._gauges = gauges
        self._raised: set[tuple[int, str]] = set()

    def follow(
        self, i: int, service: str, entries: Mapping[str, Entry], judgments: Mapping[str, Judgment]
    ) -> None:
        """Raises or lowers rule `i`'s boost of `service` as its evidence comes and goes."""
        rule = self._rules[i]
        boost, evaluator = rule.config.boost, rule.config.evaluator
        if boost is None or evaluator is None or self._boosts is None:
            return
        firing = any(entry.firing for entry in entries.values())
        p = min((j.p_value for j in judgments.values()), default=1.0)
        if not (firing or p < boost.while_p_below):
            self.lower(i, service, "evidence faded")
            return
        if (i, service) in self._raised:
            return
        self._raised.add((i, service))
        name = rule.config.name
        self._boosts.raise_rate(evaluator, service, name, boost.sample_rate)
        log.info(
            "alert %s: %s for %s: %s sampled at %g",
            name,
            "firing" if firing else f"evidence building (p = {p:.3g})",
            service,
            evaluator,
            boost.sample_rate,
        )
        self._gauges.boost_active.labels(service, name).set(1)

    def lower(self, i: int, service: str, why: str) -> None:
        """Lowers rule `i`'s boost of `service`, if raised."""
        if (i, service) not in self._raised:
            return
        self._raised.discard((i, service))
        cfg = self._rules[i].config
        assert self._boosts is not None and cfg.evaluator is not None
        self._boosts.lower_rate(cfg.evaluator, service, cfg.name)
        log.info("alert %s: %s for %s: %s back to its rate", cfg.name, why, service, cfg.evaluator)
        self._gauges.boost_active.labels(service, cfg.name).set(0)

    def lower_service(self, service: str, why: str) -> None:
        for i, held in list(self._raised):
            if held == service:
                self.lower(i, service, why)
