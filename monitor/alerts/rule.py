"""One alert rule as the engine reads it: which verdicts of a result it counts (and as what
defect value), the evaluator revision they came from, the cohort a record belongs to, and
its `Terms` (`monitor.evidence`: every threshold, windows and false-page budget among them,
and what each means), made here from the config (`terms_of`). What a rule decides lives in
its kind (`monitor.alerts.kinds`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from monitor.config import AlertRule, Config, JudgeChangedRule, parse_duration, pinned_period
from monitor.evidence import Terms, history_span_s
from monitor.records import RagRecord
from monitor.records import sender as sender_of
from monitor.records.fingerprint import request_fingerprint
from monitor.results import SEVERITIES, EvalResult, Severity
from monitor.shared.labels import model_name

DEFAULT_SEVERITY_THRESHOLD: Severity = "medium"
# `measure: scores` counts 1 - the normalised score, rounded to steps of 1/SCORE_STEPS, so
# that what the sequential test sees between batches fits a small histogram.
SCORE_STEPS = 20
# What a rule of each `measure` (other than verdicts: its defect rate) says it watches.
MEASURED = {"scores": "mean defect score", "no_context": "share of records without context"}


@dataclass(frozen=True, slots=True)
class Origin:
    """Where verdicts came from, as far as rules tell them apart: the service, the cohort
    fields (`version`, `route`, `model`), the conversation, the request's fingerprint
    (`monitor.records.fingerprint`: verdicts on the same question), who sent it
    (`monitor.records.sender`) and whether the record has context."""

    service: str
    version: str | None = None
    route: str = ""
    model: str | None = None
    conversation: str | None = None
    fingerprint: str | None = None
    sender: str | None = None
    context: bool = True  # the record has retrieved context

    @classmethod
    def of_cohort(cls, service: str, by: str | None, cohort: str) -> Origin:
        """Of `service`, its cohort `by` one thing being `cohort` (a fleet's counters)."""
        return cls(
            service,
            version=cohort if by == "version" else None,
            route=cohort if by == "route" else "",
            model=cohort if by == "model" else None,
        )

    @classmethod
    def of(cls, record: RagRecord) -> Origin:
        return cls(
            record.service,
            record.version,
            record.route,
            model_name(record.model),
            record.conversation,
            request_fingerprint(record),
            sender_of(record),
            bool(record.retrieved_context),
        )


@dataclass(frozen=True)
class Rule:
    config: AlertRule | JudgeChangedRule
    # Every threshold the rule judges with, and what each means (`monitor.evidence.Terms`).
    terms: Terms
    # The false-page budget as written (`terms.budget_s` in seconds).
    budget: str
    # Safety rules: the severity at which each grading evaluator calls a verdict a defect.
    thresholds: Mapping[str, Severity] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        config: AlertRule | JudgeChangedRule,
        false_page_every: str,
        thresholds: Mapping[str, Severity],
    ) -> Rule:
        budget = config.false_page_every or false_page_every
        return cls(config, terms_of(config, budget), budget, thresholds)

    @property
    def sequential(self) -> bool:
        return self.config.test == "sequential"

    @property
    def memory_s(self) -> float:
        """How far back the rule's state reaches: its window, and a regression rule's
        history (`monitor.evidence.history`), or what its config keeps a page for (the
        judge-changed rule's: past its last check)."""
        terms = self.terms
        history = history_span_s(terms.baseline_s, terms.season) if terms.baseline_s else 0.0
        return max(terms.window_s + history, self.config.memory_s)

    @property
    def subject(self) -> str:
        """What the rule watches, in words: `evaluator groundedness`."""
        cfg = self.config
        if cfg.measure == "no_context":
            return "the context went missing:"
        return f"evaluator {cfg.evaluator}" if cfg.evaluator else f"safety category {cfg.category}"

    @property
    def measured(self) -> str:
        if self.config.measure == "no_context":
            return f"share of records with no context for {self.config.evaluator}"
        return "mean defect score" if self.config.measure == "scores" else "defect rate"

    @property
    def cohort_by(self) -> str | None:
        return self.config.cohorts.by if self.config.cohorts is not None else None

    def samples(
        self, results: Mapping[str, EvalResult], origin: Origin | None = None
    ) -> list[float]:
        """One defect value per verdict this rule counts in `results` (1.0 = a defect); of
        a `no_context` rule, one per record (`origin`: whether it has context)."""
        rule = self.config
        if rule.measure == "no_context" and rule.evaluator is not None:
            # Scored: it had context. Not scored and without context: skipped for it.
            if rule.evaluator in results:
                return [] if results[rule.evaluator].outcome == "error" else [0.0]
            return [1.0] if origin is not None and not origin.context else []
        if rule.evaluator is not None:
            result = results.get(rule.evaluator)
            if result is None or result.outcome == "error":
                return []
            if rule.measure == "scores":
                if result.normalized is None:
                    return []
                return [round((1.0 - result.normalized) * SCORE_STEPS) / SCORE_STEPS]
            return [1.0 if result.outcome == "fail" else 0.0]
        out = []
        for name, result in results.items():
            if result.outcome == "error" or not result.safety or rule.category not in result.safety:
                continue
            threshold = self.thresholds.get(name, DEFAULT_SEVERITY_THRESHOLD)
            severity = result.safety[rule.category]
            out.append(1.0 if SEVERITIES.index(severity) >= SEVERITIES.index(threshold) else 0.0)
        return out

    def histogram(
        self, results: Mapping[str, EvalResult], origin: Origin | None = None
    ) -> list[float] | None:
        """`samples` as the entries take them: `histogram[k]` verdicts at level `k /
        terms.steps` (None: none)."""
        values = self.samples(results, origin)
        if not values:
            return None
        steps = self.terms.steps
        histogram = [0.0] * (steps + 1)
        for value in values:
            histogram[round(value * steps)] += 1
        return histogram

    def revision(self, results: Mapping[str, EvalResult]) -> str | None:
        """The revision of the evaluator(s) whose verdicts this rule counts in `results`:
        the rule's evaluator's, or for a category the graders' revisions joined."""
        rule = self.config
        if rule.evaluator is not None:
            result = results.get(rule.evaluator)
            return result.revision if result is not None else None
        graders = sorted(
            f"{name}@{result.revision}"
            for name, result in results.items()
            if result.safety and rule.category in result.safety and result.revision
        )
        return ",".join(graders) or None

    def cohort(self, origin: Origin) -> str:
        """The cohort of verdicts from `origin` under this rule ("" without one, and for
        other rules)."""
        by = self.cohort_by
        if by is None:
            return ""
        return getattr(origin, by) or ""


