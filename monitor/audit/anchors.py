"""A judge that is checked: each judge evaluator scores a set of labelled records (the
anchors: `anchors.json`, written for this project, or the user's `audit.anchors.file`) every
`audit.anchors.every`, within the budget, and a judge whose verdicts on them moved is paged
as "the judge changed", not as the service.

The test, per check, against the judge's verdicts at its baseline check (its first, or the
one after its last page), on the anchors it judged both times. If the judge is unchanged —
each anchor's verdict drawn afresh from the same distribution at every check — an anchor
failed with probability q turns from pass to fail with probability q(1 − q) and from fail to
pass with the same, so given the flips, the count of either direction is Binomial(flips, 1/2)
(McNemar's exact test). Two such counts are tested: flips of correctness (right then wrong
against wrong then right: the judge's accuracy moved) and flips of the verdict (fail then
pass against pass then fail: the defect rate it reports moved — a judge that now passes
what it failed can keep its accuracy and still move every rate an alert rule watches). The
smaller two-sided p-value, doubled (Bonferroni), below `alpha` pages; an unchanged judge
pages at most `alpha` of its checks, whatever its accuracy. After a page the judge's current
verdicts are its new baseline (the change is told once); the alert resolves at the next
check that does not page. The page is the alert engine's (`Pager`: its judge-changed rule,
`monitor.alerts.kinds.judge_changed`): re-sent, resolved and kept across restarts as every
rule's page is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from monitor.audit._ticker import Ticker
from monitor.evaluators.base import Evaluator
from monitor.evidence import Flips
from monitor.records import RagRecord, RecordError, parse_record
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
MIN_REFERENCE_ACCURACY = 0.8
"""The share of the anchors a judge must get right at its last check for an audit to take
its verdicts as the reference; below it, or with its verdicts all one way, the audit's
estimate is withheld."""


class Pager(Protocol):
    """Where a check that compared a judge with its baseline goes (the alert engine's
    `report`, which pages): the figures of the change it found, or None."""

    def __call__(self, evaluator: str, figures: Mapping[str, float] | None, /) -> None: ...


class Budget(Protocol):
    """The judges' budget (`monitor.processors.budget.BudgetGate`), as anchors use it."""

    def admit(self, boost: bool = False) -> bool: ...

    def spend(self, tokens: int, cost_usd: float, boost: bool = False) -> None: ...

    def reached(self, boost: bool = False, local: bool = False) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Anchor:
    record: RagRecord
    defect: bool  # the label: the judge should fail it


def load_anchors(path: str | None) -> list[Anchor]:
    """The anchors of `path` (a JSON list of records, each with `label` "pass" or
    "fail"), or the shipped set; raises ValueError naming the entry and its problem."""
    if path is None:
        text = resources.files("monitor.audit").joinpath("anchors.json").read_text("utf-8")
        where = "the shipped anchors"
    else:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        where = path
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: a JSON list of labelled records is expected")
    anchors = []
    for i, item in enumerate(items):
        label = item.get("label") if isinstance(item, dict) else None
        if label not in ("pass", "fail"):
            raise ValueError(f'{where}: entry {i}: label must be "pass" or "fail"')
        try:
            record = parse_record({k: v for k, v in item.items() if k != "label"})
        except RecordError as exc:
            raise ValueError(f"{where}: entry {i}: {exc.detail}") from None
        anchors.append(Anchor(record, label == "fail"))
    return anchors


@dataclass(frozen=True, slots=True)
class Check:
    """One judge's check: per anchor, whether its verdict was right (None: no verdict),
    and whether it failed the anchor (None: no verdict)."""

    right: tuple[bool | None, ...]
    failed: tuple[bool | None, ...] = ()

    @property
    def failed_share(self) -> float | None:
        judged = [f for f in self.failed if f is not None]
        return sum(judged) / len(judged) if judged else None

    @property
    def accuracy(self) -> float | None:
        judged = [r for r in self.right if r is not None]
        return sum(judged) / len(judged) if judged else None


class JudgeChanges:
    """The judges whose last anchor check paged a change, with what a page on their
    verdicts should say: written by `AnchorCheck`, asked by the alert engine (a firing
    page's description, its `judge_changed` annotation, its Where alert, `/alerts` and the
    log line carry the note). Also each judge's last check, which an audit asks before it
    takes the judge's verdicts as its reference (`withheld`)."""

    def __init__(self) -> None:
        self._notes: dict[str, str] = {}
        self._checks: dict[str, Check] = {}

    def checked(self, evaluator: str, check: Check) -> None:
        self._checks[evaluator] = check

    def withheld(self, evaluator: str) -> str | None:
        """Why an estimate with `evaluator` as its reference is withheld (None: it is not):
        not checked on the anchors yet, below `MIN_REFERENCE_ACCURACY` at its last check,
        or its verdicts on them all one way."""
        check = self._checks.get(evaluator)
        if check is None or check.accuracy is None:
            return f"the reference {evaluator} has not been checked on the anchors yet"
        judged = sum(r is not None for r in check.right)
        failed = check.failed_share
        if check.accuracy < MIN_REFERENCE_ACCURACY or failed in (0.0, 1.0):
            return (
                f"the reference {evaluator} got {check.accuracy:.0%} of {judged} anchors "
                f"right at its last check (an audit needs {MIN_REFERENCE_ACCURACY:.0%}) and "
                f"failed {failed:.0%} of them"
                + (": its verdicts are all one way" if failed in (0.0, 1.0) else "")
            )
        return None

    def changed(self, evaluator: str, note: str) -> None:
        self._notes[evaluator] = note

    def settled(self, evaluator: str) -> None:
        self._notes.pop(evaluator, None)

    def note(self, evaluator: str | None) -> str | None:
        return None if evaluator is None else self._notes.get(evaluator)


