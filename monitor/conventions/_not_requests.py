"""What stacks trace beside their requests that asks nothing (the extraction's
`_asks_nothing.py` reads these): the database operations that write to a store rather
than search it (Spring AI's `<store> add`), and the last segment of the paths that
liveness, readiness and startup probes ask."""

from __future__ import annotations

STORE_WRITES = frozenset(
    {"add", "upsert", "insert", "delete", "update", "write", "index", "bulk", "create", "drop"}
)
PROBE_PATHS = frozenset(
    {
        "health",
        "healthz",
        "healthcheck",
        "health-check",
        "health_check",
        "ready",
        "readyz",
        "readiness",
        "live",
        "livez",
        "liveness",
        "startup",
        "startupz",
        "ping",
    }
)
