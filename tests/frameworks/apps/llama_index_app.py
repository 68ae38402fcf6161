"""A LlamaIndex RAG app instrumented by a real instrumentation package, exporting over
OTLP/HTTP. Run as `python -m tests.frameworks.apps.llama_index_app openinference|openllmetry VARIANT
ENDPOINT`, VARIANT one of:
- `query-completion`: a query engine over a completion model (`predict` → `complete`);
- `query-chat`: a query engine over a chat model (`predict` → `chat` → `complete`);
- `chat-engine`: a condense-plus-context chat engine over the chat model, two turns per
  conversation (the follow-up is condensed into a standalone question before retrieval);
- `slow-call`: `query-completion` for the first `SLOW_QUESTIONS` questions, each model call
  taking `SLOW_CALL_S` (the process really waits), as a slow hosted model's does.
The index is a `VectorStoreIndex` built at start-up (that build is traced too, as in a
real app) with a hashing embedding; the LLM is a `CustomLLM` answering by
`scripted_answer`. Prints one JSON line per question (`framework_apps.report`)."""

from __future__ import annotations

import sys
import time
from typing import Any

from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.base.llms.types import CompletionResponseGen
from llama_index.core.chat_engine.types import ChatMode
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    CONVERSATIONS,
    KB,
    QUESTIONS,
    SLOW_CALL_S,
    SLOW_QUESTIONS,
    embed,
    finish,
    report,
    scripted_answer,
    tracer_provider,
)


class HashingEmbedding(BaseEmbedding):
    def _get_query_embedding(self, query: str) -> list[float]:
        return embed(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return embed(text)


class ScriptedLLM(CustomLLM):
    """A completion model, or with `chat=True` a chat model whose `chat` formats the
    messages into one prompt (LlamaIndex's `CustomLLM.chat`), as local models do."""

    chat_model: bool = False
    delay_s: float = 0.0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_chat_model=self.chat_model)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        time.sleep(self.delay_s)
        return CompletionResponse(text=scripted_answer(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = scripted_answer(prompt)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=text, delta=text)

        return gen()


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider(f"llama-index-{instrumentation}", endpoint)
    if instrumentation == "openinference":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    else:
        from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor as Traceloop

        Traceloop().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
    Settings.embed_model = HashingEmbedding(model_name="hashing")
    slow = variant == "slow-call"
    Settings.llm = ScriptedLLM(
        chat_model=variant not in ("query-completion", "slow-call"),
        delay_s=SLOW_CALL_S if slow else 0.0,
    )
    index = VectorStoreIndex.from_documents(
        [Document(text=text, id_=uri, metadata={"source": uri}) for uri, text in KB.items()]
    )
    if variant != "chat-engine":
        engine = index.as_query_engine(similarity_top_k=2)
        tracer = provider.get_tracer("app")
        for question, _ in QUESTIONS[:SLOW_QUESTIONS] if slow else QUESTIONS:
            with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
                trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
                response = engine.query(question)
            sources = [n.node.get_content() for n in response.source_nodes]
            report(trace_id, question, str(response), sources)
    else:
        chat = index.as_chat_engine(chat_mode=ChatMode.CONDENSE_PLUS_CONTEXT, similarity_top_k=2)
        for first, follow_up, _, _ in CONVERSATIONS:
            chat.reset()
            for message in (first, follow_up):
                reply = chat.chat(message)  # the chat engine's span is the trace's root
                sources = [n.node.get_content() for n in reply.source_nodes]
                report(roots.trace_ids[-1], message, str(reply), sources)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
