"""The statistics the alert rules and the audit judge with, behind this one interface (the
fence: `monitor/alerts/README.md`): verdict counts and times in; sums, expectations and tests
out.

- what is counted: `Moments` (sums of defect values), `Unit` (one conversation's verdicts,
  or one verdict), `Arrival` (verdicts judged at once against their conversation's earlier
  ones), `Batch` (what waits for the sequential test), `Units` (gathers them per rule,
  service and cohort; ids as `conversation_key`);
- windows of counts: `SlidingWindow`, `UnitSums` (the units' sums) and `design_effect`;
- a rule's thresholds, and what each means: `Terms` (every kind and statistic reads them
  there);
- what a service is expected to show (regression rules): `Baseline` (where it logs:
  `Say`), holding the `History` (its `Expectation` and `Level`, `history_span_s`,
  `LONG_LEVEL_FACTOR`), a fresh rule's `FirstLevel`, an evaluator `Changeover` and its
  `Overlap`, and a `Shadow`;
- the sequential test: `SequentialTest`, and `bets` (its `Bets`) against an expectation;
  a regression rule's `Judging` (the test or the window's lean, the last advance, and the
  level last judged against, which a page holds on while its baseline is empty);
- tests at a look: `look_level`, `one_sided_z`, `wilson_interval`, `design_interval`,
  `increase_p_value`, `rise_p_value`;
- who sent the verdicts: `Senders` (the sender screen), `screen_bytes`;
- the audit's: the true rate from a detector's verdicts and an audited share of a
  reference's (`estimate`, prediction-powered, of a window's `Tally` of `Trace`s; its
  `Estimate`), and whether a judge's verdicts on the same anchors moved (`Flips`, McNemar's
  `changed_p_value`);
- reading saved state: `saved_number`, `restore_slices`.
"""

from monitor.evidence.baseline import Baseline, Say
from monitor.evidence.changeover import Changeover
from monitor.evidence.conversations import conversation_key
from monitor.evidence.counts import NOTHING, Arrival, Batch, Moments, Unit
from monitor.evidence.first_level import FirstLevel
from monitor.evidence.flips import Flips, changed_p_value
from monitor.evidence.history import LONG_LEVEL_FACTOR, Expectation, History, history_span_s
from monitor.evidence.judging import Judging
from monitor.evidence.level import Level
from monitor.evidence.overlap import Overlap
from monitor.evidence.ppi import Estimate, Tally, Trace, Traces, estimate
from monitor.evidence.senders import BLIND_TEXT, Senders, screen_bytes
from monitor.evidence.sequential import Bets, SequentialTest, bets
from monitor.evidence.shadow import Shadow
from monitor.evidence.stats import (
    design_interval,
    increase_p_value,
    look_level,
    one_sided_z,
    rise_p_value,
    wilson_interval,
)
from monitor.evidence.terms import Terms
from monitor.evidence.units import Units
from monitor.evidence.window import (
    DEFAULT_BUCKETS,
    SlidingWindow,
    UnitSums,
    design_effect,
    restore_slices,
    saved_number,
)

__all__ = [
    "BLIND_TEXT",
    "DEFAULT_BUCKETS",
    "LONG_LEVEL_FACTOR",
    "NOTHING",
    "Arrival",
    "Baseline",
    "Batch",
    "Bets",
    "Changeover",
    "Estimate",
    "Expectation",
    "FirstLevel",
    "Flips",
    "History",
    "Judging",
    "Level",
    "Moments",
    "Overlap",
    "Say",
    "Senders",
    "SequentialTest",
    "Shadow",
    "SlidingWindow",
    "Tally",
    "Terms",
    "Trace",
    "Traces",
    "Unit",
    "UnitSums",
    "Units",
    "bets",
    "changed_p_value",
    "conversation_key",
    "design_effect",
    "design_interval",
    "estimate",
    "history_span_s",
    "increase_p_value",
    "look_level",
    "one_sided_z",
    "restore_slices",
    "rise_p_value",
    "saved_number",
    "screen_bytes",
    "wilson_interval",
]
