"""The other revision of an evaluator scored beside it: its next one, scored in shadow
before it is the revision of record (`evaluators[].next`), or, while a monitor release
shadows itself (`_upgrade.py`), the previous release's, which is the revision of record for
a day.

A next revision scores `share` of the records the evaluator gave a verdict on (chosen by a
hash of the record's sampling key, so a trace's records go together and a record replayed
is chosen again), until `until`: a CPU scorer in the batch's task beside its current
revision (`Job.others`), a judge as one more call admitted like a boost's (only while the
budget keeps room for the base sample). Its verdicts are shadow verdicts: they go with the
record to every sink (`component.Evaluated.shadow`), and only the alert engine reads them
(it measures the offset before the switch); they are counted in
`shadow_revision_evaluations_total`, labelled by revision; nowhere else (not the service's
metrics, rates, alerts, results or audit). A monitor release that shadows itself has the
same roles the other way round: the previous release's revision scores every record and is
the revision of record, and this release's verdict on a share of them is the shadow verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from monitor.evaluators.base import Evaluator
from monitor.processors.sampler import sampling_position

# Salts the sampling key, so that which records the other revision scores is a choice of
# its own, not the sampler's.
_SALT = "@next"


@dataclass(slots=True)
class Upgrade:
    """One evaluator's self-shadow after a monitor upgrade (`_upgrade.py`): its previous
    release's revision `old` and this release's `new`; `until_s` is 0 until it starts, then
    when it switches."""

    evaluator: str
    old: str
    new: str
    until_s: float = 0.0
    said_switch: bool = False
    # Whether the revision-info gauge names the previous revision as the one of record.
    shown: bool = False

    def of_record(self, now: float) -> bool:
        """Whether the previous revision is the one of record at `now`."""
        return now < self.until_s

    def switch_due(self, now: float) -> bool:
        """Whether the switch has come and is not said yet (said once, by the caller)."""
        if self.until_s <= 0.0 or now < self.until_s or self.said_switch:
            return False
        self.said_switch = True
        return True


@dataclass(frozen=True, slots=True)
class OtherRevision:
    """The next revision of one evaluator, scored in shadow: its evaluator, its revision,
    and which records it scores (`share` of them until `until_s`, seconds since the epoch).
    With `upgrade`, the previous release's revision of a monitor release that shadows
    itself: every record while it is the revision of record, and the share is that of this
    release's verdicts that go in shadow (`in_shadow`)."""

    evaluator: Evaluator
    revision: str
    share: float
    until_s: float
    upgrade: Upgrade | None = None

    def chosen(self, sampling_key: str, now: float) -> bool:
        """Whether it scores the record of `sampling_key` at `now`."""
        if self.upgrade is not None:
            return self.upgrade.of_record(now)
        return now < self.until_s and self.in_shadow(sampling_key)

    def in_shadow(self, sampling_key: str) -> bool:
        """Whether the record of `sampling_key` is in the share."""
        return sampling_position(sampling_key + _SALT) < self.share
