"""Running a batch's sampled evaluators: the evaluation stage's work on the records of each
batch it takes.

Per record, each evaluator is sampled, skipped (not sampled, or lacking its input: counted
and logged), not escalated, or over budget (judges). A judge that only a boost sampled is
admitted only while the budget keeps room for the base sample (`BudgetGate`); refused, it
is counted again as the boost's and logged, once an hour at most. The CPU scorers
(the local evaluators) that sample a record have already scored it in the batch's task, with
its extraction (`_task.py`); here their results are counted and taken. Network evaluators
(LLM judges) run concurrently, each call under the evaluation deadline. Escalated
evaluators run after the evaluator they escalate from, on the records whose score fell in
their band; an escalated CPU scorer takes a task of its own. Then the next revisions of
evaluators that have one score their share of the records in shadow
(`_other_revision.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import CpuScorer, Evaluator
from monitor.processors.budget import BudgetGate
from monitor.processors.evaluation._other_revision import OtherRevision
from monitor.processors.evaluation._runner import TaskRunner
from monitor.processors.evaluation._task import Job, Scored, held_back
from monitor.processors.sampler import Sampled
from monitor.records import RagRecord, scripts
from monitor.results import EvalResult
from monitor.telemetry import RateLimitedLog, Telemetry

log = logging.getLogger(__name__)
_PARTS = ("query", "context", "response")  # the order a skip's reason is named in


@dataclass(slots=True)
class InFlight:
    """A record being evaluated: what was decided for it and what came back."""

    record: RagRecord
    sampled: frozenset[str]  # the evaluators that sample it
    service: str  # its label value
    missing: frozenset[str]
    scored: Scored  # what its CPU scorers gave in the batch's task
    results: dict[str, EvalResult]
    # CPU scorers only a boost sampled that the local limit held back.
    refused: frozenset[str] = frozenset()
    # What the other revisions of its CPU scorers (`_other_revision.py`) gave in the
    # batch's task.
    others_scored: Scored = field(default_factory=dict)
    # The verdicts of evaluators' next revisions scoring in shadow, by evaluator.
    shadow: dict[str, EvalResult] = field(default_factory=dict)
    # The record's script (`records.scripts`), found when an embedded evaluator asks.
    script: str | None = None

    @property
    def boosted(self) -> frozenset[str]:
        """The evaluators that sample it only because a boost raised their rate."""
        sampled = self.sampled
        return sampled.beyond_base if isinstance(sampled, Sampled) else frozenset()


@dataclass(frozen=True)
class _Stage:
    evaluator: Evaluator
    escalate_from: str | None
    band: tuple[float, float] | None


class BatchEvaluator:
    """The configured evaluators, run over one batch of records at a time."""

    def __init__(
        self,
        evaluators: Sequence[tuple[Evaluator, EvaluatorConfig]],
        budget: BudgetGate,
        telemetry: Telemetry,
        timeout_s: float,
        tasks: TaskRunner,
        *,
        pooled: bool,
        evaluate_suspect: bool = False,
        revisions: Mapping[str, str] | None = None,
        judge_timeout_s: float | None = None,
        others: Mapping[str, OtherRevision] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`others`: evaluators' other revisions (`_other_revision.py`) by evaluator
        name; `clock`: the time their `until` is compared with, in seconds since the epoch."""
        stages = [_Stage(ev, spec.escalate_from, spec.band) for ev, spec in evaluators]
        # Escalated evaluators run after the evaluator they escalate from.
        self._first = [s for s in stages if s.escalate_from is None]
        self._escalated = [s for s in stages if s.escalate_from is not None]
        self._cpu = {s.evaluator.name for s in stages if isinstance(s.evaluator, CpuScorer)}
        # The CPU scorers the batch's task runs, in the order configured.
        self.first_cpu = tuple(
            s.evaluator.name for s in self._first if s.evaluator.name in self._cpu
        )
        self._budget = budget
        self._t = telemetry
        self._timeout = timeout_s
        # A judge is cut no earlier than its own settings let it answer.
        self._judge_timeout = max(timeout_s, judge_timeout_s or 0.0)
        self._tasks = tasks
        self._pooled = pooled  # CPU scorers run in worker processes, not here
        self._warn = RateLimitedLog(log)
        # Records the trace stage marked `extraction_suspect` are evaluated only if set.
        self._evaluate_suspect = evaluate_suspect
        self._boost_refused = telemetry.counter("sampling_boost_refused")
        self._unsupported_language = telemetry.counter("evaluations_unsupported_language")
        # A budget holds a boost back for minutes (evaluations) to days (cost) at a
        # stretch: said when it starts, then once an hour per service and evaluator at most.
        self._boost_log = RateLimitedLog(log, interval_s=3600.0)
        self._revisions = dict(revisions or {})
        for name, revision in self._revisions.items():
            telemetry.gauge("evaluator_revision_info").labels(name, revision).set(1)
        self._others = dict(others or {})
        self._clock = clock
        self._shadow_evaluations = telemetry.counter("shadow_revision_evaluations")

    def other_scorers(self, scorers: Sequence[str], key: str) -> tuple[str, ...]:
        """Those of CPU `scorers` whose other revision scores the item of sampling key
        `key` too (`OtherRevision.chosen`), each admitted to the local limit as a boost's
        evaluation is."""
        now = self._clock()
        admitted = []
        for name in scorers:
            other = self._others.get(name)
            if other is None or not other.chosen(key, now):
                continue
            if other.upgrade is not None:
                # The revision of record for the day: the base sample's, never refused.
                self._budget.admit_local(False)
                admitted.append(name)
            elif self._budget.admit_local(True):
                admitted.append(name)
            else:
                self._other_refused(other, local=True)
        return tuple(admitted)

    def admit_cpu(self, sampled: frozenset[str]) -> frozenset[str]:
        """Takes the batch task's CPU scorers of an item from the budget; returns those
        refused (only a boost sampled them, and the local limit keeps its room for the
        base sample)."""
        boosted = sampled.beyond_base if isinstance(sampled, Sampled) else frozenset()
        names = [name for name in self.first_cpu if name in sampled]
        if not boosted:  # the base sample's: always taken, in one go (a record's every one)
            self._budget.admit_local(False, len(names))
            return frozenset()
        return frozenset(name for name in names if not self._budget.admit_local(name in boosted))

    @property
    def cpu_only(self) -> bool:
        """Whether every evaluator is a CPU scorer."""
        return len(self._cpu) == len(self._first) + len(self._escalated)

    async def warm_up(self) -> None:
        """Load the models of the evaluators that run in this process."""
        for stage in self._first + self._escalated:
            if self._pooled and stage.evaluator.name in self._cpu:
                continue  # its models load in the worker processes
            warm_up = getattr(stage.evaluator, "warm_up", None)
            if warm_up is not None:
                await warm_up()

    async def evaluate(self, batch: list[InFlight]) -> None:
        """Every record's sampled evaluators; results land in each `InFlight`."""
        await self._run(self._first, batch)
        if self._escalated:
            await self._run(self._escalated, batch)
        if self._others:
            await self._run_others(batch)

    async def _run_others(self, batch: list[InFlight]) -> None:
        """The other revisions' verdicts on the records their evaluator judged: a CPU
        scorer's from the batch's task, a judge's called now (`_other_revision.py`)."""
        now = self._clock()
        calls = []
        for item in batch:
            for name, other in self._others.items():
                if other.upgrade is not None:
                    self._upgraded(item, other, now)
                    continue
                current = item.results.get(name)
                if current is None or current.outcome == "error":
                    continue  # nothing to pair it with
                if name in self._cpu:
                    scored = item.others_scored.get(name)
                    if scored is not None:
                        self._took_other(item, other, scored[0])
                elif other.chosen(item.record.sampling_key, now):
                    if self._budget.admit(boost=True):
                        calls.append(self._one_other(other, item))
                    else:
                        self._other_refused(other, local=False)
        if calls:
            await asyncio.gather(*calls)

    def _upgraded(self, item: InFlight, other: OtherRevision, now: float) -> None:
        """A monitor release that shadows itself (`_upgrade.py`): where the previous
        release's revision scored `item`, its verdict is the one of record and this
        release's, on the share, the shadow verdict; once its day is over, said once."""
        upgrade = other.upgrade
        assert upgrade is not None
        name = upgrade.evaluator
        scored = item.others_scored.get(name)
        if scored is None:
            if upgrade.switch_due(now):
                self._t.gauge("evaluator_revision_info").labels(name, upgrade.old).set(0)
                self._t.gauge("evaluator_revision_info").labels(name, upgrade.new).set(1)
                log.info(
                    "evaluators: %s switched after its day of shadow: this release's revision "
                    "%s is the revision of record; the previous release's %s scores no more, "
                    "and the alert rules take the offset measured in shadow",
                    name,
                    upgrade.new,
                    upgrade.old,
                )
            return
        if not upgrade.shown:
            upgrade.shown = True
            self._t.gauge("evaluator_revision_info").labels(name, upgrade.new).set(0)
            self._t.gauge("evaluator_revision_info").labels(name, upgrade.old).set(1)
        old = dataclasses.replace(scored[0], revision=upgrade.old)
        new = item.results.get(name)
        item.results[name] = old
        if new is None or not other.in_shadow(item.record.sampling_key):
            return
        self._t.child(self._shadow_evaluations, name, upgrade.new, new.outcome).inc()
        if new.outcome != "error" and old.outcome != "error":
            item.shadow[name] = new

    def _other_refused(self, other: OtherRevision, *, local: bool) -> None:
        """A next revision's evaluation the budget refused (`local`: the local limit),
        the base sample keeping its room: counted and said, as a boost's would be."""
        name = other.evaluator.name
        self._t.child(self._shadow_evaluations, name, other.revision, "budget").inc()
        self._boost_log.warning(
            f"next/{name}",
            "budget %s: the next revision %s of evaluator %s scores less than its share "
            "while the budget keeps room for the base sample "
            '(shadow_revision_evaluations_total{outcome="budget"} counts what it missed)',
            self._budget.reached(boost=True, local=local) or "(freed since)",
            other.revision,
            name,
        )

    async def _one_other(self, other: OtherRevision, item: InFlight) -> None:
        ((_, result),) = await self._one(other.evaluator, item, timed=False)
        if result.input_tokens or result.output_tokens or result.cost:
            self._budget.spend(result.input_tokens + result.output_tokens, result.cost, boost=True)
        self._took_other(item, other, result)

    def _took_other(self, item: InFlight, other: OtherRevision, result: EvalResult) -> None:
        """A next revision's result on `item`, counted, and kept when a verdict."""
        name = other.evaluator.name
        result = dataclasses.replace(result, revision=other.revision)
        labels = (name, other.revision, result.outcome)
        self._t.child(self._shadow_evaluations, *labels).inc()
        if result.outcome != "error":
            item.shadow[name] = result
            return
        self._warn.warning(
            f"next/{name}",
            "the next revision %s of evaluator %s failed on record %s (left out of the "
            "alert rules' shadow): %s",
            other.revision,
            name,
            item.record.request_id,
            result.error,
        )

    def _runnable(
        self, stages: list[_Stage], item: InFlight, decisions: Tally[tuple[str, str, str]]
    ) -> list[Evaluator]:
        """The evaluators to run on a record; its decisions are added to `decisions`."""
        chosen = []
        service = item.service
        boosted = item.boosted
        for stage in stages:
            name = stage.evaluator.name
            decision = self._decision(stage, item, boost=name in boosted)
            if decision is None:
                self._skipped(service, stage.evaluator, item.missing)
                continue
            decisions[(service, name, decision)] += 1
            if decision == "sampled":
                if not self._unread(stage, item, stages):
                    chosen.append(stage.evaluator)
            elif decision == "over_budget" and name in boosted:
                self._refused_boost(service, name, local=name in self._cpu)
        return chosen

    def _refused_boost(self, service: str, evaluator: str, local: bool) -> None:
        """An evaluation only a boost sampled, refused by the budget: counted, and
        logged."""
        self._t.child(self._boost_refused, service, evaluator).inc()
        self._boost_log.warning(
            f"boost/{service}/{evaluator}",
            "budget %s: the boost of %s on service %r is held to the base rate while the "
            "budget keeps room for the base sample (sampling_boost_refused_total counts "
            "what it asked beyond it)",
            self._budget.reached(boost=True, local=local) or "(freed since)",
            evaluator,
            service,
        )

    def _held_back(self, stages: list[_Stage], item: InFlight) -> bool:
        """A record whose extraction looks wrong is not evaluated (its scores would
        measure the extraction: no defect rate, alert window or baseline sees it); each
        evaluator's skip is counted. The trace stage logs why and what fixes it."""
        if not held_back(item.record, self._evaluate_suspect):
            return False
        for stage in stages:
            self._t.child(
                self._t.counter("evaluations_skipped"),
                item.service,
                stage.evaluator.name,
                "extraction_suspect",
            ).inc()
        return True

    def _skipped(self, service: str, evaluator: Evaluator, missing: frozenset[str]) -> None:
        """Count an evaluation not run for lack of its input, and say so once in a while
        per service, evaluator and reason (a record with no context never fails
        groundedness: it is not judged at all)."""
        part = next(p for p in _PARTS if p in evaluator.requires & missing)
        reason = f"no_{part}"
        self._t.child(self._t.counter("evaluations_skipped"), service, evaluator.name, reason).inc()
        self._warn.warning(
            f"skipped/{service}/{evaluator.name}/{reason}",
            "%s skipped a record of service %r: it has no %s (records_incomplete_total "
            "counts such records; the trace stage's warning for this service names why; "
            "`rag-monitor explain` on one of its traces shows what each span was taken as)",
            evaluator.name,
            service,
            part,
        )

    def _unread(self, stage: _Stage, item: InFlight, stages: list[_Stage]) -> bool:
        """Whether an embedded evaluator cannot read the record's language
        (`records.scripts`): it gives no verdict; the skip is counted per service,
        evaluator and language, and said once in a while per service and language with
        the judge evaluators configured that can score it."""
        name = stage.evaluator.name
        if name not in scripts.READS:
            return False
        if item.script is None:
            item.script = scripts.record_script(item.record)
        if item.script in scripts.READS[name]:
            return False
        service, language = item.service, item.script
        self._t.child(
            self._t.counter("evaluations_skipped"), service, name, "unsupported_language"
        ).inc()
        self._t.child(self._unsupported_language, service, name, language).inc()
        judges = sorted(s.evaluator.name for s in stages if s.evaluator.kind == "judge")
        # Said once per service and language, so it names every embedded evaluator that
        # skips it, not only the one that came first.
        unread = [s.evaluator.name for s in stages if not scripts.reads(s.evaluator.name, language)]
        self._warn.warning(
            f"language/{service}/{language}",
            "%s: records of service %r in %s get no verdict from the embedded evaluators "
            "that cannot read it (%s skipped; evaluations_unsupported_language_total counts "
            "them); judge evaluators that can score it: %s",
            scripts.LANGUAGE.get(language, language),
            service,
            language,
            ", ".join(unread),
            ", ".join(judges) or "none configured (add an LLM judge, e.g. groundedness)",
        )
        return True

    def _decision(self, stage: _Stage, item: InFlight, *, boost: bool) -> str | None:
        """sampled, skipped, not_escalated or over_budget (which admits a sampled judge
        to the budget; `boost`: one only a boost sampled); None when the record lacks the
        evaluator's input (counted once per record in records_incomplete_total)."""
        ev = stage.evaluator
        if ev.requires & item.missing:
            return None
        if stage.escalate_from is not None:
            source = item.results.get(stage.escalate_from)
            lo, hi = stage.band or (0.0, 1.0)
            if source is None or source.normalized is None or not lo <= source.normalized <= hi:
                return "not_escalated"
        if ev.name not in item.sampled:
            return "skipped"
        if ev.name in item.refused:
            return "over_budget"
        if ev.kind == "judge" and not self._budget.admit(boost):
            return "over_budget"
        return "sampled"

    async def _run(self, stages: list[_Stage], batch: list[InFlight]) -> None:
        """One round of evaluators over a batch: the CPU results the batch's task gave are
        taken, each record's network evaluators run concurrently, and CPU scorers the
        task did not run go together in one task."""
        calls = []
        cpu_work: list[tuple[InFlight, list[CpuScorer]]] = []
        decisions: Tally[tuple[str, str, str]] = Tally()
        for item in batch:
            if self._held_back(stages, item):
                continue
            chosen = self._runnable(stages, item, decisions)
            unscored = []
            for ev in chosen:
                if ev.name not in self._cpu:
                    calls.append(self._one(ev, item))
                elif ev.name in item.scored:
                    result, seconds = item.scored[ev.name]
                    self._took(item, result, seconds)
                    item.results[ev.name] = self._stamped(result)
                else:
                    unscored.append(cast(CpuScorer, ev))
            if unscored:
                cpu_work.append((item, unscored))
        # Counted once per series and batch, not once per record and evaluator.
        for labels, n in decisions.items():
            self._t.child(self._t.counter("sampling_decisions"), *labels).inc(n)
        if cpu_work:
            calls.append(self._score_cpu(cpu_work))
        # A single call (CPU scorers only, the usual case) is awaited as it is: gathering
        # it would make it a task, one more trip through the event loop per batch.
        outcomes = [await calls[0]] if len(calls) == 1 else await asyncio.gather(*calls)
        for outcome in outcomes:
            for item, result in outcome:
                item.results[result.name] = self._stamped(result)
                if result.input_tokens or result.output_tokens or result.cost:
                    self._budget.spend(
                        result.input_tokens + result.output_tokens,
                        result.cost,
                        boost=result.name in item.boosted,
                    )

    async def _one(
        self, evaluator: Evaluator, item: InFlight, *, timed: bool = True
    ) -> list[tuple[InFlight, EvalResult]]:
        """`evaluator` on `item`, under its deadline (`timed`: its duration counted as
        the evaluator's)."""
        started = time.perf_counter()
        judge = evaluator.kind == "judge"
        try:
            async with asyncio.timeout(self._judge_timeout if judge else self._timeout):
                result = await evaluator.evaluate(item.record)
        except TimeoutError:
            result = self._timed_out(evaluator.name, item.record, judge)
        except Exception as exc:
            result = self._failed(evaluator.name, item.record, exc)
        if timed:
            self._t.child(self._t.histogram("evaluation_duration_seconds"), evaluator.name).observe(
                time.perf_counter() - started
            )
        return [(item, result)]

    async def _score_cpu(
        self, work: list[tuple[InFlight, list[CpuScorer]]]
    ) -> list[tuple[InFlight, EvalResult]]:
        """CPU scorers the batch's task did not run (escalated ones), in a task of their
        own."""
        jobs = [Job(tuple(ev.name for ev in evs), record=item.record) for item, evs in work]
        done = await self._tasks.run(jobs)
        out = []
        for (item, evaluators), outcome in zip(work, done, strict=True):
            assert outcome.scored is not None
            (scored,) = outcome.scored
            for ev in evaluators:
                result, seconds = scored.get(ev.name) or (
                    EvalResult.failed(ev.name, "not scored: its input is missing"),
                    0.0,
                )
                self._took(item, result, seconds)
                out.append((item, result))
        return out

    def _stamped(self, result: EvalResult) -> EvalResult:
        """`result` with its evaluator's revision."""
        revision = self._revisions.get(result.name)
        if revision is None or result.revision == revision:
            return result
        return dataclasses.replace(result, revision=revision)

    def _took(self, item: InFlight, result: EvalResult, seconds: float) -> None:
        """A CPU scorer's result for `item`, counted; an error is logged."""
        self._t.child(self._t.histogram("evaluation_duration_seconds"), result.name).observe(
            seconds
        )
        if result.error is not None:
            self._warn.warning(
                result.name,
                "evaluator %s failed on record %s: %s",
                result.name,
                item.record.request_id,
                result.error,
            )

    def _timed_out(self, name: str, record: RagRecord, judge: bool = False) -> EvalResult:
        """An evaluation past its deadline: an error result, logged from the first (a
        judge that hangs says so before its breaker opens), once per 10 s at most."""
        deadline = self._judge_timeout if judge else self._timeout
        keys = (
            "pipeline.evaluation_timeout_s, or the judge's own: judge.timeout_s for each of "
            "1 + judge.retries attempts, judge.backoff_max_s between them, twice"
            if judge
            else "pipeline.evaluation_timeout_s"
        )
        self._warn.warning(
            name,
            "evaluator %s timed out on record %s: no verdict within %gs (%s)",
            name,
            record.request_id,
            deadline,
            keys,
        )
        return EvalResult.failed(name, f"timeout: no verdict within {deadline:g}s")

    def _failed(self, name: str, record: RagRecord, exc: Exception) -> EvalResult:
        self._warn.warning(
            name, "evaluator %s failed on record %s: %s", name, record.request_id, exc
        )
        return EvalResult.failed(name, f"{type(exc).__name__}: {exc}")
