"""A scripted hang inside a running `rag-monitor run` (a test double for the one fault a
real input no longer produces: an extraction or a scorer that never returns).

A test writes `sitecustomize(tmp)` and starts the monitor with that folder and the
repository on `PYTHONPATH`; every interpreter of the monitor (main, spawned worker, fork
server) then runs `install()` at start. A trace whose `rag.query` reads
`hang-extraction:<path>` makes the extraction of its batch create <path> and spin for
ever; `hang-scoring:<path>` does so in the scoring of its record. The spin is Python code,
as the placeholder loop once was: it holds the interpreter's lock between switches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

EXTRACTION = "hang-extraction:"
SCORING = "hang-scoring:"


def _spin(path: str) -> None:
    Path(path).touch()
    while True:
        pass


def _marked(values: Any, prefix: str) -> str | None:
    for value in values:
        if isinstance(value, str) and value.startswith(prefix):
            return value.removeprefix(prefix)
    return None


def install() -> None:
    """Wrap the evaluation task's extraction and scoring (both process modes run them)."""
    from monitor.processors.evaluation import _task
    from monitor.records import RagRecord

    # `extract_within` is imported there, not exported: reached through the namespace.
    namespace = vars(_task)
    extract, score = namespace["extract_within"], _task._score

    def extract_within(spans: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        for span in spans:
            path = _marked(span.attributes.values(), EXTRACTION)
            if path is not None:
                _spin(path)
        return extract(spans, *args, **kwargs)

    def scored(
        record: RagRecord,
        names: list[str],
        scorers: Mapping[str, Any],
        revisions: Mapping[str, str] | None = None,
    ) -> Any:
        path = _marked([record.query], SCORING)
        if path is not None:
            _spin(path)
        return score(record, names, scorers, revisions)

    namespace["extract_within"] = extract_within
    _task._score = scored


def sitecustomize(folder: Path) -> Path:
    """A `sitecustomize.py` in `folder` that installs the hang; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text("import harness.hangs\nharness.hangs.install()\n")
    return folder
