"""A rule's terms: every threshold it judges with, in one object that every rule kind and
the evidence it calls read (`Rule.of` in `monitor.alerts.rule` makes it from the config).

What a threshold MEANS is said here once: how large a rise matters over a level (`rise`,
the test's null point `margin`), how rare a false page may be at one look (`level`), how
many verdicts a judgment needs (`enough`). A kind or a statistic asks these; none reads
`min_increase` or the budget itself, so changing what a threshold means is one edit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from monitor.evidence.season import Season
from monitor.evidence.stats import look_level

Reference = Literal["trailing", "last_week", "pinned"]


@dataclass(frozen=True, slots=True)
class Terms:
    """The thresholds of one rule.

    - `window_s`: the current window; `budget_s`: one false page per this many seconds on a
      service that did not change; `min_samples`: the verdicts the current window needs.
    - `steps`: defect values are multiples of `1 / steps` (1: pass/fail verdicts).
    - `min_increase`: the rise a regression or cohort rule pages on (`rise`);
      `max_rate`: the rate an absolute rule pages above.
    - A regression rule's baseline: `baseline_s` its window (0: the rule has none),
      `season`, `baseline_samples` (the verdicts a level needs), `accept_after_s` (a
      page lasting this long is accepted as the new normal), and `reference` with its
      `pinned` period (start, end) and `pinned_name` as configured.
    """

    window_s: float
    budget_s: float
    min_samples: int = 1
    steps: int = 1
    min_increase: float = 0.0
    max_rate: float = 1.0
    baseline_s: float = 0.0
    season: Season = "none"
    baseline_samples: int = 1
    accept_after_s: float = float("inf")
    reference: Reference = "trailing"
    pinned: tuple[float, float] = (0.0, 0.0)
    pinned_name: str = ""

    def rise(self, level: float) -> float:
        """The smallest rise over `level` (a mean defect value) that a page is about."""
        return self.min_increase

    def margin(self, level: float) -> float:
        """How far above `level` the mean may be and still count as no rise: the null point
        every rise test starts from (half of `rise`: docs/alerts.md, "Regression rules")."""
        return self.rise(level) / 2

    def rise_text(self) -> str:
        """`rise` as a rule's summary says it: `0.02`."""
        return f"{self.min_increase:g}"

    def level(self, interval_s: float, looks: int = 1) -> float:
        """The chance of a false page allowed at one look, judged every `interval_s` with
        `looks` tests at each (`look_level`)."""
        return look_level(interval_s, self.budget_s, looks)

    def enough(self, samples: float) -> bool:
        """Whether `samples` verdicts are enough for a window to be judged."""
        return samples >= self.min_samples
