"""Imported by the worker pool's forkserver before it forks any worker (its preload):
the code the workers run, and the read-only tables their scorers use, loaded once here,
so that every worker shares their pages instead of loading its own copy.

Another read-only table is shared the same way: add its loader — a module-level function
that loads the table once per process and keeps it, as `shared_embedder` — to `TABLES`.
What the forkserver loaded is then frozen out of the garbage collector's reach
(`gc.freeze`): a collection in a worker would otherwise write to every page holding those
objects and so give the worker its own copy of them.
"""

from __future__ import annotations

import gc
import importlib
import logging

import monitor.evaluators.registry  # what the workers build their scorers with
import monitor.processors._scoring
import monitor.processors.trace._pooled  # noqa: F401

log = logging.getLogger(__name__)

TABLES = ("monitor.detector.embedding:shared_embedder",)


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
gc.freeze()
