"""A Haystack RAG pipeline instrumented by OpenInference
(`openinference-instrumentation-haystack`), exporting over OTLP/HTTP. Run as
`python -m tests.frameworks.apps.haystack_app openinference pipeline ENDPOINT`.

The pipeline is the one Haystack's RAG tutorial builds: `InMemoryBM25Retriever` (BM25
over an `InMemoryDocumentStore`, so retrieval really ranks) → `ChatPromptBuilder` (a
system message with the documents, the question as the user message) → Haystack's own
`MockChatGenerator` answering by `scripted_answer` (variant `pipeline`); or, variant
`completion`, `PromptBuilder` (one text prompt) → a generator component replying with
strings (`replies: list[str]`, the completion-generator shape), written with Haystack's
`@component`. Prints one JSON line per question."""

from __future__ import annotations

import sys

from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder, PromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    finish,
    report,
    scripted_answer,
    tracer_provider,
)

SYSTEM = """Answer the question from these documents only.
{% for document in documents %}
{{ document.content }}
{% endfor %}"""


PROMPT = """Answer the question from these documents only.
{% for document in documents %}
{{ document.content }}
{% endfor %}
Question: {{ question }}"""


def answer(messages: list[ChatMessage]) -> str:
    return scripted_answer("\n".join(m.text or "" for m in messages))


@component
class ScriptedGenerator:
    """A completion generator: a text prompt in, string replies out (`meta` per reply)."""

    @component.output_types(replies=list[str], meta=list[dict[str, str]])
    def run(self, prompt: str) -> dict[str, list[str] | list[dict[str, str]]]:
        return {"replies": [scripted_answer(prompt)], "meta": [{"model": "scripted"}]}


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider(f"haystack-{instrumentation}", endpoint)
    from openinference.instrumentation.haystack import HaystackInstrumentor

    HaystackInstrumentor().instrument(tracer_provider=provider)
    store = InMemoryDocumentStore()
    store.write_documents(
        [Document(id=uri, content=text, meta={"source": uri}) for uri, text in KB.items()]
    )
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
    if variant == "completion":
        pipeline.add_component(
            "prompt_builder",
            PromptBuilder(template=PROMPT, required_variables=["question", "documents"]),
        )
        pipeline.add_component("llm", ScriptedGenerator())
    else:
        pipeline.add_component(
            "prompt_builder",
            ChatPromptBuilder(
                template=[ChatMessage.from_system(SYSTEM), ChatMessage.from_user("{{ question }}")],
                required_variables=["question", "documents"],
            ),
        )
        pipeline.add_component("llm", MockChatGenerator(response_fn=answer, model="scripted"))
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect(
        "prompt_builder.prompt", "llm.prompt" if variant == "completion" else "llm.messages"
    )
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            result = pipeline.run(
                {"retriever": {"query": question}, "prompt_builder": {"question": question}},
                include_outputs_from={"retriever"},
            )
        sources = [d.content or "" for d in result["retriever"]["documents"]]
        reply = result["llm"]["replies"][0]
        report(trace_id, question, reply if isinstance(reply, str) else reply.text or "", sources)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
