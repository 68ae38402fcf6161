"""Imported by the worker pool's fork server before it forks any worker (its preload; a
pool of one worker has no fork server: the worker imports it first): the code the workers
run, and the read-only tables their scorers use, loaded once here, so that every worker
shares their pages instead of loading its own copy.

Another read-only table is shared the same way: add its loader — a module-level function
that loads the table once per process and keeps it, as `shared_embedder` — to `TABLES`.
What the fork server loaded is then frozen out of the garbage collector's reach
(`gc.freeze`, in the fork server once it has loaded them and in each worker as it starts:
`monitor.pool`), and the C heap's free pages go back to the system there too. This module changes nothing of the process that imports it
but what it loads.
"""

from __future__ import annotations

import importlib
import logging

import monitor.evaluators.registry  # what the workers build their scorers with
import monitor.processors.evaluation._task  # noqa: F401  (the task, and extraction with it)

log = logging.getLogger(__name__)

TABLES = ("monitor.detector.embedding:shared_embedder", "monitor.detector.topics:anchors")


def load_tables() -> None:
    """Each table of `TABLES`; one that fails is left to the workers, which load it
    when they build their scorers and report the failure there."""
    for entry in TABLES:
        module, _, loader = entry.partition(":")
        try:
            getattr(importlib.import_module(module), loader)()
        except Exception:
            log.exception("could not preload %s for the worker processes", entry)


load_tables()
