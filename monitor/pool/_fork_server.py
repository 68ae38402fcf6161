"""The fork server's last preload (`_worker_context`): once it has imported what the workers
share, it settles (`_worker.settle`) before it forks any of them, so they inherit a frozen,
trimmed heap. Imported only there."""

from monitor.pool._pool import settle

settle()
