"""Two checks of one judge on the same labelled items (the audit's anchors): the items whose
verdict flipped between them, counted both ways, and McNemar's exact test of whether the
flips lean one way (`monitor.audit.anchors` pages a judge that changed on it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def changed_p_value(worse: int, better: int) -> float:
    """McNemar's exact two-sided p-value: `worse` anchors flipped from right to wrong and
    `better` from wrong to right."""
    flips = worse + better
    if flips == 0:
        return 1.0
    tail = sum(math.comb(flips, k) for k in range(min(worse, better) + 1)) / 2.0**flips
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True, slots=True)
class Flips:
    """The anchors whose verdict differs between two checks, counted both ways."""

    right_then_wrong: int
    wrong_then_right: int
    failed_then_passed: int
    passed_then_failed: int

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool, bool]]) -> Flips:
        """From (right then, right now, the anchor is hallucinated) per anchor."""
        worse = [defect for then, now, defect in pairs if then and not now]
        better = [defect for then, now, defect in pairs if now and not then]
        # Right then wrong on a hallucinated anchor: failed it then, passes it now.
        return cls(
            len(worse),
            len(better),
            sum(worse) + len(better) - sum(better),
            sum(better) + len(worse) - sum(worse),
        )

    @property
    def p_value(self) -> float:
        """Either count of flips one way, Bonferroni-corrected for testing two."""
        accuracy = changed_p_value(self.right_then_wrong, self.wrong_then_right)
        verdict = changed_p_value(self.failed_then_passed, self.passed_then_failed)
        return min(1.0, 2.0 * min(accuracy, verdict))
