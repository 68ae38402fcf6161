"""A regression rule's side of shadow scoring (`evaluators[].next`, docs/alerts.md,
"Shadow scoring"): while a new evaluator revision scores a share of the records beside the
entry's own, the differences of their verdicts on the same records are kept with the entry
(`Baseline.shadow`); when that revision becomes the entry's (the operator moves
`next`'s keys into the entry: the verdicts then carry the revision the shadow carried),
the changeover starts with them as its pairs (`Overlap.paired`), so the rule keeps its
expectation, translated by the offset measured before the switch, instead of learning it
after."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.alerts.kinds import Entry
from monitor.alerts.kinds.regression_state import RegressionState
from monitor.alerts.rule import Rule
from monitor.evidence import Moments


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
            state.baseline.count_shadow(
                revision, Moments.of_histogram(own), Moments.of_histogram(shadow), now
            )

    def switched(self, state: RegressionState, replaced: Entry, revision: str | None) -> None:
        """`replaced`'s revision gave way to `revision` and `state` starts its changeover:
        what `revision` measured in shadow against the one replaced becomes the changeover's
        pairs (`Baseline.take_shadow`)."""
        old: RegressionState = replaced.state
        state.baseline.take_shadow(old.baseline, revision, replaced.revision)
