"""The GenAI semantic conventions' operation names (`gen_ai.operation.name`) and the role
each declares: the shipped entries' kinds read them (`_shipped.py`)."""

from __future__ import annotations

from monitor.conventions._entry import CONTAINER, EMBEDDINGS, MODEL, RETRIEVAL, TOOL

# GenAI operation names: a model call (Semantic Kernel's older names too), a retrieval,
# an agent or workflow (Strands' loop turn; MLflow's translation writes its span types).
GENAI_OPERATIONS = {
    **dict.fromkeys(
        (
            "chat",
            "text_completion",
            "generate_content",
            "completion",
            "text_completions",
            "chat.completions",
            "chat.streaming_completions",
            "text.completions",
            "text.streaming_completions",
        ),
        MODEL,
    ),
    "execute_tool": TOOL,
    **dict.fromkeys(("retrieval", "retrieve", "retriever", "vector_db_retrieve"), RETRIEVAL),
    # Spring AI writes the singular (its AiOperationType.EMBEDDING).
    **dict.fromkeys(("embeddings", "embedding"), EMBEDDINGS),
    **dict.fromkeys(
        (
            "invoke_agent",
            "create_agent",
            "invoke_workflow",
            "workflow",
            "chain",
            "execute_event_loop_cycle",
        ),
        CONTAINER,
    ),
}
MODEL_OPERATIONS = frozenset(k for k, v in GENAI_OPERATIONS.items() if v == MODEL)
SK_OPERATIONS = frozenset(
    {
        "text_completions",
        "chat.completions",
        "chat.streaming_completions",
        "text.completions",
        "text.streaming_completions",
    }
)
