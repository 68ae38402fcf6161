"""Verdict vocabularies, as data: where an app's own judgements of its traces travel — the
evaluation results and guardrail verdicts other tools write into the trace — and what
their values mean. The extraction's verdict reader (`monitor/extraction/_verdicts.py`)
reads these entries and nothing else; a user declares another vocabulary in
`external_verdicts.vocabularies` (`monitor/config/_external.py`).

A vocabulary is read from span events (and OTLP log records, which arrive as events of
their span) named one of its `events`, and, with `span_key` set, from the attributes of a
span that carries that key (a guardrail span; its events of the same vocabulary are its
findings, each read with the span's attributes beneath its own, and the span gives no
verdict of its own beside them). Each carrier gives one verdict of the evaluator its
`evaluator` attributes name (the first present):

- `evaluation`: a score (`score`, any scale) and a label (`label`); the label passes or
  fails when it is one of `passing` / `failing` (folded to lower case), otherwise a score
  in 0..1 decides at the configured threshold (1 = good);
- `guardrail`: an outcome (`label`, the first present: caller enforcement before the
  guardrail's own verdict) that `outcomes` maps to `blocked`, `flagged` or `passed`; a
  risk category (`category`) and score (`score`).

`version` is the evaluator's revision (a change of the app's judge starts a new baseline,
never a page); `explanation` its reason; `error` says the evaluator failed (an error
outcome: never a pass, never a defect). Attribute names follow the GenAI semantic
conventions (`gen_ai.evaluation.*` with the evaluator provenance of the open proposal) and
the two guardrail vocabularies in use: `gen_ai.guardrail.*` (`result.*`, `risk.*`) and the
older `gen_ai.security.*` (`verdict.*`, `action.*`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

EVALUATION: Final = "evaluation"
GUARDRAIL: Final = "guardrail"
BLOCKED: Final = "blocked"
FLAGGED: Final = "flagged"
PASSED: Final = "passed"
# What the monitor writes on its own `gen_ai.evaluation.result` events (its version), so
# that they are never read back as an app's verdicts (`monitor/exporters/otlp_events.py`).
OWN_MARK: Final = "rag_monitor.version"


@dataclass(frozen=True, slots=True, eq=False)
class Vocabulary:
    """One vocabulary of verdicts (see the module docstring). Attribute tuples are read in
    order, the first present wins; `passing`, `failing` and `outcomes` keys are lower
    case."""

    name: str
    kind: str
    events: frozenset[str] = frozenset()
    span_key: str | None = None
    evaluator: tuple[str, ...] = ()
    score: tuple[str, ...] = ()
    label: tuple[str, ...] = ()
    explanation: tuple[str, ...] = ()
    category: tuple[str, ...] = ()
    version: tuple[str, ...] = ()
    error: tuple[str, ...] = ()
    passing: frozenset[str] = frozenset()
    failing: frozenset[str] = frozenset()
    outcomes: Mapping[str, str] = field(default_factory=dict)


# The labels the monitor itself writes, and their usual spellings in other evaluators.
_PASSING = frozenset({"pass", "passed", "true", "yes"})
_FAILING = frozenset({"fail", "failed", "false", "no"})

GENAI_EVALUATION = Vocabulary(
    "genai-evaluation",
    EVALUATION,
    events=frozenset({"gen_ai.evaluation.result"}),
    evaluator=("gen_ai.evaluation.name",),
    score=("gen_ai.evaluation.score.value",),
    label=("gen_ai.evaluation.score.label",),
    explanation=("gen_ai.evaluation.explanation",),
    version=("gen_ai.evaluation.evaluator.version",),
    error=("error.type",),
    passing=_PASSING,
    failing=_FAILING,
)
# The newer guardrail conventions: the native result value, never translated by the
# instrumentation, so its meaning per result kind is here (Bedrock's action, a tripwire's
# state, Model Armor's match state, and the plain verdict words).
GENAI_GUARDRAIL = Vocabulary(
    "genai-guardrail",
    GUARDRAIL,
    events=frozenset({"gen_ai.guardrail.result"}),
    span_key="gen_ai.guardrail.result.value",
    evaluator=("gen_ai.guardrail.component.name", "gen_ai.guardrail.policy.id"),
    score=("gen_ai.guardrail.risk.score",),
    label=("gen_ai.guardrail.result.value",),
    explanation=("gen_ai.guardrail.result.reason",),
    category=("gen_ai.guardrail.risk.category",),
    version=("gen_ai.guardrail.policy.version",),
    outcomes={
        "guardrail_intervened": BLOCKED,
        "none": PASSED,
        "true": BLOCKED,  # tripwire_triggered
        "false": PASSED,
        "match_found": FLAGGED,
        "no_match_found": PASSED,
        "block": BLOCKED,
        "blocked": BLOCKED,
        "deny": BLOCKED,
        "warn": FLAGGED,
        "flag": FLAGGED,
        "flagged": FLAGGED,
        "modify": FLAGGED,
        "allow": PASSED,
        "pass": PASSED,
        "passed": PASSED,
    },
)
# The older guardrail conventions: the caller's enforcement (`action.type`) first, then
# the guardrail's own verdict.
GENAI_SECURITY = Vocabulary(
    "genai-security",
    GUARDRAIL,
    events=frozenset({"gen_ai.security.finding"}),
    span_key="gen_ai.security.verdict.type",
    evaluator=("gen_ai.security.guardrail.name", "gen_ai.security.guardrail.id"),
    score=("gen_ai.security.risk.score",),
    label=("gen_ai.security.action.type", "gen_ai.security.verdict.type"),
    explanation=("gen_ai.security.verdict.reason",),
    category=("gen_ai.security.risk.category",),
    version=("gen_ai.security.guardrail.version", "gen_ai.security.policy.version"),
    outcomes={
        "block": BLOCKED,
        "deny": BLOCKED,
        "warn": FLAGGED,
        "modify": FLAGGED,
        "escalate": FLAGGED,
        "allow": PASSED,
    },
)
VOCABULARIES: tuple[Vocabulary, ...] = (GENAI_EVALUATION, GENAI_GUARDRAIL, GENAI_SECURITY)


def verdict_events_of(vocabularies: tuple[Vocabulary, ...]) -> frozenset[str]:
    """The events (span events and log records) `vocabularies` read verdicts from."""
    return frozenset(event for v in vocabularies for event in v.events)


VERDICT_EVENTS = verdict_events_of(VOCABULARIES)
