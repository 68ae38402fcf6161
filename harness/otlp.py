"""Test helpers: RAG traces written with the real OpenTelemetry SDK, one emitter per
instrumentation convention, shaped like what the real instrumentations emit.

Each emitter writes a root span, a retrieval span and an LLM span (plus the extra CHAIN /
task spans the frameworks add) and calls `between()` right after the retrieval span
ends, so a test can flush there and the spans travel in separate export batches.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue


@dataclass(frozen=True)
class Case:
    query: str
    docs: tuple[tuple[str, str, float], ...]  # (id, content, score) in retrieval order
    answer: str
    route: str = "/ask"
    model: str = "gpt-4o-mini"

    @property
    def contents(self) -> list[str]:
        return [content for _, content, _ in self.docs]

    def system_prompt(self) -> str:
        joined = "\n\n".join(f"[{n + 1}] {content}" for n, (_, content, _) in enumerate(self.docs))
        return f"Answer only from the context below.\n\n{joined}"

    def user_prompt(self) -> str:
        return f"Use the context to answer.\nQuestion: {self.query}"


WATER = Case(
    query="What is the boiling point of water at sea level?",
    docs=(
        ("kb/eiffel.md#1", "The Eiffel Tower is located in Paris and was completed in 1889.", 0.31),
        (
            "kb/water.md#4",
            "At sea level, water boils at 100 degrees Celsius (212 degrees Fahrenheit).",
            0.92,
        ),
        ("kb/everest.md#2", "Mount Everest is the highest mountain above sea level.", 0.55),
    ),
    answer="Water boils at 100 degrees Celsius at sea level.",
)

Emitter = Callable[[Tracer, Case, Callable[[], object]], str]


def asked(question: str, n: int) -> str:
    """`question` as the `n`-th user asks it: the alert rules take the same question asked
    again as one piece of evidence (a request fingerprint, which reads numbers as one), so
    traffic meant as many requests says `n` in letters."""
    return f"{question} ({spelled(n)})"


def spelled(n: int) -> str:
    """`n` in letters, one per digit (`12` is `bc`)."""
    return "".join(chr(ord("a") + int(digit)) for digit in str(n))


def _trace_id(span: Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


def emit_openinference(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """LangChain via OpenInference: CHAIN root, RETRIEVER two levels down, LLM sibling."""
    with tracer.start_as_current_span(
        "RetrievalQA",
        attributes={
            "openinference.span.kind": "CHAIN",
            "input.value": json.dumps({"question": case.query}),
            "input.mime_type": "application/json",
            "http.route": case.route,
        },
    ) as root:
        with tracer.start_as_current_span(
            "RunnableParallel",
            attributes={"openinference.span.kind": "CHAIN", "input.value": case.query},
        ):
            attrs: dict[str, AttributeValue] = {
                "openinference.span.kind": "RETRIEVER",
                "input.value": case.query,
            }
            for i, (doc_id, content, score) in enumerate(case.docs):
                attrs[f"retrieval.documents.{i}.document.id"] = doc_id
                attrs[f"retrieval.documents.{i}.document.content"] = content
                attrs[f"retrieval.documents.{i}.document.score"] = score
                attrs[f"retrieval.documents.{i}.document.metadata"] = json.dumps({"source": doc_id})
            with tracer.start_as_current_span("VectorStoreRetriever", attributes=attrs):
                pass
        between()
        with tracer.start_as_current_span(
            "ChatPromptTemplate",
            attributes={"openinference.span.kind": "CHAIN", "input.value": case.query},
        ):
            pass
        with tracer.start_as_current_span(
            "ChatOpenAI",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": case.model,
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": case.system_prompt(),
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": case.user_prompt(),
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": case.answer,
                "llm.token_count.prompt": 120,
                "llm.token_count.completion": 12,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "StrOutputParser",
            attributes={
                "openinference.span.kind": "CHAIN",
                "input.value": case.answer,
                "output.value": case.answer,
            },
        ):
            pass
        root.set_attribute("output.value", case.answer)
        return _trace_id(root)


def _genai_chat_attrs(case: Case) -> dict[str, AttributeValue]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": case.model,
        "gen_ai.response.model": case.model,
        "gen_ai.system_instructions": json.dumps(
            [{"type": "text", "content": case.system_prompt()}]
        ),
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": case.user_prompt()}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": case.answer}],
                    "finish_reason": "stop",
                }
            ]
        ),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 12,
    }


def _genai_retrieval_attrs(case: Case, *, with_content: bool = True) -> dict[str, str]:
    """A GenAI `retrieval` span's attributes; documents may carry only `id` and `score`."""
    docs = [
        {"id": i, "score": s, **({"content": c} if with_content else {})} for i, c, s in case.docs
    ]
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.query.text": case.query,
        "gen_ai.retrieval.documents": json.dumps(docs),
    }


