"""An evaluator's previous revision, scored alongside it for a changeover period
(`evaluators[].previous`).

On `share` of the records the evaluator gave a verdict on (chosen by a hash of the record's
sampling key, so a trace's records go together and a record replayed is chosen again),
until `until`, the previous revision scores the record too: a CPU scorer in the batch's
task beside its current revision (`Job.previous`), a judge as one more call admitted like a boost's
(only while the budget keeps room for the base sample). Its verdict goes with the record's
own results to every sink (`component.Evaluated.previous`), used by the alert engine,
which measures the new revision's offset on the same records, and the results file, under
each line's `previous`, for `backtest`; it is counted in
`previous_revision_evaluations_total`; never in the evaluator's own metrics, results or
events.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.evaluators.base import Evaluator
from monitor.processors.sampler import sampling_position

# Salts the sampling key, so that which records the previous revision scores is a choice
# of its own, not the sampler's.
_SALT = "@previous"


@dataclass(frozen=True, slots=True)
class PreviousScorer:
    """The previous revision of one evaluator: its evaluator, its revision, and which
    records it scores (`share` of them until `until_s`, seconds since the epoch)."""

    evaluator: Evaluator
    revision: str
    share: float
    until_s: float

    def chosen(self, sampling_key: str, now: float) -> bool:
        """Whether it scores the record of `sampling_key` at `now`."""
        return now < self.until_s and sampling_position(sampling_key + _SALT) < self.share
