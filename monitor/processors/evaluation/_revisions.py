"""Which next revisions of the configured evaluators score records in shadow beside them now
(`evaluators[].next`) until their `until` (`_other_revision.py` says how they score; a monitor
upgrade's own shadow is `_upgrade.py`'s)."""

from __future__ import annotations

import logging

from monitor.config import Config, EvaluatorConfig
from monitor.evaluators.base import CpuScorer
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.evaluators.revision import revision
from monitor.processors.evaluation._other_revision import OtherRevision

log = logging.getLogger(__name__)


def other_revisions(
    config: Config, context: BuildContext, now: float
) -> tuple[dict[str, OtherRevision], list[EvaluatorConfig]]:
    """The other revisions of `config`'s evaluators still to be scored at `now`, by
    evaluator (one whose `until` has passed is said once and left out), and the entries of
    those that are CPU scorers (the worker processes build them)."""
    out: dict[str, OtherRevision] = {}
    cpu: list[EvaluatorConfig] = []
    for entry in config.evaluators:
        other = entry.next
        if other is None:
            continue
        other_entry = other.entry(entry)
        other_revision = revision(other_entry, config.judge)
        if other.until_s <= now:
            # A shadow past its time wants the operator (switch, or remove it): a warning.
            # check-config refuses one; a restart after `until` runs on without it.
            log.warning(
                "evaluators: %s's next revision %s is not scored: its time ended at %s "
                "(evaluators[].next.until); it scores in shadow no more: switch (move its "
                "keys into the entry), set a time ahead, or remove it",
                entry.name,
                other_revision,
                other.until,
            )
            continue
        log.info(
            "evaluators: %s's next revision %s scores %g of its verdicts' records in shadow "
            "until %s, measured against %s before it becomes the revision of record",
            entry.name,
            other_revision,
            other.share,
            other.until,
            revision(entry, config.judge),
        )
        evaluator = build(other_entry, context)
        out[entry.name] = OtherRevision(evaluator, other_revision, other.share, other.until_s)
        if isinstance(evaluator, CpuScorer):
            cpu.append(other_entry)
    return out, cpu
