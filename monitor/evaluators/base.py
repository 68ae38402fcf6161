"""The evaluator interface (its result: `monitor.results`; factories: `factory`; the name →
factory table: `registry`).

An evaluator is stateless: `evaluate(record)` returns a new `EvalResult` and stores
nothing on `self`, so one instance serves concurrent records. A result is a verdict
(`passed` True/False, `score` on the native scale, `normalized` 0..1 with 1 = good) or an
error (`error` set, `passed` None): an error is never a pass and never a defect.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from monitor.records import Part, RagRecord
from monitor.results import EvalResult


class Evaluator(Protocol):
    """What the pipeline needs from an evaluator."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> Literal["local", "judge"]:
        """ "local" evaluators run on CPU in-process; "judge" ones call an LLM and obey
        budgets."""

    @property
    def requires(self) -> frozenset[Part]:
        """Record parts without which the evaluator cannot say anything."""

    async def evaluate(self, record: RagRecord) -> EvalResult: ...


@runtime_checkable
class CpuScorer(Protocol):
    """An evaluator whose work is one synchronous CPU function. The evaluation stage runs
    all of a record's CPU scorers in a single worker-thread hop instead of one `evaluate`
    each: on the development VM a hop cost about 0.13 ms of CPU (a loop of `to_thread`
    calls on an empty function), as much as scoring a small record."""

    name: str
    requires: frozenset[Part]

    def score(self, record: RagRecord) -> EvalResult: ...
