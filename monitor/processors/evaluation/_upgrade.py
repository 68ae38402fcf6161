"""A monitor release that shadows itself (docs/alerts.md, "A monitor upgrade shadows
itself"): where this release carries the previous release's detector parameters
(`monitor.detector.releases`) and an alert rule's saved baseline was learned with that
release's revision of an evaluator, the previous revision stays the revision of record for
a day after the upgrade, scoring every record the evaluator gives a verdict on, while this
release's revision scores the same records and its verdict on a share of them goes to the
rules in shadow, as `evaluators[].next` does (`Evaluated.shadow`); a day after the first
shadow pair, this release's revision becomes the one of record and the rules switch with
the offset measured in shadow. No configuration: the decision is taken once the alert
state is restored (`AlertEngine.restored`) and logged, at each step, with why not where
it is not taken.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from monitor.component import Held
from monitor.config import Config, EvaluatorConfig
from monitor.config._evaluators import SHADOW_SHARE
from monitor.evaluators.base import CpuScorer
from monitor.evaluators.factory import BuildContext
from monitor.evaluators.registry import build
from monitor.evaluators.revision import revision
from monitor.processors.evaluation._other_revision import OtherRevision, Upgrade

log = logging.getLogger(__name__)

# How long the previous revision stays the one of record after the upgrade (from the
# first shadow pair): a day of pairs measures the offset by the hour (`Slope`).
DAY_S = 86_400.0
# The evaluators whose verdicts the carried detector parameters decide.
DETECTOR = frozenset({"local_groundedness"})


@dataclass(slots=True)
class Upgrades:
    """The self-shadows this release may start, by evaluator (`carried_upgrades`), and why
    an evaluator with none has none; `decide` starts them."""

    scorers: dict[str, OtherRevision]
    # Evaluators with no self-shadow possible: their revision in this release, and why not
    # (said where the state shows a baseline of another revision).
    without: dict[str, tuple[str, str]]

    def decide(self, held: Mapping[str, Sequence[Held]], now: float) -> None:
        """Starts each self-shadow whose previous revision a rule's baseline holds (and,
        after a restart, goes on from the first pair its shadow measured); logs each
        decision."""
        for name, scorer in self.scorers.items():
            upgrade = scorer.upgrade
            assert upgrade is not None
            baselines = list(held.get(name, ()))
            revisions = sorted({h.revision for h in baselines if h.revision is not None})
            if upgrade.old not in revisions:
                if revisions and revisions != [upgrade.new]:
                    log.warning(
                        "evaluators: %s does not shadow itself after the upgrade: this release "
                        "carries its previous revision %s, but the alert rules' baselines were "
                        "learned with %s: the rules judge on the new revision's interim level "
                        "after the change",
                        name,
                        upgrade.old,
                        ", ".join(revisions),
                    )
                elif not revisions:
                    log.info(
                        "evaluators: %s: no alert rule's saved baseline holds its previous "
                        "revision %s: this release's revision %s scores alone",
                        name,
                        upgrade.old,
                        upgrade.new,
                    )
                continue
            firsts = [h.shadow_since for h in baselines if h.shadow == upgrade.new]
            since = min((t for t in firsts if t > 0.0), default=now)
            upgrade.until_s = since + DAY_S
            if upgrade.until_s <= now:
                log.info(
                    "evaluators: %s: the day of shadow after the upgrade ended at %s: this "
                    "release's revision %s is the revision of record; the rules switch from %s "
                    "with the offset measured in shadow",
                    name,
                    _utc(upgrade.until_s),
                    upgrade.new,
                    upgrade.old,
                )
                upgrade.said_switch = True
                continue
            log.info(
                "evaluators: %s shadows itself after the upgrade: the alert rules' baselines "
                "were learned with the previous release's revision %s, which this release "
                "carries; it stays the revision of record until %s, scoring every record, "
                "while this release's revision %s scores them too and %g of its verdicts go to "
                "the rules in shadow; then %s becomes the revision of record and the rules "
                "switch with the offset measured (no configuration)",
                name,
                upgrade.old,
                _utc(upgrade.until_s),
                upgrade.new,
                scorer.share,
                upgrade.new,
            )
        for name, (new, why) in self.without.items():
            others = held.get(name, ())
            foreign = sorted({h.revision for h in others if h.revision not in (None, new)})
            if foreign:
                log.warning(
                    "evaluators: %s does not shadow itself: the alert rules' baselines were "
                    "learned with %s, not this release's revision %s, and %s; the rules "
                    "judge on the new revision's interim level after the change",
                    name,
                    ", ".join(str(r) for r in foreign),
                    new,
                    why,
                )


def _utc(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def carried_upgrades(
    config: Config, context: BuildContext, released: tuple[str, str, str] | None
) -> tuple[Upgrades, list[EvaluatorConfig]]:
    """The self-shadows this release can start for `config`'s evaluators, with the
    previous release `released` (version, model file, head file; None: it carries none),
    and the entries of their previous revisions (CPU scorers: the worker processes build
    them)."""
    scorers: dict[str, OtherRevision] = {}
    without: dict[str, tuple[str, str]] = {}
    cpu: list[EvaluatorConfig] = []
    for entry in config.evaluators:
        new = revision(entry, config.judge)
        why = ""
        if entry.name not in DETECTOR:
            why = "this release carries no previous revision of it (only the detector's)"
        elif released is None:
            why = "this release carries no previous detector (its parameters did not change)"
        elif entry.next is not None:
            why = "its entry has a next revision of its own scoring in shadow"
        elif entry.escalate_from is not None:
            why = "it is escalated from another evaluator"
        if why:
            without[entry.name] = (new, why)
            continue
        assert released is not None
        old_entry = entry.released(*released)
        evaluator = build(old_entry, context)
        if not isinstance(evaluator, CpuScorer):
            without[entry.name] = (new, "its previous revision is no CPU scorer")
            continue
        upgrade = Upgrade(entry.name, revision(old_entry, config.judge), new)
        scorers[entry.name] = OtherRevision(
            evaluator, upgrade.old, SHADOW_SHARE, 0.0, upgrade=upgrade
        )
        cpu.append(old_entry)
    return Upgrades(scorers, without), cpu
