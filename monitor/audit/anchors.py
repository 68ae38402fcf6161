"""A judge that is checked: each judge evaluator scores a set of labelled records (the
anchors: `anchors.json`, written for this project, or the user's `audit.anchors.file`) every
`audit.anchors.every`, within the budget, and a judge whose verdicts on them moved is paged
as "the judge changed", not as the service.

The test, per check, against the judge's verdicts at its baseline check (its first, or the
one after its last page): b anchors it got right then and wrong now, c wrong then and right
now. If the judge is unchanged — each anchor's verdict drawn afresh from the same
distribution at every check — an anchor right with probability q flips one way with
probability q(1 − q) and the other way with the same, so given b + c flips, b is
Binomial(b + c, 1/2) (McNemar's exact test). A two-sided p-value below `alpha` pages; an
unchanged judge pages at most `alpha` of its checks, whatever its accuracy. After a page the
judge's current verdicts are its new baseline (the change is told once); the alert resolves
at the next check that does not page.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, Protocol

from monitor.audit._ticker import Ticker
from monitor.component import GENERATOR, Alert, Notifier
from monitor.evaluators.base import Evaluator
from monitor.records import RagRecord, RecordError, parse_record
from monitor.telemetry import Telemetry

log = logging.getLogger(__name__)
RULE = "judge_changed"


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


def changed_p_value(worse: int, better: int) -> float:
    """McNemar's exact two-sided p-value: `worse` anchors flipped from right to wrong and
    `better` from wrong to right."""
    flips = worse + better
    if flips == 0:
        return 1.0
    tail = sum(math.comb(flips, k) for k in range(min(worse, better) + 1)) / 2.0**flips
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True, slots=True)
class Check:
    """One judge's check: per anchor, whether its verdict was right (None: no verdict)."""

    right: tuple[bool | None, ...]

    @property
    def accuracy(self) -> float | None:
        judged = [r for r in self.right if r is not None]
        return sum(judged) / len(judged) if judged else None


class JudgeChanges:
    """The judges whose last anchor check paged a change, with what a page on their
    verdicts should say: written by `AnchorCheck`, read by `JudgeNotes`."""

    def __init__(self) -> None:
        self._notes: dict[str, str] = {}

    def changed(self, evaluator: str, note: str) -> None:
        self._notes[evaluator] = note

    def settled(self, evaluator: str) -> None:
        self._notes.pop(evaluator, None)

    def note(self, evaluator: str) -> str | None:
        return self._notes.get(evaluator)


class JudgeNotes:
    """A `Notifier` in front of another: a firing page on the verdicts of a judge whose
    last anchor check paged a change says so, in its description and in a
    `judge_changed` annotation (the Where alert too, which carries the page's labels)."""

    def __init__(self, notifier: Notifier, changes: JudgeChanges) -> None:
        self._notifier = notifier
        self._changes = changes

    async def start(self) -> None:
        await self._notifier.start()

    async def shutdown(self, deadline_s: float) -> None:
        await self._notifier.shutdown(deadline_s)

    def notify(self, alerts: Sequence[Alert]) -> None:
        self._notifier.notify([self._noted(alert) for alert in alerts])

    def _noted(self, alert: Alert) -> Alert:
        if alert.status != "firing" or alert.rule == RULE:
            return alert
        note = self._changes.note(alert.labels.get("evaluator", ""))
        if note is None:
            return alert
        description = f"{alert.annotations.get('description', '')} {note}".strip()
        annotations = {**alert.annotations, "description": description, "judge_changed": note}
        return replace(alert, annotations=annotations)


