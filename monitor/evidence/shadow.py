"""What a regression rule keeps of a revision scoring in shadow beside its own
(`evaluators[].next`): the differences of their verdicts on the same records, saved in the
state file and carried into the changeover at the switch (`Baseline.take_shadow`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.evidence.counts import Moments, add_paired
from monitor.evidence.window import saved_number


@dataclass(slots=True)
class Shadow:
    """What a shadowed revision measured against the entry's own on the same records
    before it replaced it: its `revision`, `paired` (verdicts, sum, squares) of the
    differences shadow - own, and when its last pair came (`last`)."""

    revision: str
    paired: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    last: float = 0.0

    def add(self, own: Moments, shadow: Moments, now: float) -> None:
        if add_paired(self.paired, own, shadow):
            self.last = now

    def saved(self) -> list[Any]:
        return [self.revision, *self.paired, self.last]

    @staticmethod
    def restored(raw: Any) -> Shadow | None:
        """A shadow's saved revision and numbers (None: none was under way, or a state
        file from before shadows were kept)."""
        if raw is None:
            return None
        revision, n, total, squares, last = raw
        if not isinstance(revision, str):
            raise TypeError("shadow: the revision is not text")
        paired = [saved_number(n, nonnegative=True), saved_number(total)]
        paired.append(saved_number(squares, nonnegative=True))
        return Shadow(revision, paired, saved_number(last, nonnegative=True))
