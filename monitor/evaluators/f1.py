"""`f1`: token overlap of the response with the record's reference answer (no LLM); a
record without a reference gets the "needs expected_response" error result."""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

from monitor.config import EvaluatorConfig
from monitor.evaluators.factory import BuildContext, Factory
from monitor.judge.definitions import NEEDS_REFERENCE
from monitor.records import Part, RagRecord
from monitor.results import EvalResult

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = re.compile(r"[^\w\s]")


def _tokens(text: str) -> list[str]:
    return _ARTICLES.sub(" ", _PUNCT.sub(" ", text.lower())).split()


def token_f1(response: str, reference: str) -> float:
    """Harmonic mean of token precision and recall after lower-casing and dropping
    punctuation and articles; two empty texts agree perfectly."""
    got, want = _tokens(response), _tokens(reference)
    if not got or not want:
        return 1.0 if got == want else 0.0
    common = sum((Counter(got) & Counter(want)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(got), common / len(want)
    return 2 * precision * recall / (precision + recall)


class TokenF1:
    kind: Literal["local", "judge"] = "local"
    requires: frozenset[Part] = frozenset({"response"})

    def __init__(self, entry: EvaluatorConfig) -> None:
        self.name = entry.name
        self.threshold = entry.threshold if entry.threshold is not None else 0.5

    async def evaluate(self, record: RagRecord) -> EvalResult:
        if not record.expected_response:
            return EvalResult.failed(self.name, NEEDS_REFERENCE)
        # Rounded first: the threshold compares the score the result shows.
        value = round(token_f1(record.response or "", record.expected_response), 4)
        return EvalResult.verdict(
            self.name, value, self.threshold, f"token F1 with the reference answer {value:.2f}"
        )


def _create_f1(entry: EvaluatorConfig, context: BuildContext) -> TokenF1:
    return TokenF1(entry)


FACTORIES: dict[str, Factory] = {"f1": _create_f1}
