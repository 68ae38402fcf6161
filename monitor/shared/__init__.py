"""Machinery every layer may use and that knows no stage: the version, bounded queues,
label caps, caches that admit what recurs, listening sockets, logging, attribute nesting
limits, retries, thread settings, how worker processes start."""