class AnchorCheck:
    """The component: checks every judge on the anchors every `every_s`."""

    def __init__(
        self,
        judges: Sequence[Evaluator],
        anchors: Sequence[Anchor],
        budget: Budget,
        telemetry: Telemetry,
        notifiers: Sequence[Notifier],
        *,
        changes: JudgeChanges,
        every_s: float,
        alpha: float,
        generator_url: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._judges = list(judges)
        self._anchors = list(anchors)
        self._budget = budget
        self._notifiers = list(notifiers)
        self._changes = changes
        self._alpha = alpha
        self._generator_url = generator_url
        self._clock = clock
        self._baselines: dict[str, Check] = {}
        self._firing: dict[str, Alert] = {}
        self._ticker = Ticker(every_s, self.check)
        t = telemetry
        self._accuracy = t.gauge(
            "judge_anchor_accuracy",
            "Share of the anchors the judge got right at its last check.",
            ("evaluator",),
        )
        self._changed = t.gauge(
            "judge_changed",
            "1 while the judge's verdicts on the anchors moved at its last check, else 0.",
            ("evaluator",),
        )
        self._outcomes = t.counter(
            "judge_anchor_evaluations",
            "Anchor evaluations by outcome: right, wrong, error, over_budget.",
            ("evaluator", "outcome"),
        )

    @property
    def changes(self) -> JudgeChanges:
        return self._changes

    async def start(self) -> None:
        for notifier in self._notifiers:
            await notifier.start()
        self._ticker.start()

    async def shutdown(self, deadline_s: float) -> None:
        await self._ticker.stop()
        for notifier in self._notifiers:
            await notifier.shutdown(deadline_s)

    async def check(self) -> None:
        """Check every judge once (a judge the budget stops midway is not tested)."""
        for judge in self._judges:
            found = await self._score(judge)
            if found is not None:
                self._compare(judge.name, found)

    async def _score(self, judge: Evaluator) -> Check | None:
        right: list[bool | None] = []
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
            else:
                correct = (not result.passed) == anchor.defect
                self._outcomes.labels(judge.name, "right" if correct else "wrong").inc()
                right.append(correct)
        return Check(tuple(right))

    def _compare(self, name: str, now: Check) -> None:
        accuracy = now.accuracy
        if accuracy is not None:
            self._accuracy.labels(name).set(accuracy)
        base = self._baselines.get(name)
        if base is None:
            self._baselines[name] = now
            self._changed.labels(name).set(0)
            return
        pairs = [(b, n) for b, n in zip(base.right, now.right, strict=True) if None not in (b, n)]
        worse = sum(1 for b, n in pairs if b and not n)
        better = sum(1 for b, n in pairs if n and not b)
        p = changed_p_value(worse, better)
        if p >= self._alpha:
            self._changed.labels(name).set(0)
            self._changes.settled(name)
            self._resolve(name)
            return
        self._baselines[name] = now
        self._changed.labels(name).set(1)
        figures = {
            "anchors": len(pairs),
            "accuracy_before": _share(b for b, _ in pairs),
            "accuracy_now": _share(n for _, n in pairs),
            "right_then_wrong": worse,
            "wrong_then_right": better,
            "p_value": p,
        }
        log.warning(
            "judge %s changed: on %d anchors its accuracy went from %.0f%% to %.0f%% (%d "
            "right before and wrong now, %d the other way; p = %.2g < %g); its verdicts "
            "are the new baseline",
            name,
            len(pairs),
            100 * figures["accuracy_before"],
            100 * figures["accuracy_now"],
            worse,
            better,
            p,
            self._alpha,
        )
        self._page(name, figures)

    def _page(self, name: str, figures: dict[str, Any]) -> None:
        now = datetime.fromtimestamp(self._clock(), UTC)
        summary = (
            f"The judge {name} changed: anchor accuracy {figures['accuracy_before']:.0%} → "
            f"{figures['accuracy_now']:.0%}"
        )
        alert = Alert(
            rule=RULE,
            service="",
            status="firing",
            labels={
                "alertname": "RagMonitorJudgeChanged",
                "evaluator": name,
                "severity": "warning",
                "generator": GENERATOR,
            },
            annotations={
                "summary": summary,
                "description": (
                    f"{summary} on {figures['anchors']} anchors: "
                    f"{figures['right_then_wrong']} right before and wrong now, "
                    f"{figures['wrong_then_right']} the other way (McNemar p = "
                    f"{figures['p_value']:.2g}). A move of this judge's defect rate now is "
                    "the judge's, not the service's: a model or prompt behind its name changed."
                ),
                "anchor_figures": json.dumps(figures),
            },
            starts_at=now,
            ends_at=now + timedelta(days=1),
            generator_url=self._generator_url,
        )
        self._firing[name] = alert
        self._changes.changed(
            name,
            f"The judge {name} changed at its last anchor check ({figures['accuracy_before']:.0%}"
            f" → {figures['accuracy_now']:.0%} of the anchors right): this move may be the "
            "judge's, not the service's.",
        )
        self._notify([alert])

    def _resolve(self, name: str) -> None:
        alert = self._firing.pop(name, None)
        if alert is None:
            return
        now = datetime.fromtimestamp(self._clock(), UTC)
        resolved = Alert(
            alert.rule,
            alert.service,
            "resolved",
            alert.labels,
            alert.annotations,
            alert.starts_at,
            now,
            alert.generator_url,
        )
        self._notify([resolved])

    def _notify(self, alerts: list[Alert]) -> None:
        for notifier in self._notifiers:
            notifier.notify(alerts)


def _share(values: Any) -> float:
    seen = list(values)
    return sum(seen) / len(seen) if seen else 0.0
