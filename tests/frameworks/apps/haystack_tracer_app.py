"""A Haystack 3 RAG pipeline traced by Haystack's own tracer, which Haystack 3 moved out to
`opentelemetry-haystack` (`haystack_integrations.tracing.opentelemetry`), its content on
(`HAYSTACK_CONTENT_TRACING_ENABLED=true`), and no `extraction.conventions` entry. Run as
`python -m tests.frameworks.apps.haystack_tracer_app haystack pipeline ENDPOINT`.

`InMemoryBM25Retriever` (BM25, so retrieval really ranks) → `ChatPromptBuilder` (the
instruction and the documents as numbered blocks in the system message, the question as
the user's) → `OpenAIChatGenerator` against the scripted server on 127.0.0.1
(`tests/frameworks/apps/openai_server.py`), planting three wrong facts: its output is
`{"replies": [ChatMessage]}` in `haystack.component.output`. Prints one JSON line per
question."""

from __future__ import annotations

import os
import sys

from tests.frameworks.apps.framework_apps import (
    INSTRUCTIONS,
    KB,
    ask_under_app_spans,
    finish,
    three_planted_answer,
    tracer_provider,
)

SYSTEM = (
    INSTRUCTIONS
    + "\n\nDocuments:\n{% for document in documents %}\n[{{ loop.index }}] {{ document.content }}\n"
    "{% endfor %}"
)


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    os.environ["HAYSTACK_CONTENT_TRACING_ENABLED"] = "true"
    from haystack import Document, Pipeline, tracing
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.utils import Secret
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    from tests.frameworks.apps.openai_server import serve

    provider, roots = tracer_provider(f"{instrumentation}-{variant}", endpoint)
    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=uri, content=text) for uri, text in KB.items()])
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
    pipeline.add_component(
        "prompt_builder",
        ChatPromptBuilder(
            template=[ChatMessage.from_system(SYSTEM), ChatMessage.from_user("{{ question }}")],
            required_variables=["question", "documents"],
        ),
    )
    pipeline.add_component(
        "llm",
        OpenAIChatGenerator(
            api_key=Secret.from_token("scripted"),
            model="scripted",
            api_base_url=serve(three_planted_answer),
        ),
    )
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")

    def ask(question: str) -> tuple[str, list[str]]:
        result = pipeline.run(
            {"retriever": {"query": question}, "prompt_builder": {"question": question}},
            include_outputs_from={"retriever"},
        )
        sources = [d.content or "" for d in result["retriever"]["documents"]]
        return result["llm"]["replies"][0].text or "", sources

    ask_under_app_spans(provider, ask)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
