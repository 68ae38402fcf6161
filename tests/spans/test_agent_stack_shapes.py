"""Span shapes of the agent stacks as their instrumentations write them (Strands Agents
in both GenAI modes, LangSmith's OTel mode, Semantic Kernel, LlamaIndex, LangGraph, MCP),
written with the OpenTelemetry SDK and encoded as its OTLP exporter does: a span's role
comes from its declared kind, a tool span's own result is the context, and a tool's list
of documents is one document per object with its id as `doc_uri`."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.trace import Span as SdkSpan

from tests.trace.test_extraction_rule import Trace

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower is in Paris; it was completed in 1889."
DOCS = [
    {"id": "kb/eiffel.md", "content": "The Eiffel Tower was completed in 1889 for the World Fair."},
    {"id": "kb/water.md", "content": "At sea level, pure water boils at 100 degrees Celsius."},
]
TEXTS = [d["content"] for d in DOCS]
IDS = [d["id"] for d in DOCS]
ARGS = json.dumps({"query": QUESTION})


def _span(t: Trace, name: str, **attributes: Any) -> Any:
    return t.tracer.start_as_current_span(name, attributes=attributes)


def _event(span: SdkSpan, name: str, **attributes: Any) -> None:
    span.add_event(name, attributes)


def _strands_default(t: Trace) -> None:
    """Strands Agents' default tracing: content in `gen_ai.*.message` / `gen_ai.choice`
    span events on every span, the tool's arguments in its `gen_ai.tool.message` event."""
    blocks = json.dumps([{"text": QUESTION}])
    with _span(t, "invoke_agent kb-agent", **{"gen_ai.operation.name": "invoke_agent"}) as agent:
        _event(agent, "gen_ai.user.message", content=blocks)
        with _span(
            t, "execute_event_loop_cycle", **{"gen_ai.operation.name": "execute_event_loop_cycle"}
        ) as cycle:
            _event(cycle, "gen_ai.user.message", content=blocks)
            with _span(t, "chat", **{"gen_ai.operation.name": "chat"}) as chat:
                _event(chat, "gen_ai.user.message", content=blocks)
                tool_use = {
                    "toolUse": {
                        "toolUseId": "t1",
                        "name": "search_docs",
                        "input": {"query": QUESTION},
                    }
                }
                _event(
                    chat, "gen_ai.choice", message=json.dumps([tool_use]), finish_reason="tool_use"
                )
            with _span(
                t,
                "execute_tool search_docs",
                **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_docs"},
            ) as tool:
                _event(tool, "gen_ai.tool.message", role="tool", content=ARGS, id="t1")
                # The @tool decorator's text block: str() of the returned list.
                _event(tool, "gen_ai.choice", message=json.dumps([{"text": str(DOCS)}]), id="t1")
            with _span(t, "chat", **{"gen_ai.operation.name": "chat"}) as chat:
                _event(chat, "gen_ai.user.message", content=blocks)
                _event(chat, "gen_ai.assistant.message", content=json.dumps([tool_use]))
                result = {
                    "toolResult": {
                        "toolUseId": "t1",
                        "status": "success",
                        "content": [{"text": str(DOCS)}],
                    }
                }
                _event(chat, "gen_ai.tool.message", content=json.dumps([result]))
                _event(
                    chat,
                    "gen_ai.choice",
                    message=json.dumps([{"text": ANSWER}]),
                    finish_reason="end_turn",
                )
            _event(cycle, "gen_ai.choice", message=json.dumps([{"text": ANSWER}]))
        _event(agent, "gen_ai.choice", message=ANSWER, finish_reason="end_turn")


def _details(span: SdkSpan, **attributes: Any) -> None:
    span.add_event("gen_ai.client.inference.operation.details", attributes)


