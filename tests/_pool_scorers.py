"""A CPU scorer for the worker-pool tests, built inside the worker processes (the pool
pickles its factory by name, so it lives in an importable module).

The record's query says what to do: `hang:<path>` creates <path> (so the test knows the
worker is inside the batch) and then never returns; `sleep:<seconds>` takes that long;
anything else scores 1.0 at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Literal

from monitor.evaluators.base import EvalResult, EvaluatorSpec
from monitor.records import Part, RagRecord


class ScriptedScorer:
    kind: Literal["local", "judge"] = "local"
    requires: frozenset[Part] = frozenset()

    def __init__(self, name: str) -> None:
        self.name = name

    async def evaluate(self, record: RagRecord) -> EvalResult:
        return self.score(record)

    def score(self, record: RagRecord) -> EvalResult:
        query = record.query or ""
        if query.startswith("hang:"):
            Path(query.removeprefix("hang:")).touch()
            threading.Event().wait()
        if query.startswith("sleep:"):
            time.sleep(float(query.removeprefix("sleep:")))
        return EvalResult(name=self.name, score=1.0, normalized=1.0, passed=True)


def scripted_scorer(spec: EvaluatorSpec) -> ScriptedScorer:
    return ScriptedScorer(spec.name)
