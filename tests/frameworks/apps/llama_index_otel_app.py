"""A LlamaIndex RAG app traced by LlamaIndex's own OpenTelemetry package
(`llama-index-observability-otel`, not OpenInference): its spans declare no kind and carry
no attributes; every value is in span events (the model call's messages as `blocks`, its
reply flattened into `response.message.*`, the retriever's nodes). No
`extraction.conventions` entry. Run as `python -m tests.frameworks.apps.llama_index_otel_app
llama-index-otel query|chat ENDPOINT`: a query engine, or a context chat engine (a new one
per question).

The index is a `VectorStoreIndex` over the knowledge base with a hashing embedding, built
before tracing starts; the LLM is `llama-index-llms-openai`'s `OpenAI` against the scripted
server on 127.0.0.1 (`tests/frameworks/apps/openai_server.py`), planting three wrong facts.
Prints one JSON line per question."""

from __future__ import annotations

import sys

from tests.frameworks.apps import framework_apps as apps


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    from llama_index.core import Document, Settings, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.llms.openai import OpenAI
    from llama_index.observability.otel import LlamaIndexOpenTelemetry
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from tests.frameworks.apps.openai_server import serve

    class HashingEmbedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return apps.embed(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return apps.embed(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return apps.embed(text)

    Settings.embed_model = HashingEmbedding()
    Settings.llm = OpenAI(
        model="gpt-4o-mini", api_base=serve(apps.three_planted_answer), api_key="x"
    )
    documents = [Document(text=t, doc_id=u, metadata={"source": u}) for u, t in apps.KB.items()]
    index = VectorStoreIndex.from_documents(documents)

    service = f"{instrumentation}-{variant}"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    roots = apps.RootSpans()
    provider.add_span_processor(roots)
    LlamaIndexOpenTelemetry(
        span_exporter=OTLPSpanExporter(endpoint=endpoint),
        tracer_provider=provider,
        service_name_or_resource=service,
    ).start_registering()

    for question, _ in apps.QUESTIONS:
        if variant == "query":
            response = index.as_query_engine(similarity_top_k=2).query(question)
        else:
            engine = index.as_chat_engine(chat_mode="context", similarity_top_k=2)
            response = engine.chat(question)
        sources = [n.node.get_content() for n in response.source_nodes]
        apps.report(roots.trace_ids[-1], question, str(response), sources)
    apps.finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