def _parts(role: str, *parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": role, "parts": list(parts)}]


def _strands_latest(t: Trace, tool_result_attribute: bool = True) -> None:
    """`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`: the content moves into
    `gen_ai.client.inference.operation.details` span events."""
    user = _parts("user", {"type": "text", "content": QUESTION})
    call = {
        "type": "tool_call",
        "name": "search_docs",
        "id": "t1",
        "arguments": {"query": QUESTION},
    }
    response = {"type": "tool_call_response", "id": "t1", "response": [{"text": str(DOCS)}]}
    with _span(t, "invoke_agent kb-agent", **{"gen_ai.operation.name": "invoke_agent"}) as agent:
        _details(agent, **{"gen_ai.input.messages": json.dumps(user)})
        with _span(
            t, "execute_event_loop_cycle", **{"gen_ai.operation.name": "execute_event_loop_cycle"}
        ) as cycle:
            _details(cycle, **{"gen_ai.input.messages": json.dumps(user)})
            with _span(t, "chat", **{"gen_ai.operation.name": "chat"}) as chat:
                _details(chat, **{"gen_ai.input.messages": json.dumps(user)})
                _details(chat, **{"gen_ai.output.messages": json.dumps(_parts("assistant", call))})
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_docs",
                "gen_ai.tool.call.arguments": ARGS,
            }
            with _span(t, "execute_tool search_docs", **attrs) as tool:
                _details(tool, **{"gen_ai.input.messages": json.dumps(_parts("tool", call))})
                if tool_result_attribute:
                    tool.set_attribute("gen_ai.tool.call.result", json.dumps([{"text": str(DOCS)}]))
                _details(tool, **{"gen_ai.output.messages": json.dumps(_parts("tool", response))})
            with _span(t, "chat", **{"gen_ai.operation.name": "chat"}) as chat:
                history = [*user, *_parts("assistant", call), *_parts("user", response)]
                _details(chat, **{"gen_ai.input.messages": json.dumps(history)})
                answer = _parts("assistant", {"type": "text", "content": ANSWER})
                _details(chat, **{"gen_ai.output.messages": json.dumps(answer)})
        final = _parts("assistant", {"type": "text", "content": ANSWER})
        _details(agent, **{"gen_ai.output.messages": json.dumps(final)})


def _assert_right(t: Trace, uris: list[str] | None = None) -> None:
    (record,) = t.records()
    assert record.query == QUESTION
    assert record.context_text == TEXTS
    assert [d.doc_uri for d in record.retrieved_context] == (IDS if uris is None else uris)
    assert record.response == ANSWER
    assert "extraction_suspect" not in record.metadata


def test_strands_default_tool_result_is_its_choice_event_not_its_arguments() -> None:
    t = Trace()
    _strands_default(t)
    _assert_right(t)


def test_strands_latest_conventions_read_from_operation_details_span_events() -> None:
    for with_attribute in (True, False):
        t = Trace()
        _strands_latest(t, tool_result_attribute=with_attribute)
        _assert_right(t)


def _lc(kind: str, **kwargs: Any) -> dict[str, Any]:
    """A LangChain object as `dumpd` serializes it."""
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", kind],
        "kwargs": kwargs,
    }


def test_langsmith_otel_mode_reads_langchain_shapes_on_every_span() -> None:
    """LangGraph traced by LangSmith's OTel mode: `gen_ai.prompt` / `gen_ai.completion`
    with LangChain's shapes on the graph, node, model and tool runs."""
    t = Trace()
    tool_call = {
        "name": "search_docs",
        "args": {"query": QUESTION},
        "id": "c1",
        "type": "tool_call",
    }
    human = _lc("HumanMessage", content=QUESTION)
    asks = _lc("AIMessage", content="", tool_calls=[tool_call])
    returned = _lc("ToolMessage", content=json.dumps(DOCS), tool_call_id="c1", name="search_docs")
    answers = _lc("AIMessage", content=ANSWER)

    def run(name: str, kind: str, prompt: Any, completion: Any) -> Any:
        op = {"llm": "chat", "tool": "execute_tool", "chain": "chain"}[kind]
        return _span(
            t,
            name,
            **{
                "langsmith.span.kind": kind,
                "gen_ai.operation.name": op,
                "gen_ai.prompt": json.dumps(prompt),
                "gen_ai.completion": json.dumps(completion),
            },
        )

    state_in = {"messages": [{"role": "user", "content": QUESTION}]}
    state_out = {"messages": [human, asks, returned, answers]}
    system = _lc("SystemMessage", content="Answer from the knowledge base.")
    with run("LangGraph", "chain", state_in, state_out):
        with run("agent", "chain", {"messages": [human]}, {"messages": [asks]}):
            generation = {"text": "", "message": asks, "type": "ChatGeneration"}
            with run(
                "ChatOpenAI",
                "llm",
                {"messages": [[system, human]]},
                {"generations": [[generation]]},
            ):
                pass
        with run("tools", "chain", {"messages": [human, asks]}, {"messages": [returned]}):
            with run(
                "search_docs", "tool", {"input": str({"query": QUESTION})}, {"output": returned}
            ):
                pass
        with run("agent", "chain", {"messages": [human, asks, returned]}, {"messages": [answers]}):
            generation = {"text": ANSWER, "message": answers, "type": "ChatGeneration"}
            prompt = {"messages": [[system, human, asks, returned]]}
            with run("ChatOpenAI", "llm", prompt, {"generations": [[generation]]}):
                pass
    _assert_right(t)


def _oi_agent_with_tool_output(output: Any) -> Trace:
    """An OpenInference agent: a model call asking for the tool, the TOOL span with
    `output`, the answering call."""
    t = Trace()
    chain = {"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": ANSWER}
    with _span(t, "agent", **chain):
        llm = {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
        }
        with _span(t, "llm", **llm):
            pass
        tool = {
            "openinference.span.kind": "TOOL",
            "tool.name": "search_docs",
            "input.value": ARGS,
            "output.value": output if isinstance(output, str) else json.dumps(output),
        }
        with _span(t, "search_docs", **tool):
            pass
        answer = {
            **llm,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        }
        with _span(t, "llm", **answer):
            pass
    return t


