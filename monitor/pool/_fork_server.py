"""The fork server's last preload (`ProcessPool`'s context), imported only there: it settles
once it has imported what the workers share, so they inherit a frozen, trimmed heap."""

from monitor.shared.processes import settle

settle()
