"""The general extraction rule (monitor/extraction/README.md) on span
trees shaped like frameworks the real-framework tests do not run: written with the
OpenTelemetry SDK, encoded as its OTLP exporter encodes them, then extracted.

- nested LLM spans are one model call; its prompt is the innermost span's messages
  (a wrapper's input may be a template's repr or a serialized prompt object);
- calls under one request span are one request, answered by the call that ends last
  (a planning turn, a condense call and the answer are one record);
- the question is the outermost request span's input that reads as a question (not a
  repr, not a model prompt with a system message); a follow-up's condensed form is
  `metadata.retrieval_query`;
- a trace with no model call, no retrieval and no `rag.*` is not a RAG request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from harness.otlp import otlp_bytes
from monitor.extraction._extraction_rule import extract_records
from monitor.records import RagRecord
from monitor.spans import decode_protobuf

QUESTION = "How tall is the Eiffel Tower?"
DOCS = ["The Eiffel Tower is 330 metres tall.", "It was completed in 1889."]
ANSWER = "It is 330 metres tall."
SYSTEM = "Answer from the context only."
TEMPLATE_REPR = (
    "PromptTemplate(metadata={'prompt_type': 'text_qa'}, template_vars=['context_str', "
    "'query_str'], kwargs={'query_str': 'How tall is the Eiffel Tower?'}, template='{query_str}')"
)


class Trace:
    """Writes spans with the SDK; `records()` extracts what they say."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer: Tracer = provider.get_tracer("test")

    @contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[None]:
        attrs = {k.replace("__", "."): v for k, v in attributes.items()}
        with self.tracer.start_as_current_span(name, attributes=attrs):
            yield

    def records(self) -> list[RagRecord]:
        spans: list[ReadableSpan] = list(self.exporter.get_finished_spans())
        decoded = decode_protobuf(otlp_bytes(spans))
        assert decoded.rejected == 0
        return extract_records(decoded.spans)