def test_llama_index_tool_output_envelope_gives_one_document_per_object() -> None:
    tool_output = {
        "blocks": [{"block_type": "text", "text": str(DOCS)}],
        "tool_name": "search_docs",
        "raw_input": {"args": [], "kwargs": {"query": QUESTION}},
        "raw_output": DOCS,
        "is_error": False,
    }
    _assert_right(_oi_agent_with_tool_output(tool_output))
    # Without the raw output (not serializable), its text blocks say the same.
    del tool_output["raw_output"]
    _assert_right(_oi_agent_with_tool_output(tool_output))


def test_langgraph_tool_message_whose_content_is_a_json_list() -> None:
    message = {
        "content": json.dumps(DOCS),
        "type": "tool",
        "name": "search_docs",
        "tool_call_id": "c1",
        "id": None,
    }
    _assert_right(_oi_agent_with_tool_output(message))
    _assert_right(
        _oi_agent_with_tool_output(_lc("ToolMessage", content=json.dumps(DOCS), tool_call_id="c1"))
    )


def test_mcp_text_parts_each_holding_a_json_document() -> None:
    result = {"content": [{"type": "text", "text": json.dumps(d)} for d in DOCS], "isError": False}
    _assert_right(_oi_agent_with_tool_output(result))


def test_plain_text_tool_output_stays_one_document() -> None:
    t = _oi_agent_with_tool_output("The Eiffel Tower was completed in 1889.")
    (record,) = t.records()
    assert record.context_text == ["The Eiffel Tower was completed in 1889."]
    assert record.retrieved_context[0].doc_uri == "search_docs"


def test_deep_or_huge_tool_output_is_a_bad_value_of_that_attribute_only() -> None:
    """Nesting past any parser's limit stays text: the record is still extracted, with
    its question and answer; the deep value is at most one text document."""
    for deep in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        (record,) = _oi_agent_with_tool_output(deep).records()
        assert (record.query, record.response) == (QUESTION, ANSWER)
        assert len(record.retrieved_context) <= 1


def test_a_container_with_model_call_events_is_not_a_model_call() -> None:
    """An `invoke_agent` span's message events make it a request, not a call: its
    question is the query even when the calls' own events are off."""
    t = Trace()
    with _span(t, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}) as agent:
        _event(agent, "gen_ai.user.message", content=QUESTION)
        with _span(t, "chat", **{"gen_ai.operation.name": "chat"}) as chat:
            _event(chat, "gen_ai.choice", message=json.dumps({"content": ANSWER}))
        _event(agent, "gen_ai.choice", message=ANSWER)
    (record,) = t.records()
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert record.metadata["request_span_name"] == "invoke_agent a"


def _semantic_kernel(t: Trace, with_logs: bool) -> None:
    """Semantic Kernel: `chat.completions` and `execute_tool` spans without text; with its
    GenAI logs exported, the messages arrive as log events joined to the chat spans (here
    written as the events they become)."""
    chat = {"gen_ai.operation.name": "chat.completions", "gen_ai.request.model": "scripted"}
    call = {"id": "c1", "type": "function", "function": {"name": SEARCH, "arguments": ARGS}}
    with _span(t, "POST /ask", **{"http.route": "/ask"}):
        with _span(t, "chat.completions scripted", **chat) as span:
            if with_logs:
                _event(span, "gen_ai.user.message", body=json.dumps({"content": QUESTION}))
                choice = {"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}
                _event(span, "gen_ai.choice", body=json.dumps(choice))
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": SEARCH}
        with _span(t, f"execute_tool {SEARCH}", **tool):
            pass
        with _span(t, "chat.completions scripted", **chat) as span:
            if with_logs:
                _event(span, "gen_ai.user.message", body=json.dumps({"content": QUESTION}))
                _event(span, "gen_ai.assistant.message", body=json.dumps({"tool_calls": [call]}))
                _event(
                    span,
                    "gen_ai.tool.message",
                    body=json.dumps({"content": json.dumps(DOCS), "id": "c1"}),
                )
                choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER}}
                _event(span, "gen_ai.choice", body=json.dumps(choice))


SEARCH = "search_docs"


def test_semantic_kernel_with_its_genai_logs() -> None:
    t = Trace()
    _semantic_kernel(t, with_logs=True)
    _assert_right(t)


def test_semantic_kernel_spans_only_is_flagged_for_its_missing_question() -> None:
    t = Trace()
    _semantic_kernel(t, with_logs=False)
    (record,) = t.records()
    assert record.query is None
    assert record.metadata["extraction_suspect"] == "no_query"
