"""What an evaluator factory is given: its validated config entry and the shared context.

A factory is called with the `evaluators[]` entry as the config validated it
(`EvaluatorConfig`: picklable, so the process pool sends it to its workers, which build
their own local evaluators) and a `BuildContext`. Factories trust the entry: every check
on it runs once, when the config is loaded (`registry.check_evaluators`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from monitor.config import EvaluatorConfig
from monitor.evaluators.base import Evaluator

if TYPE_CHECKING:  # the judge client's module is imported only where a judge is configured
    from monitor.judge.client import JudgeClient


@dataclass(frozen=True)
class BuildContext:
    """What factories share. Empty where only local evaluators are built (the worker
    processes, tests)."""

    # The one judge client of the process, when some configured evaluator is a judge.
    judge: JudgeClient | None = None
    # `judge.model`: the model of judge evaluators whose entry names none.
    judge_model: str | None = None

    def judge_for(self, entry: EvaluatorConfig) -> tuple[JudgeClient, str]:
        """The judge client and model of a judge evaluator's entry."""
        model = entry.model or self.judge_model
        if self.judge is None or model is None:
            raise ValueError(f"{entry.name} is an LLM judge: building it needs a judge client")
        return self.judge, model


Factory = Callable[[EvaluatorConfig, BuildContext], Evaluator]
