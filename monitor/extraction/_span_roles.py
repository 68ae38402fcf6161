"""What a span is — a model call, a tool execution, a container (agent, workflow, chain),
a retrieval, an embedding call or a prompt template — from the span kind its
instrumentation declares, never from which content attributes it happens to carry.
Every convention writes its content on containers and tools too (GenAI message events on
Strands' agent and tool spans, LangSmith's `gen_ai.prompt` / `gen_ai.completion` on every
run), so content decides nothing.

Read in this order, the first that says something wins:
- LangSmith's OTel mode: `langsmith.span.kind` (its `gen_ai.operation.name` maps a prompt
  template to `chat` and a retriever to `embeddings`, so its own kind comes first);
- OpenInference: `openinference.span.kind`;
- Genkit: `genkit:metadata:subtype` (`flow`, `model`, `tool`, `retriever`, `embedder`);
- Spring AI's observations: `spring.ai.kind` (`chat_client` and `advisor` spans, whose
  `gen_ai.operation.name` is `framework`, are containers; `vector_store` a retrieval);
- GenAI: `gen_ai.operation.name` (including Semantic Kernel's `chat.completions` and the
  agent frameworks' container operations);
- the Vercel AI SDK: `ai.operationId` (`ai.generateText` and `ai.streamText` are the
  request, their `.doGenerate` / `.doStream` the model calls, `ai.toolCall` a tool);
- OpenLLMetry: `traceloop.span.kind = tool`, `llm.request.type`.
A span none of them names is `None`: the readers fall back on its content."""

from __future__ import annotations

from typing import Final

from monitor.spans import Span

MODEL: Final = "model"
TOOL: Final = "tool"
CONTAINER: Final = "container"
RETRIEVAL: Final = "retrieval"
EMBEDDINGS: Final = "embeddings"
PROMPT: Final = "prompt"  # a prompt template rendered, traced like a call (LangSmith)
OTHER: Final = "other"  # named, but none of the above (guardrails, evaluators)

LLM_OPERATIONS = frozenset(
    {
        "chat",
        "text_completion",
        "generate_content",
        "completion",
        # Semantic Kernel's names for the same calls
        "text_completions",
        "chat.completions",
        "chat.streaming_completions",
        "text.completions",
        "text.streaming_completions",
    }
)
RETRIEVAL_OPERATIONS = frozenset({"retrieval", "retrieve", "vector_db_retrieve"})
CONTAINER_OPERATIONS = frozenset(
    {
        "invoke_agent",
        "create_agent",
        "invoke_workflow",
        "workflow",
        "chain",
        "execute_event_loop_cycle",  # Strands' agent loop turn
    }
)
_LANGSMITH = {
    "llm": MODEL,
    "tool": TOOL,
    "retriever": RETRIEVAL,
    "embedding": EMBEDDINGS,
    "prompt": PROMPT,
    "chain": CONTAINER,
    "parser": CONTAINER,
}
_OPENINFERENCE = {
    "LLM": MODEL,
    "TOOL": TOOL,
    "RETRIEVER": RETRIEVAL,
    "RERANKER": RETRIEVAL,
    "EMBEDDING": EMBEDDINGS,
    "CHAIN": CONTAINER,
    "AGENT": CONTAINER,
}


# The Vercel AI SDK's `ai.operationId`s: its top-level functions (the request: prompt in,
# text out), the provider calls inside them, tool executions and embeddings.
_VERCEL = {
    "ai.generateText": CONTAINER,
    "ai.streamText": CONTAINER,
    "ai.generateObject": CONTAINER,
    "ai.streamObject": CONTAINER,
    "ai.toolCall": TOOL,
    "ai.embed": EMBEDDINGS,
    "ai.embedMany": EMBEDDINGS,
}
_VERCEL_CALLS = (".doGenerate", ".doStream")


def _vercel_role(operation: str) -> str:
    if operation.endswith(_VERCEL_CALLS):
        return MODEL
    if operation.endswith(".doEmbed"):
        return EMBEDDINGS
    return _VERCEL.get(operation, OTHER)


_SPRING_AI = {
    "chat_client": CONTAINER,
    "advisor": CONTAINER,
    "vector_store": RETRIEVAL,
    "tool_call": TOOL,
}


_GENKIT = {
    "flow": CONTAINER,
    "model": MODEL,
    "tool": TOOL,
    "tool.v2": TOOL,
    "retriever": RETRIEVAL,
    "embedder": EMBEDDINGS,
}


def span_role(span: Span) -> str | None:
    """The role its instrumentation declares for `span`, or None when none does."""
    a = span.attributes
    kind = a.get("langsmith.span.kind")
    if isinstance(kind, str):
        return _LANGSMITH.get(kind.lower(), CONTAINER)
    kind = a.get("openinference.span.kind")
    if isinstance(kind, str):
        return _OPENINFERENCE.get(kind.upper(), OTHER)
    kind = a.get("genkit:metadata:subtype")
    if isinstance(kind, str):
        return _GENKIT.get(kind, OTHER)
    kind = a.get("spring.ai.kind")
    if isinstance(kind, str):
        return _SPRING_AI.get(kind, OTHER)
    op = a.get("gen_ai.operation.name")
    if isinstance(op, str):
        if op in LLM_OPERATIONS:
            return MODEL
        if op == "execute_tool":
            return TOOL
        if op in RETRIEVAL_OPERATIONS:
            return RETRIEVAL
        if op == "embeddings":
            return EMBEDDINGS
        if op in CONTAINER_OPERATIONS:
            return CONTAINER
    operation = a.get("ai.operationId")
    if isinstance(operation, str) and operation.startswith("ai."):
        return _vercel_role(operation)
    if a.get("traceloop.span.kind") == "tool":
        return TOOL
    request_type = a.get("llm.request.type")
    if not isinstance(request_type, str):
        return None
    if request_type in LLM_OPERATIONS:
        return MODEL
    if request_type == "embedding":
        return EMBEDDINGS
    return None
