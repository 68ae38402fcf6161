"""The fork server's last preload (`_worker_context`), imported only there: it settles once it
has imported what the workers share, so they inherit a frozen, trimmed heap."""

from monitor.pool._pool import settle

settle()
