"""A pool of worker processes that runs tasks it knows nothing about.

A task is a module-level function and its picklable payload, sent to a worker process
and answered with what the function returns; per-worker state (models, scorers) is built
once in each worker by `Initializer`s. The pool bounds the tasks in flight (pushback),
replaces dead or hung workers, and leaves what to do with a task whose worker was lost
(`WorkerLost`) to whoever submitted it. The processes are pebble's; this package adapts
them to the event loop and the service's metrics. It imports no pipeline stage.
"""

from monitor.pool._pool import DEPTH, ProcessPool, TaskFailed, WorkerLost
from monitor.pool._worker import Initializer

__all__ = [
    "DEPTH",
    "Initializer",
    "ProcessPool",
    "TaskFailed",
    "WorkerLost",
]
