"""What stacks trace beside their requests that asks nothing (the extraction's
`_asks_nothing.py` reads these): the database operations that write to a store rather
than search it (Spring AI's `<store> add`), the last segment of the paths that
liveness, readiness and startup probes ask, and how an embeddings endpoint's path ends
(an HTTP client span alone where a framework's embedding model has no span of its own,
Quarkus LangChain4j's REST client: `POST /v1/embeddings`, Ollama's `/api/embed`,
Gemini's `:embedContent` and `:batchEmbedContents` methods)."""

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
# The last segment of an embeddings endpoint's path (compared lower-cased), and the
# endings of the provider methods that embed (Gemini's).
EMBED_PATHS = frozenset({"embeddings", "embed"})
EMBED_METHODS = (":embedcontent", ":batchembedcontents")
