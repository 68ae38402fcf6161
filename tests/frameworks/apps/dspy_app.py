"""A DSPy RAG program instrumented by OpenInference (`openinference-instrumentation-dspy`),
exporting over OTLP/HTTP. Run as `python -m tests.frameworks.apps.dspy_app openinference rag ENDPOINT`.

The program is DSPy's RAG module shape: `dspy.Retrieve` (the retriever DSPy traces)
over `dspy.retrievers.Embeddings` with a `dspy.Embedder` computing the hashing embedding,
then `dspy.ChainOfThought("context, question -> answer")`. The LM is `dspy.LM` with a
custom engine (DSPy's extension point for models) that reads the rendered prompt and
replies in the chat adapter's field format, answering by `scripted_answer`. Prints one
JSON line per question."""

from __future__ import annotations

import sys
from typing import Any

import dspy
import numpy as np
from dspy.dsp.utils import dotdict
from dspy.lm15 import (
    Message,
    Request,
    Response,
    TextPart,
    Usage,
    response_to_events,
)
from opentelemetry import trace

from tests.frameworks.apps.framework_apps import (
    KB,
    QUESTIONS,
    embed,
    finish,
    report,
    scripted_answer,
    tracer_provider,
)


class ScriptedEngine:
    """Answers a chat-adapter prompt with its reasoning and answer fields."""

    def complete(self, request: Request) -> Response:
        system = request.system if isinstance(request.system, str) else ""
        prompt = "\n".join([system, *(m.text or "" for m in request.messages)])
        answer = scripted_answer(prompt.rpartition("[[ ## context ## ]]")[2])
        text = (
            "[[ ## reasoning ## ]]\nThe first passage answers it.\n\n"
            f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]"
        )
        return Response(
            id=None,
            model="scripted",
            message=Message.assistant([TextPart(text)]),
            finish_reason="stop",
            usage=Usage(input_tokens=len(prompt.split()), output_tokens=len(text.split())),
        )

    def stream(self, request: Request) -> Any:
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


class RAG(dspy.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        self.retrieve = dspy.Retrieve(k=2)
        self.respond = dspy.ChainOfThought("context, question -> answer")

    def forward(self, question: str) -> dspy.Prediction:
        context = self.retrieve(question).passages
        prediction = self.respond(context=context, question=question)
        return dspy.Prediction(context=context, answer=prediction.answer)


def main(instrumentation: str, variant: str, endpoint: str) -> None:
    provider, roots = tracer_provider(f"dspy-{instrumentation}", endpoint)
    from openinference.instrumentation.dspy import DSPyInstrumentor

    DSPyInstrumentor().instrument(tracer_provider=provider)
    search = dspy.retrievers.Embeddings(
        corpus=list(KB.values()),
        embedder=dspy.Embedder(lambda texts: np.array([embed(t) for t in texts])),
        k=2,
    )

    def rm(query: str, k: int | None = None, **kwargs: Any) -> list[dotdict]:
        return [dotdict(long_text=p) for p in search(query).passages]

    lm = dspy.LM("scripted/rag", engine=ScriptedEngine(), cache=False)
    dspy.configure(lm=lm, rm=rm)
    program = RAG()
    tracer = provider.get_tracer("app")
    for question, _ in QUESTIONS:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            trace_id = f"{trace.get_current_span().get_span_context().trace_id:032x}"
            prediction = program(question=question)
        report(trace_id, question, prediction.answer, prediction.context)
    finish(provider, roots)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
