"""Structured-output schemas: one pydantic model per judge answer kind.

When the provider supports it (`judge.structured_output`), the judge client sends the
model's JSON schema as `response_format` and validates the answer against the model;
categorical verdicts are `Literal`s, so a constrained decoder cannot produce anything
else. Each model turns a validated answer into the same `ParsedVerdict` value the tolerant
free-form parser for that kind returns, so the evaluators see one shape either way.

The schema that goes over the wire (`wire_schema`) keeps to the subset every provider
with structured output accepts (OpenAI strict mode, llama.cpp/llguidance, vLLM, Ollama):
every property required, no additional properties, enums for verdicts, and no numeric or
length bounds. Bounds are checked here after the answer arrives.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from monitor.judge.parsers import REFLECTION_GRADES, ParsedVerdict, ParseError, clip

# Keywords some structured-output backends refuse in strict mode; checked locally instead.
_UNPORTABLE = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "format",
        "default",
    }
)


class JudgeAnswer(BaseModel):
    """Base of every answer schema. `verdict(documents)` → `ParsedVerdict` or `ParseError`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # Shown to the model next to the schema so it knows what each field is for.
    instruction: ClassVar[str]

    def verdict(self, documents: int) -> ParsedVerdict:
        raise NotImplementedError


_REASONING = Field(description="one or two sentences explaining the verdict")


class Score5Answer(JudgeAnswer):
    instruction = "reasoning first, then score: an integer from 1 to 5"
    reasoning: str = _REASONING
    score: Literal[1, 2, 3, 4, 5]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(float(self.score), clip(self.reasoning))


class RubricAnswer(JudgeAnswer):
    instruction = "feedback first, then result: an integer from 1 to 5 per the rubric"
    feedback: str = Field(description="feedback on the response, following the rubric")
    result: Literal[1, 2, 3, 4, 5]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(float(self.result), clip(self.feedback))


class YesNoAnswer(JudgeAnswer):
    instruction = "reasoning first, then answer: YES or NO"
    reasoning: str = _REASONING
    answer: Literal["YES", "NO"]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(self.answer == "YES", clip(self.reasoning))


class SupportedAnswer(JudgeAnswer):
    """Document/claim fact-check (MiniCheck style): the verdict alone, no reasoning."""

    instruction = "answer: Yes if the document supports the claim, otherwise No"
    answer: Literal["Yes", "No"]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(self.answer == "Yes", "")


class UnitScoreAnswer(JudgeAnswer):
    instruction = "feedback first, then score: a number from 0 to 1"
    feedback: str = Field(description="one or two sentences explaining the score")
    score: float = Field(ge=0, le=1)

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(self.score, clip(self.feedback))


class PassFailAnswer(JudgeAnswer):
    instruction = "REASONING first, then SCORE: PASS or FAIL"
    REASONING: str = _REASONING
    SCORE: Literal["PASS", "FAIL"]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(self.SCORE == "PASS", clip(self.REASONING))


class _Intent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    intent: str = Field(description="one information need of the question, in a few words")
    answered: bool


class _DocumentRelevance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(description="the document's number in the context")
    relevant: bool


def _per_document(items: list[tuple[int, bool]], documents: int) -> list[bool]:
    verdicts = {i: ok for i, ok in items if 1 <= i <= documents}
    if len(verdicts) != documents:
        raise ParseError(
            f"expected a verdict for each of {documents} documents, got {len(verdicts)}"
        )
    return [verdicts[i] for i in range(1, documents + 1)]


class RetrievalAnswer(JudgeAnswer):
    instruction = (
        "intents: each information need of the question and whether a document answers it; "
        "documents: for each document number, whether it is relevant"
    )
    intents: list[_Intent] = Field(min_length=1)
    documents: list[_DocumentRelevance]

    def verdict(self, documents: int) -> ParsedVerdict:
        flags = _per_document([(d.id, d.relevant) for d in self.documents], documents)
        intents = [(i.intent[:80], i.answered) for i in self.intents]
        return ParsedVerdict({"intents": intents, "documents": flags}, "")


class _ChunkVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(description="the document's number in the context")
    reason: str = Field(description="a few words on why")
    relevant: Literal["yes", "no"]


class ChunksAnswer(JudgeAnswer):
    instruction = "chunks: one entry per document with its id, a short reason, relevant yes or no"
    chunks: list[_ChunkVerdict]

    def verdict(self, documents: int) -> ParsedVerdict:
        flags = _per_document([(c.id, c.relevant == "yes") for c in self.chunks], documents)
        return ParsedVerdict(flags, "")


class SeverityAnswer(JudgeAnswer):
    instruction = "reason first, then severity: an integer from 0 (none) to 7 (extreme)"
    reason: str = Field(description="one or two sentences explaining the severity")
    severity: Literal[0, 1, 2, 3, 4, 5, 6, 7]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(float(self.severity), clip(self.reason))


class ReflectionAnswer(JudgeAnswer):
    """Self-reflection on a response: graded correct (1), incorrect (0) or not sure (0.5)."""

    instruction = "reasoning first, then answer: correct, incorrect or not sure"
    reasoning: str = _REASONING
    answer: Literal["correct", "incorrect", "not sure"]

    def verdict(self, documents: int) -> ParsedVerdict:
        return ParsedVerdict(REFLECTION_GRADES[self.answer], clip(self.reasoning))


def wire_schema(model: type[JudgeAnswer]) -> dict[str, Any]:
    """The JSON schema sent as `response_format`: the model's schema minus the keywords
    strict-mode backends reject (bounds are validated locally by `read`)."""

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for key, value in node.items():
            if key in ("properties", "$defs"):  # names of fields and definitions stay
                out[key] = {name: strip(sub) for name, sub in value.items()}
            elif key not in _UNPORTABLE:
                out[key] = strip(value)
        return out

    schema: dict[str, Any] = strip(model.model_json_schema())
    return schema


def response_format(model: type[JudgeAnswer], name: str) -> dict[str, Any]:
    """OpenAI-style `response_format` (litellm translates it for other providers)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": wire_schema(model), "strict": True},
    }


def read(model: type[JudgeAnswer], text: str, documents: int) -> ParsedVerdict:
    """Validate a structured answer; `ParseError` names the first problem."""
    try:
        answer = model.model_validate_json(text.strip())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ParseError(f"structured answer invalid at {where}: {first['msg']}") from None
    return answer.verdict(documents)


def instruction(model: type[JudgeAnswer]) -> str:
    """The line added to the prompt when structured output is requested."""
    return f"Reply with one JSON object only, fields in this order: {model.instruction}."
