"""Tool results are context (monitor/extraction/README.md, "Tool results are context"): what a tool
returned to the model before the answer, read from tool spans (GenAI `execute_tool`,
OpenInference `TOOL`, OpenLLMetry `tool`) or, when no tool span carries it, from the tool
messages in the answering call's input (GenAI `gen_ai.input.messages`, OpenInference
`llm.input_messages`, `gen_ai.tool.message` events), in call order, named by the tool.
Spans are written with the OpenTelemetry SDK and encoded as its OTLP exporter does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.extraction._tool_results import tool_docs
from tests.trace.test_extraction_rule import Trace, _chain, _oi_llm, _oi_retriever

QUESTION = "When was the Eiffel Tower completed?"
DOCS = ["The Eiffel Tower was completed in 1889.", "It stands in Paris."]
CLOCK = "2026-11-23T10:00:00Z"
ANSWER = "It was completed in 1889."


def _genai_chat(t: Trace, name: str, messages: list[dict[str, Any]], output: str | None) -> Any:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.input.messages": json.dumps(messages),
    }
    parts: list[dict[str, Any]] = (
        [{"type": "text", "content": output}]
        if output is not None
        else [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": QUESTION}}]
    )
    attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    return t.tracer.start_as_current_span(name, attributes=attrs)


def _user() -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}


def _tool_turn(result: Any, name: str = "search", call_id: str = "c1") -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": {}}],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": call_id, "response": result}],
        },
    ]


def _execute_tool(t: Trace, name: str, result: Any) -> Any:
    return t.tracer.start_as_current_span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.result": result if isinstance(result, str) else json.dumps(result),
        },
    )


def test_genai_execute_tool_results_are_the_context_in_call_order_named_by_the_tool() -> None:
    """Pydantic AI / Google ADK shape: chat (tool call) → execute_tool ×2 → chat (answer);
    the second call's input repeats the results, which count once."""
    t = Trace()
    with t.span("agent run"):
        with _genai_chat(t, "chat scripted", [_user()], None):
            pass
        with _execute_tool(t, "search", DOCS):
            pass
        with _execute_tool(t, "clock", CLOCK):
            pass
        messages = [_user(), *_tool_turn(DOCS), *_tool_turn(CLOCK, "clock", "c2")]
        with _genai_chat(t, "chat scripted", messages, ANSWER):
            pass
    (record,) = t.records()
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.context_text == [*DOCS, CLOCK]
    assert [d.doc_uri for d in record.retrieved_context] == ["search", "search", "clock"]
    assert record.retrieved_context[0].metadata == {"tool": "search"}
    assert record.missing() == frozenset()


def test_tool_messages_in_the_answering_calls_input_are_the_context_without_tool_spans() -> None:
    """The official openai-v2 instrumentation: only chat spans; the tool results are the
    tool messages of the second call (OpenAI-style `role: tool` with a `tool_call_id`)."""
    t = Trace()
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps([{"text": d} for d in DOCS])},
    ]
    with t.span("POST /ask"):
        with _genai_chat(t, "chat", messages[:1], None):
            pass
        with _genai_chat(t, "chat", messages, ANSWER):
            pass
    (record,) = t.records()
    assert record.context_text == DOCS
    assert [d.doc_uri for d in record.retrieved_context] == ["search", "search"]


def test_openinference_tool_spans_output_value_is_the_context() -> None:
    """OpenAI Agents SDK / smolagents under OpenInference: AGENT span, LLM turns, TOOL span
    with `output.value` (here a Python literal, as `str()` of a list gives)."""
    t = Trace()
    with _chain(t, "Agent workflow", kind="AGENT", inp=QUESTION, out=ANSWER):
        with _oi_llm(t, "response", [("user", QUESTION)], None):
            pass
        with t.span(
            "search",
            openinference__span__kind="TOOL",
            tool__name="search",
            input__value=json.dumps({"query": QUESTION}),
            output__value=str(DOCS),
        ):
            pass
        with _oi_llm(t, "response", [("user", QUESTION), ("tool", str(DOCS))], ANSWER):
            pass
    (record,) = t.records()
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, DOCS)
    assert record.retrieved_context[0].doc_uri == "search"