def emit_genai(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """OpenTelemetry GenAI (current): HTTP server root, `retrieval` span, `chat` sibling."""
    with tracer.start_as_current_span(
        "POST /ask",
        kind=SpanKind.SERVER,
        attributes={"http.route": case.route, "http.request.method": "POST"},
    ) as root:
        with tracer.start_as_current_span(
            "retrieval kb", kind=SpanKind.CLIENT, attributes=_genai_retrieval_attrs(case)
        ):
            pass
        between()
        with tracer.start_as_current_span(
            f"chat {case.model}",
            kind=SpanKind.CLIENT,
            attributes=_genai_chat_attrs(case),
        ):
            pass
        return _trace_id(root)


def emit_genai_ids_only(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """GenAI retrieval documents with only `id` and `score`: the text is in the system prompt."""
    with tracer.start_as_current_span(
        "POST /ask", kind=SpanKind.SERVER, attributes={"http.route": case.route}
    ) as root:
        with tracer.start_as_current_span(
            "retrieval kb", attributes=_genai_retrieval_attrs(case, with_content=False)
        ):
            pass
        between()
        with tracer.start_as_current_span(f"chat {case.model}", attributes=_genai_chat_attrs(case)):
            pass
        return _trace_id(root)


def emit_genai_events(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """Older GenAI: message content in `gen_ai.*.message` / `gen_ai.choice` span events."""
    with tracer.start_as_current_span(
        "POST /ask", kind=SpanKind.SERVER, attributes={"http.route": case.route}
    ) as root:
        with tracer.start_as_current_span("retrieval kb", attributes=_genai_retrieval_attrs(case)):
            pass
        between()
        with tracer.start_as_current_span(
            f"chat {case.model}",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": case.model,
            },
        ) as chat:
            chat.add_event(
                "gen_ai.system.message",
                {"gen_ai.system": "openai", "content": case.system_prompt()},
            )
            chat.add_event(
                "gen_ai.user.message", {"gen_ai.system": "openai", "content": case.user_prompt()}
            )
            chat.add_event(
                "gen_ai.choice",
                {
                    "gen_ai.system": "openai",
                    "index": 0,
                    "finish_reason": "stop",
                    "message": json.dumps({"role": "assistant", "content": case.answer}),
                },
            )
        return _trace_id(root)


def emit_genai_prompt_attrs(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """Older GenAI: `gen_ai.prompt` / `gen_ai.completion` JSON attributes."""
    with tracer.start_as_current_span(
        "POST /ask", kind=SpanKind.SERVER, attributes={"http.route": case.route}
    ) as root:
        with tracer.start_as_current_span("retrieval kb", attributes=_genai_retrieval_attrs(case)):
            pass
        between()
        prompt = [
            {"role": "system", "content": case.system_prompt()},
            {"role": "user", "content": case.user_prompt()},
        ]
        with tracer.start_as_current_span(
            f"chat {case.model}",
            attributes={
                "gen_ai.system": "openai",
                "gen_ai.request.model": case.model,
                "gen_ai.prompt": json.dumps(prompt),
                "gen_ai.completion": json.dumps([{"role": "assistant", "content": case.answer}]),
            },
        ):
            pass
        return _trace_id(root)


def emit_openllmetry(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """OpenLLMetry 0.62 + LangChain, attribute for attribute as
    opentelemetry-instrumentation-langchain 0.62.4 writes them: an `invoke_agent` workflow
    root, `execute_task` spans, the retriever's query and documents only in the
    `traceloop.entity.*` JSON of a `vector_db_retrieve` span three levels deep, and a chat
    span in the `gen_ai.input.messages` form that is the retriever's cousin."""

    def task(name: str, inputs: object, outputs: object | None = None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {
            "traceloop.workflow.name": "RunnableSequence",
            "traceloop.span.kind": "task",
            "traceloop.entity.name": name,
            "gen_ai.provider.name": "langchain",
            "gen_ai.operation.name": "execute_task",
            "gen_ai.task.name": name,
            "traceloop.entity.input": json.dumps(
                {"inputs": inputs, "tags": ["seq:step:1"], "metadata": {}, "kwargs": {"name": name}}
            ),
        }
        if outputs is not None:
            attrs["traceloop.entity.output"] = json.dumps({"outputs": outputs, "kwargs": {}})
        return attrs

    with tracer.start_as_current_span(
        "RunnableSequence.workflow",
        attributes={
            "traceloop.workflow.name": "RunnableSequence",
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "RunnableSequence",
            "gen_ai.provider.name": "langchain",
            "gen_ai.operation.name": "invoke_agent",
            "traceloop.entity.input": json.dumps(
                {
                    "inputs": case.query,
                    "tags": [],
                    "metadata": {},
                    "kwargs": {"name": "RunnableSequence"},
                }
            ),
            "http.route": case.route,
        },
    ) as root:
        with tracer.start_as_current_span(
            "execute_task RunnableParallel<context,question>",
            attributes=task("RunnableParallel<context,question>", case.query),
        ):
            with tracer.start_as_current_span(
                "execute_task RunnableSequence",
                attributes=task("RunnableSequence", case.query),
            ):
                documents = [
                    {"page_content": c, "metadata": {"source": i}} for i, c, _ in case.docs
                ]
                with tracer.start_as_current_span(
                    "vector_db_retrieve KB",
                    attributes={
                        "traceloop.workflow.name": "RunnableSequence",
                        "gen_ai.operation.name": "vector_db_retrieve",
                        "gen_ai.provider.name": "langchain",
                        "traceloop.span.kind": "task",
                        "traceloop.entity.name": "KB",
                        "traceloop.entity.input": json.dumps(
                            {
                                "query": case.query,
                                "tags": ["seq:step:1"],
                                "metadata": {},
                                "kwargs": {"name": "KB"},
                            }
                        ),
                        "traceloop.entity.output": json.dumps({"documents": documents}),
                    },
                ):
                    pass
        between()
        with tracer.start_as_current_span(
            "execute_task ChatPromptTemplate",
            attributes=task("ChatPromptTemplate", {"question": case.query}, {"messages": []}),
        ):
            pass
        with tracer.start_as_current_span(
            "ChatOpenAI.chat",
            kind=SpanKind.CLIENT,
            attributes=_genai_chat_attrs(case),
        ):
            pass
        with tracer.start_as_current_span(
            "execute_task StrOutputParser",
            attributes=task("StrOutputParser", case.answer, case.answer),
        ):
            pass
        root.set_attribute(
            "traceloop.entity.output", json.dumps({"outputs": case.answer, "kwargs": {"tags": []}})
        )
        return _trace_id(root)


def emit_openllmetry_legacy(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """Older OpenLLMetry: `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` and a Chroma span
    with `db.query.result` events."""
    with tracer.start_as_current_span(
        "rag.workflow",
        attributes={
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps({"args": [case.query], "kwargs": {}}),
            "http.route": case.route,
        },
    ) as root:
        with tracer.start_as_current_span(
            "chroma.query",
            kind=SpanKind.CLIENT,
            attributes={"db.system": "chroma", "db.operation": "query"},
        ) as db:
            for doc_id, content, score in case.docs:
                db.add_event(
                    "db.query.result",
                    {
                        "db.query.result.id": doc_id,
                        "db.query.result.distance": round(1 - score, 3),
                        "db.query.result.document": content,
                        "db.query.result.metadata": json.dumps({"source": doc_id}),
                    },
                )
        between()
        with tracer.start_as_current_span(
            "openai.chat",
            kind=SpanKind.CLIENT,
            attributes={
                "llm.request.type": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": case.model,
                "gen_ai.prompt.0.role": "system",
                "gen_ai.prompt.0.content": case.system_prompt(),
                "gen_ai.prompt.1.role": "user",
                "gen_ai.prompt.1.content": case.user_prompt(),
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": case.answer,
                "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.usage.prompt_tokens": 120,
                "gen_ai.usage.completion_tokens": 12,
            },
        ):
            pass
        return _trace_id(root)


def emit_plain(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """The plain fallback: `rag.query`, `rag.context` (JSON list), `rag.response`."""
    with tracer.start_as_current_span(
        "handle_question", attributes={"rag.query": case.query, "http.route": case.route}
    ) as root:
        with tracer.start_as_current_span(
            "search",
            attributes={
                "rag.context": json.dumps([{"content": c, "doc_uri": i} for i, c, _ in case.docs])
            },
        ):
            pass
        between()
        with tracer.start_as_current_span("generate", attributes={"rag.response": case.answer}):
            pass
        return _trace_id(root)


def emit_plain_indexed(tracer: Tracer, case: Case, between: Callable[[], object]) -> str:
    """The plain fallback with indexed `rag.context.N` strings."""
    with tracer.start_as_current_span(
        "handle_question", attributes={"rag.query": case.query, "http.route": case.route}
    ) as root:
        with tracer.start_as_current_span(
            "search", attributes={f"rag.context.{i}": c for i, (_, c, _) in enumerate(case.docs)}
        ):
            pass
        between()
        root.set_attribute("rag.response", case.answer)
        return _trace_id(root)


CONVENTIONS: dict[str, Emitter] = {
    "openinference": emit_openinference,
    "genai": emit_genai,
    "genai_ids_only": emit_genai_ids_only,
    "genai_events": emit_genai_events,
    "genai_prompt_attrs": emit_genai_prompt_attrs,
    "openllmetry": emit_openllmetry,
    "openllmetry_legacy": emit_openllmetry_legacy,
    "plain": emit_plain,
    "plain_indexed": emit_plain_indexed,
}


def finished_spans(service: str, emit: Callable[[Tracer], object]) -> list[ReadableSpan]:
    """The spans `emit` makes with a tracer of `service`, as an in-memory exporter got
    them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    emit(provider.get_tracer("tests"))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def capture(
    emitter: Emitter, case: Case, service: str = "rag-api"
) -> tuple[str, list[ReadableSpan]]:
    """Run an emitter against an in-memory exporter; returns (trace id, finished spans)."""
    trace_ids: list[str] = []
    spans = finished_spans(service, lambda tracer: trace_ids.append(emitter(tracer, case, _no_op)))
    return trace_ids[0], spans


def _no_op() -> None:
    return None


def otlp_bytes(spans: Sequence[ReadableSpan]) -> bytes:
    """The OTLP protobuf body the SDK exporters would send for these spans."""
    return encode_spans(spans).SerializeToString()


def collector_json(spans: Sequence[ReadableSpan]) -> str:
    """One line of the Collector's file exporter: OTLP/JSON, ids in hex."""
    data = MessageToDict(encode_spans(spans), use_integers_for_enums=True)

    def hexify(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("traceId", "spanId", "parentSpanId"):
                if node.get(key):
                    node[key] = base64.b64decode(node[key]).hex()
            for value in node.values():
                hexify(value)
        elif isinstance(node, list):
            for value in node:
                hexify(value)

    hexify(data)
    return json.dumps(data)
