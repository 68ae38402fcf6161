"""A LangChain RAG chain instrumented by a real instrumentation package, exporting over
OTLP/HTTP. Run as `python tests/frameworks/apps/langchain_app.py openinference|openllmetry ENDPOINT`;
prints the trace id. The chat model is LangChain's built-in fake (no LLM API), the
retriever a fixed in-process one. The test imports its constants from the monitor's
environment, where LangChain is not installed: LangChain is imported in `main` only."""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

QUESTION = "What is the boiling point of water at sea level?"
DOCS = (
    "The Eiffel Tower is located in Paris and was completed in 1889.",
    "At sea level, water boils at 100 degrees Celsius (212 degrees Fahrenheit).",
    "Mount Everest is the highest mountain above sea level.",
)
ANSWER = "Water boils at 100 degrees Celsius at sea level."


def main(instrumentation: str, endpoint: str) -> None:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    class KnowledgeBase(BaseRetriever):  # type: ignore[misc]
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [
                Document(page_content=d, metadata={"source": f"kb/{i}.md"})
                for i, d in enumerate(DOCS)
            ]

    provider = TracerProvider(resource=Resource.create({"service.name": f"lc-{instrumentation}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    if instrumentation == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer only from the context:\n{context}"), ("human", "{question}")]
    )
    chain = (
        {
            "context": KnowledgeBase() | (lambda docs: "\n\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )
    with provider.get_tracer("app").start_as_current_span(
        "POST /ask", attributes={"http.route": "/ask"}
    ):
        trace_id = trace.get_current_span().get_span_context().trace_id
        assert chain.invoke(QUESTION) == ANSWER
    provider.shutdown()
    print(f"{trace_id:032x}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
