"""Judge answers: how to read one judge's answers (`AnswerFormat`), what a call produced
(`Verdict`), and the answer's token log-probabilities."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from monitor.judge import schemas
from monitor.judge.parsers import ParsedVerdict, ParseError
from monitor.judge.schemas import JudgeAnswer

T = TypeVar("T")

# How an answered call ended: read at once (from the schema, or as free text when no schema
# was asked), read as free text although a schema was asked, read after the format
# follow-up, unreadable twice, cut off at max_tokens.
ANSWER_RESULTS = ("valid", "fallback", "repaired", "parse", "truncated")
FORMAT_REMINDER = (
    "Your answer could not be read. Answer again in exactly the required format: {hint}"
)


@dataclass(frozen=True, slots=True)
class AnswerFormat:
    """How to read one judge's answers."""

    parse_text: Callable[[str], ParsedVerdict]  # the tolerant free-form parser
    hint: str  # the required format in words, for the follow-up after an unreadable answer
    schema: type[JudgeAnswer] | None = None  # structured output, where the model takes it
    documents: int = 0  # context documents, for per-document verdicts
    # The follow-up after an unreadable answer, in the prompt's language ({hint} filled in).
    reminder: str = FORMAT_REMINDER

    def read(self, text: str, structured: bool) -> tuple[ParsedVerdict, bool]:
        """The verdict, and whether it came from the schema. Raises `ParseError`."""
        if structured and self.schema is not None:
            try:
                return schemas.read(self.schema, text, self.documents), True
            except ParseError as exc:
                try:  # a server that ignores response_format may still answer readably
                    return self.parse_text(text), False
                except ParseError:
                    raise exc from None
        return self.parse_text(text), False


@dataclass(frozen=True, slots=True)
class Verdict(Generic[T]):
    """What a judge call produced: a parsed value, or an error saying why there is none."""

    value: T | None
    explanation: str = ""
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cached: bool = False
    # With `logprobs=True` and a server that returns them: each answer token with its
    # most likely alternatives (token, log-probability), the chosen one first.
    logprobs: TokenLogprobs | None = None


TokenLogprobs = tuple[tuple[tuple[str, float], ...], ...]
TOP_LOGPROBS = 5


class NoVerdict(Exception):
    """No verdict in the answers; the message is the result's error text."""


def answer_limit(max_tokens: int) -> int:
    """Characters an answer may have: a server that ignores `max_tokens` must not make the
    (worst-case quadratic) parsers stall the event loop."""
    return max(32_000, 8 * max_tokens)


def too_long(text: str, max_tokens: int) -> str:
    return f"truncated: answer of {len(text)} characters ignores max_tokens={max_tokens}"


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def token_logprobs(choice: Any) -> TokenLogprobs | None:
    """The answer's tokens with their top alternatives, from an OpenAI-style
    `choices[0].logprobs.content`; None when the server sent none or sent them unreadably."""
    content = _field(_field(choice, "logprobs"), "content")
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    try:
        for item in content:
            chosen = (str(_field(item, "token")), float(_field(item, "logprob")))
            alternatives = [
                (str(_field(alt, "token")), float(_field(alt, "logprob")))
                for alt in _field(item, "top_logprobs") or ()
            ]
            tokens.append((chosen, *(a for a in alternatives if a[0] != chosen[0])))
    except (TypeError, ValueError):
        return None
    return tuple(tokens)