def terms_of(config: AlertRule | JudgeChangedRule, budget: str) -> Terms:
    """The thresholds of `config` with the false-page budget `budget`: the one place a rule's
    config becomes its `Terms`."""
    terms = Terms(
        parse_duration(config.window),
        parse_duration(budget),
        min_samples=config.min_samples,
        steps=SCORE_STEPS if config.measure == "scores" else 1,
        min_increase=config.min_increase or 0.0,
        max_rate=config.max_defect_rate if config.max_defect_rate is not None else 1.0,
    )
    baseline = config.baseline
    if baseline is None:
        return terms
    reference = baseline.reference
    kind: Literal["trailing", "last_week", "pinned"] = "pinned"
    if isinstance(reference, str):
        kind, pinned = reference, ""
    else:
        pinned = reference.pinned
    return replace(
        terms,
        baseline_s=parse_duration(baseline.window),
        season=baseline.season,
        baseline_samples=baseline.min_samples,
        accept_after_s=parse_duration(baseline.accept_after),
        reference=kind,
        pinned=pinned_period(pinned) if pinned else (0.0, 0.0),
        pinned_name=pinned,
    )


def fingerprint(rule: Rule) -> str:
    """What saved state depends on: the same values counted over the same spans."""
    cfg = rule.config
    out = f"{cfg.evaluator or ''}|{cfg.category or ''}|{rule.terms.window_s}"
    if cfg.baseline is not None:
        out += f"|{cfg.baseline.window}|{cfg.baseline.season}"
    if cfg.measure != "verdicts":
        out += f"|{cfg.measure}"
    if cfg.cohorts is not None:
        out += f"|by {cfg.cohorts.by}"
    return out


# The evaluator the judge-changed rule's fingerprint named in state files written while the
# rule had a placeholder one: the same rule, counted the same, so its pages carry over.
_JUDGE_CHANGED_PLACEHOLDER = "audit.anchors"


def saved_by(rule: Rule, saved: object) -> bool:
    """Whether a state file's `saved` fingerprint is `rule`'s (`fingerprint`), or, for the
    judge-changed rule, its with the placeholder evaluator in front."""
    own = fingerprint(rule)
    if saved == own:
        return True
    return isinstance(rule.config, JudgeChangedRule) and saved == (_JUDGE_CHANGED_PLACEHOLDER + own)


def rules_of(config: Config) -> list[AlertRule | JudgeChangedRule]:
    """The rules the engine of `config` judges: `alerts.rules`, and while `audit.anchors` is
    on the anchor check's judge-changed rule (its judges, the config's evaluators)."""
    anchors = config.audit.anchors
    if not anchors.enabled:
        return list(config.alerts.rules)
    judges = tuple(e.name for e in config.evaluators)
    return [*config.alerts.rules, JudgeChangedRule(every=anchors.every, judges=judges)]


def severity_thresholds(config: Config) -> dict[str, Severity]:
    """Evaluator name -> the `severity_threshold` at which it calls a category a defect
    (for category rules), of the evaluators that set one."""
    return {
        e.name: e.severity_threshold for e in config.evaluators if e.severity_threshold is not None
    }


def judging_window_s(rules: Sequence[Rule], idle_s: float) -> float:
    """How long after the last verdict a judgment can still change without a firing alert
    (what resolves one may take up to `longest_window_s`): the rules' current windows (an
    SLO rule's longest burn-rate window) and the conversations' idle time `idle_s`."""
    windows = [
        max(parse_duration(row.long) for row in r.config.slo.burn_rates)
        if r.config.slo is not None
        else r.terms.window_s
        for r in rules
    ]
    return max([idle_s, *windows])


def longest_window_s(rules: Sequence[Rule]) -> float:
    """The longest any rule counts a verdict in its windows (a regression rule's current
    and baseline windows)."""
    return max((r.terms.window_s + r.terms.baseline_s for r in rules), default=0.0)


def longest_memory_s(rules: Sequence[Rule]) -> float:
    """How long saved state stays of use: a regression rule's history spans weeks."""
    return max((r.memory_s for r in rules), default=0.0)
