"""A regression rule's side of shadow scoring (`evaluators[].next`, docs/alerts.md,
"Shadow scoring"): while a new evaluator revision scores a share of the records beside the
entry's own, the differences of their verdicts on the same records are kept with the entry
(`RegressionState.shadow`); when that revision becomes the entry's (the operator moves
`next`'s keys into the entry: the verdicts then carry the revision the shadow carried),
the changeover starts with them as its pairs (`Overlap.paired`), so the rule keeps its
expectation, translated by the offset measured before the switch, instead of learning it
after."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from monitor.alerts.kinds import Entry
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import Rule
from monitor.evidence import Moments
from monitor.telemetry import RateLimitedLog

_log = RateLimitedLog(logging.getLogger(__name__), 3600.0)


class ShadowHooks:
    """What `monitor.alerts.kinds.Shadowing` asks of the regression kind."""

    rule: Rule

    def add_shadow(
        self,
        state: RegressionState,
        revision: str,
        shadow: Sequence[float],
        own: Sequence[float],
        now: float,
        firing: bool,
    ) -> None:
        """A shadowed revision's verdicts `shadow` beside the entry's own `own` on one record,
        to an entry `firing` or not (left out while it fires)."""
        if not firing:
            state.count_shadow(
                revision, Moments.of_histogram(own), Moments.of_histogram(shadow), now
            )

    def switched(self, state: RegressionState, replaced: Entry, revision: str | None) -> None:
        """`replaced`'s revision gave way to `revision` and `state` starts its changeover:
        what `revision` measured in shadow against the one replaced becomes the changeover's
        pairs (a shadow of another revision is dropped, said in the log)."""
        old: RegressionState = replaced.state
        shadow, change = old.shadow, state.changeover
        if shadow is None or change is None:
            return
        name = self.rule.config.name
        if shadow.revision != revision:
            _log.log(
                f"{name} shadow {state.series}",
                logging.WARNING,
                "alert %s for %s: revision %s scored in shadow, but %s replaced %s: what the "
                "shadow measured is dropped and the offset is measured anew",
                name,
                state.series,
                shadow.revision,
                revision,
                replaced.revision,
            )
            return
        for i, x in enumerate(shadow.paired):
            change.overlap.paired[i] += x
        _log.log(
            f"{name} shadow {state.series}",
            logging.INFO,
            "alert %s for %s: revision %s replaced %s after scoring %d records in shadow: "
            "the changeover starts with their offset",
            name,
            state.series,
            revision,
            replaced.revision,
            int(shadow.paired[0]),
        )
