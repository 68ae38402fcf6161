"""The LLM judges the monitor knows (docs/contract.md, "Evaluators"): for each, its answer
kind, the record parts it needs, the placeholders its template must and may show, and the
schema of its structured answer; and the one check of a judge's `evaluators[]` entry."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, cast

from monitor.judge import parsers, schemas
from monitor.judge.templates import LANGUAGES, Template, TemplateError, builtin_languages, load
from monitor.records import Part

Answer = Literal[
    "score5", "rubric", "yes_no", "unit", "pass_fail", "retrieval", "chunks", "severity"
]
NEEDS_REFERENCE = "needs expected_response: the record has no reference answer"


@dataclass(frozen=True)
class JudgeDefinition:
    name: str
    answer: Answer
    requires: frozenset[Part]
    placeholders: frozenset[str]  # must appear in the template
    optional: frozenset[str] = frozenset()  # may appear
    reference: bool = False
    good: bool = True  # for YES/NO judges: which answer is the good one
    labels: tuple[str, str] = ("yes", "no")  # label for the YES / NO answer
    max_tokens: int = 400
    hint: str = 'a final line "Score: N" with N from 1 to 5'
    # Structured output: the schema of the answer (default: the one for `answer`).
    schema: type[schemas.JudgeAnswer] | None = None

    @property
    def answer_schema(self) -> type[schemas.JudgeAnswer]:
        return self.schema or ANSWER_SCHEMAS[self.answer]


ANSWER_SCHEMAS: dict[Answer, type[schemas.JudgeAnswer]] = {
    "score5": schemas.Score5Answer,
    "rubric": schemas.RubricAnswer,
    "yes_no": schemas.YesNoAnswer,
    "unit": schemas.UnitScoreAnswer,
    "pass_fail": schemas.PassFailAnswer,
    "retrieval": schemas.RetrievalAnswer,
    "chunks": schemas.ChunksAnswer,
    "severity": schemas.SeverityAnswer,
}


def _d(
    name: str, answer: Answer, requires: str, placeholders: str, optional: str = "", **kw: Any
) -> JudgeDefinition:
    """A definition from space-separated part and placeholder names."""
    parts = cast(frozenset[Part], frozenset(requires.split()))
    return JudgeDefinition(
        name, answer, parts, frozenset(placeholders.split()), frozenset(optional.split()), **kw
    )


YES_NO_HINT = 'a final line "Answer: YES" or "Answer: NO"'
_UNIT = 'one JSON object {"score": <number 0..1>, "feedback": "<text>"}'
_SEVERITY = 'one JSON object {"severity": <integer 0..7>, "reason": "<text>"}'

DEFINITIONS: dict[str, JudgeDefinition] = {
    d.name: d
    for d in (
        _d("groundedness", "score5", "context response", "context response", "query"),
        _d("relevance", "score5", "query response", "query response", "context"),
        _d(
            "retrieval",
            "retrieval",
            "query context",
            "query context",
            max_tokens=800,
            hint='one JSON object {"intents": [{"intent": "...", "answered": true}], '
            '"documents": [{"id": 1, "relevant": true}]}',
        ),
        _d("coherence", "score5", "query response", "response", "query"),
        _d("fluency", "score5", "response", "response", "query"),
        _d("trustworthiness", "score5", "query context response", "query context response"),
        _d(
            "relevancy",
            "yes_no",
            "query context response",
            "query context response",
            hint=YES_NO_HINT,
        ),
        _d(
            "fact_check",
            "yes_no",
            "context response",
            "context response",
            "query",
            labels=("supported", "unsupported"),
            max_tokens=20,
            hint='"Yes" or "No"',
            schema=schemas.SupportedAnswer,
        ),
        _d("faithfulness", "unit", "context response", "context response", "query", hint=_UNIT),
        _d(
            "answer_relevancy",
            "unit",
            "query response",
            "query response reference",
            "context",
            reference=True,
            hint=_UNIT,
        ),
        _d(
            "answer_correctness",
            "yes_no",
            "query response",
            "query response reference",
            "context",
            reference=True,
            labels=("correct", "incorrect"),
            hint=YES_NO_HINT,
        ),
        _d(
            "pass_fail_faithfulness",
            "pass_fail",
            "context response",
            "context response",
            "query",
            max_tokens=600,
            hint='one JSON object {"REASONING": "<text>", "SCORE": "PASS" or "FAIL"}',
        ),
        _d(
            "rubric",
            "rubric",
            "response",
            "response rubric",
            "query context",
            max_tokens=600,
            hint='feedback followed by "[RESULT] N" with N from 1 to 5',
        ),
        _d(
            "context_sufficiency",
            "yes_no",
            "query context",
            "query context",
            "reference",
            labels=("sufficient", "insufficient"),
            hint=YES_NO_HINT,
        ),
        _d(
            "chunk_relevance",
            "chunks",
            "query context",
            "query context",
            max_tokens=800,
            hint='one JSON object {"chunks": [{"id": 1, "relevant": "yes", "reason": "..."}]} '
            "with one entry per document",
        ),
        _d("similarity", "score5", "response", "response reference", "query", reference=True),
        *(
            _d(c, "severity", "response", "response", "query context", hint=_SEVERITY)
            for c in ("hate_unfairness", "sexual", "violence", "self_harm")
        ),
        _d(
            "jailbreak",
            "yes_no",
            "response",
            "response",
            "query context",
            good=False,
            labels=("jailbreak", "none"),
            hint=YES_NO_HINT,
        ),
    )
}
TLM = "trustworthiness_tlm"
JUDGE_EVALUATORS = frozenset(DEFINITIONS) | {TLM}


def needs_judge(evaluators: Iterable[str]) -> bool:
    """Whether some of the named evaluators is an LLM judge (and so needs a judge client)."""
    return any(name in JUDGE_EVALUATORS for name in evaluators)


def judge_config_problem(
    name: str,
    model: str | None,
    prompt: str | None,
    rubric: str | None,
    language: str | None = None,
) -> str | None:
    """`key: problem` for a judge evaluator's config entry, or None when it is usable: the
    one check of a judge's entry (`registry.check_evaluators`, when the config is loaded,
    so `check-config` and startup reject bad entries; factories trust the entry)."""
    definition = DEFINITIONS.get(name)
    if name == TLM:
        if not model:
            return f"model: {name} is an LLM judge; set evaluators[].model or judge.model"
        if prompt is not None:
            return f"prompt: {name} uses its own sample and reflection prompts; remove prompt"
        if language not in (None, "en"):
            return f"language: {name}'s prompts are written in en only"
        return None
    if definition is None:
        return None if language is None else f"language: {name} is no LLM judge; remove it"
    if not model:
        return f"model: {name} is an LLM judge; set evaluators[].model or judge.model"
    if definition.answer == "rubric" and not rubric:
        return "rubric: the rubric evaluator needs the grading rubric text"
    if language not in (None, "en"):
        if prompt is not None:
            return (
                f"language: {language} picks a built-in template, but prompt replaces it; "
                "remove language (a prompt says its own language in its front matter)"
            )
        wanted = LANGUAGES if language == "auto" else (language,)
        written = builtin_languages(name)
        missing = [lang for lang in wanted if lang not in written]
        if missing:
            having = sorted(n for n in DEFINITIONS if set(wanted) <= set(builtin_languages(n)))
            return (
                f"language: {name} has no {'/'.join(missing)} template; "
                f"{language} is offered for {', '.join(having)}"
            )
    try:
        judge_template(definition, prompt)
    except TemplateError as exc:
        return f"prompt: {exc}"
    return None


def judge_template(
    definition: JudgeDefinition, prompt: str | None, language: str = "en"
) -> Template:
    allowed = definition.placeholders | definition.optional
    return load(definition.name, prompt, definition.placeholders, allowed, language=language)


def judge_templates(
    definition: JudgeDefinition, prompt: str | None, language: str | None
) -> dict[str, Template]:
    """The evaluator's templates by language: one for `en`/`zh` (or an override), every
    built-in language for `auto`."""
    if language == "auto":
        return {lang: judge_template(definition, None, lang) for lang in LANGUAGES}
    template = judge_template(definition, prompt, language or "en")
    return {template.language: template}


def answer_words(definition: JudgeDefinition, template: Template) -> parsers.Words:
    """The verdict words `template` asked for, each part the kind's default where it
    names none (English)."""
    default = parsers.PASS_FAIL if definition.answer == "pass_fail" else parsers.YES_NO
    w = template.words
    declared = parsers.words(w.labels, w.true, w.false)
    return parsers.Words(declared.labels or default.labels, declared.choices or default.choices)
