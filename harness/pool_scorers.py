"""A CPU scorer for the worker-pool tests, built inside the worker processes (the pool
pickles its factory by name, so it lives in an importable module).

Each pool is built with `pool()`: its workers build `scripted_scorer`s (or
`scripted_extraction`s) for the specs given.

The record's query says what to do: `hang:<path>` creates <path> (so the test knows the
worker is inside the batch) and then never returns; `sleep:<seconds>` takes that long;
`crash` ends the worker process at once (as the kernel's OOM killer would); anything else
scores 1.0 at once.

`scripted_extraction` also scripts the workers' trace extraction: a span named
`hang:<path>` makes it create <path> and never return; `hang-once:<path>` does so only
while <path> does not exist yet (the next worker given the trace extracts it); `spin`
makes it run Python code for ever, and `backtrack` a regular expression that backtracks
for ever (both as an extraction that passes its budget would).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from monitor.config import EvaluatorConfig
from monitor.extraction import Convention, TraceRecords, Unreadable
from monitor.pool import ProcessPool
from monitor.processors.evaluation._task import ScorerFactory, Settings, worker_initializer
from monitor.records import Part, RagRecord
from monitor.records.limits import SizeLimits
from monitor.results import EvalResult
from monitor.spans import Span
from monitor.telemetry import Telemetry


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
        if query == "crash":
            os._exit(137)
        if query.startswith("sleep:"):
            time.sleep(float(query.removeprefix("sleep:")))
        return EvalResult(name=self.name, score=1.0, normalized=1.0, passed=True)


def scripted_scorer(spec: EvaluatorConfig) -> ScriptedScorer:
    return ScriptedScorer(spec.name)


def scripted_extraction(spec: EvaluatorConfig) -> ScriptedScorer:
    """`scripted_scorer`, in a worker whose extraction of traces is scripted (module doc)."""
    from monitor.extraction import extract_within as real
    from monitor.processors.evaluation import _task

    def extract(
        spans: Sequence[Span],
        route_attribute: str,
        limits: SizeLimits,
        conventions: Sequence[Convention] = (),
        address: str | None = None,
    ) -> TraceRecords | Unreadable:
        for span in spans:
            if span.name == "spin":
                while True:
                    pass
            if span.name == "backtrack":
                re.match(r"(a+)+$", "a" * 64 + "b")
            once = span.name.startswith("hang-once:")
            if span.name.startswith("hang:") or once:
                path = Path(span.name.partition(":")[2])
                if not (once and path.exists()):
                    path.touch()
                    threading.Event().wait()
        return real(spans, route_attribute, limits, conventions, address)

    # Replaces the name that the evaluation task looks up in its module.
    vars(_task)["extract_within"] = extract
    return ScriptedScorer(spec.name)


def pool(
    specs: Sequence[EvaluatorConfig],
    processes: int,
    deadline_s: float,
    telemetry: Telemetry,
    factory: ScorerFactory = scripted_scorer,
    settings: Settings | None = None,
) -> ProcessPool:
    """A pool whose workers can score `specs` (built by `factory`) and extract traces."""
    return ProcessPool(
        processes,
        deadline_s,
        telemetry,
        initializer=worker_initializer(specs, settings or Settings(), factory),
        role="evaluation worker process",
    )


def fail(message: str) -> None:
    """A pool task that raises."""
    raise ValueError(message)
