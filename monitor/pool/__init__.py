"""A pool of worker processes that runs tasks it knows nothing about.

A task is a module-level function and its picklable payload, sent to a worker process
and answered with what the function returns; per-worker state (models, scorers) is built
once in each worker by `Initializer`s. The pool bounds the tasks in flight (pushback),
replaces dead or hung workers, and leaves what to do with a task whose worker was lost
(`WorkerLost`) to whoever submitted it. It imports no pipeline stage.
"""

from monitor.pool._launch import Forked, fork_here
from monitor.pool._pool import DEPTH, ProcessPool, TaskFailed, WorkerLost
from monitor.pool._worker import Initializer

__all__ = [
    "DEPTH",
    "Forked",
    "Initializer",
    "ProcessPool",
    "TaskFailed",
    "WorkerLost",
    "fork_here",
]
