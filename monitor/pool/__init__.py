"""Worker processes that run tasks they know nothing about (`README.md`); over pebble."""

from monitor.pool._pool import DEPTH, ProcessPool, TaskFailed, WorkerLost

__all__ = ["DEPTH", "ProcessPool", "TaskFailed", "WorkerLost"]