def test_openinference_tool_messages_named_by_the_assistants_tool_call() -> None:
    t = Trace()
    attrs = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": QUESTION,
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c7",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "kb_lookup",
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.tool_call_id": "c7",
        "llm.input_messages.2.message.content": json.dumps({"documents": [{"content": DOCS[0]}]}),
    }
    with _oi_llm(
        t, "ChatCompletion", None, ANSWER, **{k.replace(".", "__"): v for k, v in attrs.items()}
    ):
        pass
    (record,) = t.records()
    assert record.query == QUESTION
    assert record.context_text == DOCS[:1]
    assert record.retrieved_context[0].doc_uri == "kb_lookup"


def test_a_retriever_inside_a_tool_is_the_context_once() -> None:
    """LangGraph's retriever tool: the retrieval span says it (with ids and scores)."""
    t = Trace()
    with _chain(t, "agent", kind="AGENT", inp={"input": QUESTION}, out=ANSWER):
        with t.span(
            "retriever_tool", openinference__span__kind="TOOL", output__value="\n\n".join(DOCS)
        ):
            with _oi_retriever(t, QUESTION, DOCS):
                pass
        with _oi_llm(t, "answer", [("user", QUESTION), ("tool", "\n\n".join(DOCS))], ANSWER):
            pass
    (record,) = t.records()
    assert record.context_text == DOCS


def test_gen_ai_tool_message_events_are_context() -> None:
    t = Trace()
    with t.tracer.start_as_current_span(
        "chat", attributes={"gen_ai.operation.name": "chat"}
    ) as span:
        span.add_event("gen_ai.user.message", {"content": QUESTION})
        span.add_event(
            "gen_ai.assistant.message",
            {"tool_calls": json.dumps([{"id": "c1", "function": {"name": "search"}}])},
        )
        span.add_event("gen_ai.tool.message", {"content": DOCS[0], "id": "c1"})
        span.add_event("gen_ai.choice", {"message": json.dumps({"content": ANSWER})})
    (record,) = t.records()
    assert (record.query, record.response, record.context_text) == (QUESTION, ANSWER, DOCS[:1])
    assert record.retrieved_context[0].doc_uri == "search"


def test_a_tool_span_without_a_result_leaves_the_messages_to_say_it() -> None:
    """Content capture off on the tool span, on in the chat span."""
    t = Trace()
    with t.span("agent run"):
        with t.span("execute_tool search", gen_ai__operation__name="execute_tool"):
            pass
        with _genai_chat(t, "chat", [_user(), *_tool_turn(DOCS)], ANSWER):
            pass
    (record,) = t.records()
    assert record.context_text == DOCS


@pytest.mark.parametrize(
    ("result", "texts"),
    [
        ('[{"page_content": "a", "metadata": {"source": "kb/a"}}, {"text": "b"}]', ["a", "b"]),
        ({"results": [{"content": "a"}, {"snippet": "b"}]}, ["a", '{"snippet": "b"}']),
        ({"content": [{"type": "text", "text": "a"}], "isError": False}, ["a"]),  # MCP
        ("plain text", ["plain text"]),
        ("['a', 'b']", ["a", "b"]),
        (42, ["42"]),
        ({"city": "Oslo", "temp_c": 4}, ['{"city": "Oslo", "temp_c": 4}']),
        ({"type": "image", "data": "iVBORw0", "mime_type": "image/png"}, []),
        ([{"type": "image_url", "image_url": {"url": "data:"}}, "caption"], ["caption"]),
        ("<PIL.Image.Image image mode=RGB size=1x1 at 0x7F>", []),
        ("", []),
        (None, []),
    ],
)
def test_tool_results_parse_into_text_documents(result: Any, texts: list[str]) -> None:
    docs = tool_docs(result, "t")
    assert [d.content for d in docs] == texts
    assert all(d.doc_uri in ("t", "kb/a") for d in docs)


def test_non_text_results_leave_the_record_without_context() -> None:
    t = Trace()
    with t.span("agent run"):
        with _execute_tool(
            t, "render", {"type": "image", "data": "AAAA", "mime_type": "image/png"}
        ):
            pass
        with _genai_chat(t, "chat", [_user()], "Here is the chart."):
            pass
    (record,) = t.records()
    assert record.missing() == frozenset({"context"})


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON | _JSON.map(json.dumps) | _JSON.map(repr) | st.text(max_size=200))
@example(value={"type": []})  # a "type" that is no string
def test_any_tool_result_parses_into_text_documents_or_none(value: Any) -> None:
    """Whatever a tool returns (JSON, a Python literal, garbage): documents with text, or
    none; never an exception."""
    for doc in tool_docs(value, "t"):
        assert isinstance(doc.content, str) and doc.content
        assert doc.metadata is not None and doc.metadata["tool"] == "t"