class AnchorCheck:
    """The component: checks every judge on the anchors every `every_s`."""

    def __init__(
        self,
        judges: Sequence[Evaluator],
        anchors: Sequence[Anchor],
        budget: Budget,
        telemetry: Telemetry,
        pager: Pager,
        *,
        changes: JudgeChanges,
        every_s: float,
        alpha: float,
    ) -> None:
        self._judges = list(judges)
        self._anchors = list(anchors)
        self._budget = budget
        self._pager = pager
        self._changes = changes
        self._alpha = alpha
        self._baselines: dict[str, Check] = {}
        self._ticker = Ticker(every_s, self.check)
        t = telemetry
        self._accuracy = t.gauge("judge_anchor_accuracy")
        self._changed = t.gauge("judge_changed")
        self._outcomes = t.counter("judge_anchor_evaluations")

    @property
    def changes(self) -> JudgeChanges:
        return self._changes

    async def start(self) -> None:
        self._ticker.start()

    async def shutdown(self, deadline_s: float) -> None:
        await self._ticker.stop()

    async def check(self) -> None:
        """Check every judge once (a judge the budget stops midway is not tested)."""
        for judge in self._judges:
            found = await self._score(judge)
            if found is not None:
                self._changes.checked(judge.name, found)
                why = self._changes.withheld(judge.name)
                if why is not None:
                    log.warning(
                        "judge %s on the anchors: %s; an audit whose reference it is "
                        "withholds its estimate",
                        judge.name,
                        why,
                    )
                self._compare(judge.name, found)

    async def _score(self, judge: Evaluator) -> Check | None:
        right: list[bool | None] = []
        failed: list[bool | None] = []
        for anchor in self._anchors:
            if not self._budget.admit():
                self._outcomes.labels(judge.name, "over_budget").inc()
                log.warning(
                    "judge %s: anchor check stopped after %d of %d anchors: over budget (%s)",
                    judge.name,
                    len(right),
                    len(self._anchors),
                    self._budget.reached() or "freed since",
                )
                return None
            result = await judge.evaluate(anchor.record)
            if result.input_tokens or result.output_tokens or result.cost:
                self._budget.spend(result.input_tokens + result.output_tokens, result.cost)
            if result.passed is None:
                self._outcomes.labels(judge.name, "error").inc()
                right.append(None)
                failed.append(None)
            else:
                correct = (not result.passed) == anchor.defect
                self._outcomes.labels(judge.name, "right" if correct else "wrong").inc()
                right.append(correct)
                failed.append(not result.passed)
        return Check(tuple(right), tuple(failed))

    def _compare(self, name: str, now: Check) -> None:
        accuracy = now.accuracy
        if accuracy is not None:
            self._accuracy.labels(name).set(accuracy)
        base = self._baselines.get(name)
        if base is None:
            self._baselines[name] = now
            self._changed.labels(name).set(0)
            return
        pairs = [
            (b, n, anchor.defect)
            for b, n, anchor in zip(base.right, now.right, self._anchors, strict=True)
            if b is not None and n is not None
        ]
        flips = Flips.of(pairs)
        p = flips.p_value
        if p >= self._alpha:
            self._changed.labels(name).set(0)
            self._changes.settled(name)
            self._pager(name, None)
            return
        self._baselines[name] = now
        self._changed.labels(name).set(1)
        figures = {
            "anchors": len(pairs),
            "accuracy_before": _share(b for b, _, _ in pairs),
            "accuracy_now": _share(n for _, n, _ in pairs),
            # A verdict is a defect when it is right on a hallucinated anchor or wrong on
            # a faithful one.
            "failed_before": _share(b == d for b, _, d in pairs),
            "failed_now": _share(n == d for _, n, d in pairs),
            "right_then_wrong": flips.right_then_wrong,
            "wrong_then_right": flips.wrong_then_right,
            "failed_then_passed": flips.failed_then_passed,
            "passed_then_failed": flips.passed_then_failed,
            "p_value": p,
        }
        log.warning(
            "judge %s changed: on %d anchors its accuracy went from %.0f%% to %.0f%% (%d "
            "right before and wrong now, %d the other way) and the share it failed from "
            "%.0f%% to %.0f%% (%d failed before and passed now, %d the other way); p = %.2g "
            "< %g; its verdicts are the new baseline",
            name,
            len(pairs),
            100 * figures["accuracy_before"],
            100 * figures["accuracy_now"],
            flips.right_then_wrong,
            flips.wrong_then_right,
            100 * figures["failed_before"],
            100 * figures["failed_now"],
            flips.failed_then_passed,
            flips.passed_then_failed,
            p,
            self._alpha,
        )
        self._page(name, figures)

    def _page(self, name: str, figures: dict[str, Any]) -> None:
        self._changes.changed(
            name,
            f"The judge {name} changed at its last anchor check ({figures['accuracy_before']:.0%}"
            f" → {figures['accuracy_now']:.0%} of the anchors right, "
            f"{figures['failed_before']:.0%} → {figures['failed_now']:.0%} failed): this move "
            "may be the judge's, not the service's.",
        )
        self._pager(name, figures)


def _share(values: Any) -> float:
    seen = list(values)
    return sum(seen) / len(seen) if seen else 0.0
