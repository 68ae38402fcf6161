"""Worker processes that run tasks they know nothing about (`README.md`); over pebble."""

from monitor.pool._pool import DEPTH, ProcessPool, TaskFailed, WorkerLost
from monitor.pool._worker import Initializer

__all__ = ["DEPTH", "Initializer", "ProcessPool", "TaskFailed", "WorkerLost"]