def _messages(prefix: str, messages: list[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for i, (role, text) in enumerate(messages):
        out[f"{prefix}.{i}.message.role"] = role
        out[f"{prefix}.{i}.message.content"] = text
    return out


def _oi_llm(
    t: Trace, name: str, messages: list[tuple[str, str]] | None, output: str | None, **extra: Any
) -> Any:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM"}
    attrs.update({k.replace("__", "."): v for k, v in extra.items()})
    if messages is not None:
        attrs.update(_messages("llm.input_messages", messages))
    if output is not None:
        attrs.update(_messages("llm.output_messages", [("assistant", output)]))
    return t.tracer.start_as_current_span(name, attributes=attrs)


def _oi_retriever(t: Trace, query: str, docs: list[str]) -> Any:
    attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": query}
    for i, doc in enumerate(docs):
        attrs[f"retrieval.documents.{i}.document.content"] = doc
    return t.tracer.start_as_current_span("retrieve", attributes=attrs)


def _chain(t: Trace, name: str, kind: str = "CHAIN", inp: Any = None, out: Any = None) -> Any:
    attrs: dict[str, Any] = {"openinference.span.kind": kind}
    if inp is not None:
        attrs["input.value"] = inp if isinstance(inp, str) else json.dumps(inp)
    if out is not None:
        attrs["output.value"] = out if isinstance(out, str) else json.dumps(out)
    return t.tracer.start_as_current_span(name, attributes=attrs)


def _prompt(question: str) -> list[tuple[str, str]]:
    return [("system", f"{SYSTEM}\n" + "\n".join(DOCS)), ("user", question)]


def test_wrapper_llm_span_with_template_repr_and_inner_span_with_the_prompt_is_one_call() -> None:
    """LlamaIndex-like, without a request span: `predict` (input = a template's repr) over
    `chat` (the real messages) over `complete` (a flattened prompt string)."""
    t = Trace()
    with t.span("POST /ask", http__route="/ask"):
        with _oi_retriever(t, QUESTION, DOCS):
            pass
        with t.span(
            "predict",
            openinference__span__kind="LLM",
            input__value=json.dumps({"prompt": TEMPLATE_REPR}),
            output__value=ANSWER,
        ):
            with _oi_llm(t, "chat", _prompt(QUESTION), None, output__value=f"assistant: {ANSWER}"):
                with t.span(
                    "complete",
                    openinference__span__kind="LLM",
                    input__value=json.dumps({"args": [f"system: {SYSTEM}\nuser: {QUESTION}"]}),
                    output__value=ANSWER,
                    llm__token_count__prompt=40,
                    llm__token_count__completion=6,
                    llm__model_name="provider-model",
                ):
                    pass
    (record,) = t.records()
    assert record.query == QUESTION
    assert record.response == ANSWER  # the outermost output, not the chat span's str()
    assert record.context_text == DOCS
    assert (record.model, record.input_tokens, record.output_tokens) == ("provider-model", 40, 6)
    assert record.metadata["span_name"] == "predict"
    assert record.missing() == frozenset()


def test_wrapper_with_a_json_serialized_prompt_object_is_not_a_question() -> None:
    """A wrapper LLM span whose input is a serialized prompt object (no question field),
    under a request span, over an SDK span with the messages: one record."""
    serialized = {
        "prompt": {
            "template": "Context:\n{context}\n\nQuestion: {question}",
            "template_format": "f-string",
            "input_variables": ["context", "question"],
        }
    }
    t = Trace()
    with _chain(t, "rag_pipeline", inp={"question": QUESTION}, out={"answer": ANSWER}):
        with _oi_retriever(t, QUESTION, DOCS):
            pass
        with t.span(
            "llm_wrapper",
            openinference__span__kind="LLM",
            input__value=json.dumps(serialized),
            output__value=ANSWER,
        ):
            with _oi_llm(t, "openai.chat", _prompt(QUESTION), ANSWER):
                pass
    (record,) = t.records()
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.context_text == DOCS
    assert record.metadata["request_span_name"] == "rag_pipeline"


def test_agent_plans_calls_a_retriever_tool_then_answers_one_record() -> None:
    """smolagents / CrewAI-like: an AGENT span; the first call plans (text and a tool
    call), a TOOL span wraps the retriever, the second call answers; the agent's own
    output is the final answer the user got."""
    t = Trace()
    with t.span("POST /agent"):
        with _chain(t, "Agent.run", kind="AGENT", inp={"task": QUESTION}, out=ANSWER):
            with _oi_llm(t, "plan", [("system", "You are a planner."), ("user", QUESTION)], None,
                         output__value="Thought: I should search the knowledge base."):  # fmt: skip
                pass
            with t.span("search", openinference__span__kind="TOOL", input__value=QUESTION):
                with _oi_retriever(t, QUESTION, DOCS):
                    pass
            answer_prompt = [
                ("system", "You are a planner."),
                ("user", f"Observation:\n{DOCS[0]}\n{DOCS[1]}\nNow answer: {QUESTION}"),
            ]
            with _oi_llm(t, "answer", answer_prompt, f"Final answer: {ANSWER}"):
                pass
    (record,) = t.records()
    assert record.query == QUESTION
    assert record.response == ANSWER
    assert record.context_text == DOCS
    assert record.metadata["span_name"] == "answer"


def test_chat_engine_follow_up_query_is_the_users_message_not_the_condensed_one() -> None:
    """A chat engine's outer span carries the user's latest message; a condense call
    turns it into a standalone question, which the retriever searches with; the answer
    call sees the earlier turn."""
    follow_up, standalone = "And how tall is it?", QUESTION
    earlier = [("user", "Where is the Eiffel Tower?"), ("assistant", "In Paris.")]
    t = Trace()
    with _chain(t, "ChatEngine.chat", inp={"message": follow_up}, out={"response": ANSWER}):
        condense = [("user", f"Rewrite as a standalone question: {follow_up}")]
        with _oi_llm(t, "condense", condense, standalone):
            pass
        with _oi_retriever(t, standalone, DOCS):
            pass
        with _oi_llm(t, "answer", [_prompt("")[0], *earlier, ("user", follow_up)], ANSWER):
            pass
    (record,) = t.records()
    assert record.query == follow_up
    assert record.metadata["retrieval_query"] == standalone
    assert [(m.role, m.content) for m in record.history] == earlier
    assert record.response == ANSWER
    assert record.context_text == DOCS


def test_a_model_prompt_on_the_outer_span_is_not_the_question() -> None:
    """An outer AGENT span whose input is the model prompt (messages with a system
    message) is not the request; the inner chain with the question is."""
    prompt_messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Context: {DOCS[0]}\nQuestion: {QUESTION}"},
    ]
    t = Trace()
    with _chain(t, "Crew.kickoff", kind="AGENT", inp={"messages": prompt_messages}):
        with _chain(t, "Task.execute", inp={"question": QUESTION}, out=ANSWER):
            with _oi_retriever(t, QUESTION, DOCS):
                pass
            with _oi_llm(t, "llm", _prompt(QUESTION), ANSWER):
                pass
    (record,) = t.records()
    assert record.query == QUESTION
    assert record.metadata["request_span_name"] == "Task.execute"


def test_two_request_spans_under_one_root_give_two_records_each_with_its_own_context() -> None:
    """A batch or a test harness: two questions, each in its own request span with a
    retrieval and nested LLM spans, under one root."""
    second_q, second_docs, second_a = (
        "Who wrote Hamlet?",
        ["Hamlet is by Shakespeare."],
        "Shakespeare.",
    )
    t = Trace()
    with t.span("batch"):
        for question, docs, answer in ((QUESTION, DOCS, ANSWER), (second_q, second_docs, second_a)):
            with _chain(t, "QueryEngine.query", inp=question, out=answer):
                with _oi_retriever(t, question, docs):
                    pass
                with t.span("predict", openinference__span__kind="LLM",
                            input__value=json.dumps({"prompt": TEMPLATE_REPR}), output__value=answer):  # fmt: skip
                    with _oi_llm(t, "chat", _prompt(question), answer):
                        pass
    records = t.records()
    assert [(r.query, r.response, r.context_text) for r in records] == [
        (QUESTION, ANSWER, DOCS),
        (second_q, second_a, second_docs),
    ]
    assert len({r.request_id for r in records}) == 2
    assert all(r.missing() == frozenset() for r in records)


def test_openllmetry_workflow_with_a_tool_span_and_genai_agent_spans_give_one_record() -> None:
    """OpenLLMetry-style (traceloop workflow/task/tool spans, `gen_ai.*` LLM spans) and
    a GenAI `invoke_agent` span carrying the conversation, as agent frameworks write."""
    t = Trace()
    with t.span(
        "invoke_agent researcher",
        gen_ai__operation__name="invoke_agent",
        gen_ai__input__messages=json.dumps([{"role": "user", "content": QUESTION}]),
        gen_ai__output__messages=json.dumps([{"role": "assistant", "content": ANSWER}]),
    ):
        with t.span(
            "crew.workflow",
            traceloop__span__kind="workflow",
            traceloop__entity__input=json.dumps({"inputs": {"question": QUESTION}}),
            traceloop__entity__output=json.dumps({"outputs": ANSWER}),
        ):
            with t.span(
                "chat plan",
                gen_ai__operation__name="chat",
                gen_ai__prompt__0__role="user",
                gen_ai__prompt__0__content=QUESTION,
                gen_ai__completion__0__role="assistant",
                gen_ai__completion__0__content="I will look it up.",
            ):
                pass
            with t.span(
                "kb_search.tool",
                traceloop__span__kind="tool",
                traceloop__entity__input=json.dumps({"query": QUESTION}),
            ):
                with t.span(
                    "retrieval",
                    gen_ai__operation__name="retrieval",
                    gen_ai__retrieval__query__text=QUESTION,
                    gen_ai__retrieval__documents=json.dumps([{"content": d} for d in DOCS]),
                ):
                    pass
            with t.span(
                "chat answer",
                gen_ai__operation__name="chat",
                gen_ai__prompt__0__role="user",
                gen_ai__prompt__0__content=QUESTION,
                gen_ai__prompt__1__role="tool",
                gen_ai__prompt__1__content=" ".join(DOCS),
                gen_ai__completion__0__role="assistant",
                gen_ai__completion__0__content=ANSWER,
            ):
                pass
    (record,) = t.records()
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, DOCS)


