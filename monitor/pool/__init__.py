"""Worker processes that run tasks they know nothing about (`README.md`); over pebble."""

from monitor.pool._pool import DEPTH, Initializer, ProcessPool, TaskFailed, WorkerLost

__all__ = ["DEPTH", "Initializer", "ProcessPool", "TaskFailed", "WorkerLost"]
