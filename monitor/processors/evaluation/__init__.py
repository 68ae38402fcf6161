"""The evaluation stage: one task per batch of sampled traces and records extracts and
scores them (the CPU scorers), then LLM judges, then the sinks.

A worker process imports this package for the task alone (`_task.py`, its fork server's
preload): the stage and what it holds (its queue, metrics, sinks, the pool) load on first
use of their names here, so that no worker loads them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.processors.evaluation._task import PRELOAD, Settings, worker_initializer

if TYPE_CHECKING:
    from monitor.processors.evaluation._other_revision import OtherRevision
    from monitor.processors.evaluation._revisions import other_revisions
    from monitor.processors.evaluation._stage import EvaluationStage
    from monitor.processors.evaluation._upgrade import carried_upgrades

__all__ = [
    "PRELOAD",
    "EvaluationStage",
    "OtherRevision",
    "Settings",
    "carried_upgrades",
    "other_revisions",
    "worker_initializer",
]


def __getattr__(name: str) -> object:
    if name == "EvaluationStage":
        from monitor.processors.evaluation._stage import EvaluationStage

        return EvaluationStage
    if name == "OtherRevision":
        from monitor.processors.evaluation._other_revision import OtherRevision

        return OtherRevision
    if name == "other_revisions":
        from monitor.processors.evaluation._revisions import other_revisions

        return other_revisions
    if name == "carried_upgrades":
        from monitor.processors.evaluation._upgrade import carried_upgrades

        return carried_upgrades
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
