"""A Chinese RAG app on LangChain, traced as the README says for LangChain (OpenInference's
instrumentation, nothing turned on, the SDK's OTLP/HTTP exporter): a chain whose prompt
template is Chinese (`chinese_kb.PROMPT`), a LangChain vector store retriever over Chinese
documents (`InMemoryVectorStore`, ranked by an embedding of character bigrams, so the
retriever really ranks), and a chat model that answers in Chinese. Run as
`python -m tests.frameworks.apps.langchain_zh_app openinference VARIANT ENDPOINT`:

- `VARIANT`: `planted-N`, the model states a wrong fact in the answers of the first N
  documents of `chinese_kb.PLANTED` (a faithful answer for every other).

The model is a scripted LangChain chat model (`SimpleChatModel`, the framework's own
extension point): a real local model's Chinese answers are too poor to know which are
faithful, and the test needs to know. The chain returns its sources with its answer
(LangChain's `RunnableParallel(...).assign(answer=...)`). Each question is asked under the
app's own `POST /ask` span; prints one JSON line per question (`framework_apps.report`),
then the traces sent."""

from __future__ import annotations

import math
import sys
import zlib
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import SimpleChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from tests.frameworks.apps.chinese_kb import KB, PROMPT, QUESTIONS, scripted_answer
from tests.frameworks.apps.framework_apps import finish, report, tracer_provider

SERVICE = "langchain-zh"
EMBED_DIM = 256


class Bigrams(Embeddings):
    """Each pair of adjacent letters or digits of a text hashed into `EMBED_DIM` buckets
    (crc32: the same in every process), L2-normalised: Chinese has no spaces, and texts
    sharing words share their characters' pairs."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        vector = [0.0] * EMBED_DIM
        run = ""
        for ch in text + " ":
            if ch.isalnum():
                run += ch
                continue
            for i in range(len(run) - 1):
                vector[zlib.crc32(run[i : i + 2].encode()) % EMBED_DIM] += 1.0
            run = ""
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]


class ScriptedChinese(SimpleChatModel):
    """Answers in Chinese from the document the prompt gives first (`scripted_answer`)."""

    variant: str

    @property
    def _llm_type(self) -> str:
        return "scripted-zh"

    def _call(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> str:
        return scripted_answer("\n".join(str(m.content) for m in messages), self.variant)


def _joined(documents: list[Document]) -> str:
    return "\n".join(d.page_content for d in documents)


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    assert instrumentation == "openinference", instrumentation
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, roots = tracer_provider(SERVICE, endpoint)
    LangChainInstrumentor().instrument(tracer_provider=provider)
    store = InMemoryVectorStore(Bigrams())
    store.add_documents(
        [Document(page_content=text, metadata={"source": uri}, id=uri) for uri, text in KB.items()]
    )
    retriever = store.as_retriever(search_kwargs={"k": 2})
    answer = (
        RunnableLambda(lambda x: {"context": _joined(x["docs"]), "question": x["question"]})
        | ChatPromptTemplate.from_template(PROMPT)
        | ScriptedChinese(variant=variant)
        | StrOutputParser()
    )
    chain = RunnableParallel(docs=retriever, question=RunnablePassthrough()).assign(answer=answer)
    tracer = provider.get_tracer("app")
    for question, _, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}) as span:
            trace_id = f"{span.get_span_context().trace_id:032x}"
            result = chain.invoke(question)
        report(trace_id, question, result["answer"], [d.page_content for d in result["docs"]])
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