def test_chain_only_traces_are_not_rag_requests() -> None:
    """An index build: chain spans whose inputs are texts, no model call, no retrieval."""
    t = Trace()
    with _chain(t, "IngestionPipeline.run", inp={"text": " ".join(DOCS)}, out="2 nodes"):
        for text in DOCS:
            with _chain(t, "split_text", inp={"text": text}, out=[text]):
                pass
    assert t.records() == []


def test_string_reply_generator_in_a_pipeline_is_one_model_call() -> None:
    """Haystack-like completion pipeline: a prompt builder traced as an LLM span (its output
    is the generator's prompt), a generator component replying with strings, and the
    provider SDK's span inside the generator: one record, answered by the generator, with
    the provider's model."""
    t = Trace()
    prompt = f"{SYSTEM}\n" + "\n".join(DOCS) + f"\nQuestion: {QUESTION}"
    with t.span("POST /ask"):
        pipeline_input = {
            "data": {"retriever": {"query": QUESTION}, "prompt_builder": {"question": QUESTION}},
            "include_outputs_from": "{'retriever'}",
        }
        with _chain(t, "Pipeline.run", inp=pipeline_input):
            with _oi_retriever(t, QUESTION, DOCS):
                pass
            with t.span(
                "PromptBuilder.run",
                openinference__span__kind="LLM",
                input__value=json.dumps({"kwargs": {"question": QUESTION}}),
                output__value=prompt,
            ):
                pass
            with t.span(
                "Generator.run",
                openinference__span__kind="LLM",
                input__value=json.dumps({"prompt": prompt}),
                output__value=json.dumps({"replies": [ANSWER]}),
            ):
                with _oi_llm(t, "ChatCompletion", [("user", prompt)], ANSWER, llm__model_name="m1"):
                    pass
    (record,) = t.records()
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, DOCS)
    assert record.model == "m1"
    assert record.metadata["span_name"] == "Generator.run"
