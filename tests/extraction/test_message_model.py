"""The typed message model (`monitor/extraction/_messages.py`), written from the OpenTelemetry
GenAI input/output message schemas: each part kind read; each provider's native shape read
onto it by the conventions table's part shapes; documents in any message of the
conversation; placeholders never content; and a generator over part encodings x positions
x languages whose right record is known by construction."""

from __future__ import annotations

import base64
import json
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest

from monitor.config import Extraction
from monitor.extraction import causes, conventions_from_config, extract_records
from monitor.extraction._messages import (
    Blob,
    File,
    Generic,
    Reasoning,
    ServerToolCall,
    ServerToolCallResponse,
    Text,
    ToolCall,
    ToolCallResponse,
    Uri,
    decoded_text,
    documents_of,
    read_messages,
    read_part,
)
from monitor.extraction._prompt_templates import TEMPLATES
from monitor.extraction._span_values import content_text
from monitor.spans import Span


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


def _call(inputs: list[dict[str, Any]], output: Any = None, **extra: Any) -> list[Span]:
    """One GenAI chat span: `inputs` its input messages, `output` its answer."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.input.messages": json.dumps(inputs, ensure_ascii=False),
        **extra,
    }
    if output is not None:
        attributes["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": output}]}],
            ensure_ascii=False,
        )
    return [Span("ab" * 16, "1" * 16, "", "chat m", 1_000, 2_000, attributes=attributes)]


# -- the GenAI schema's parts ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "read"),
    [
        ({"type": "text", "content": "hi"}, Text("hi")),
        (
            {"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": "x"}},
            ToolCall("c1", "search", {"q": "x"}),
        ),
        (
            {"type": "tool_call_response", "id": "c1", "response": "ok"},
            ToolCallResponse("c1", "ok"),
        ),
        (
            {"type": "server_tool_call", "id": "s1", "name": "web", "server_tool_call": {"q": 1}},
            ServerToolCall("s1", "web", {"q": 1}),
        ),
        (
            {"type": "server_tool_call_response", "id": "s1", "server_tool_call_response": [1]},
            ServerToolCallResponse("s1", [1]),
        ),
        (
            {"type": "blob", "mime_type": "image/png", "modality": "image", "content": "iVBORw0K"},
            Blob("image/png", "image", base64.b64decode("iVBORw0K")),
        ),
        (
            {
                "type": "file",
                "mime_type": "application/pdf",
                "modality": "document",
                "file_id": "f",
            },
            File("application/pdf", "document", "f"),
        ),
        (
            {"type": "uri", "mime_type": "image/jpeg", "modality": "image", "uri": "https://x/a"},
            Uri("image/jpeg", "image", "https://x/a"),
        ),
        ({"type": "reasoning", "content": "think"}, Reasoning("think")),
    ],
)
def test_each_schema_part_is_read(part: dict[str, Any], read: Any) -> None:
    assert read_part(part) == read


def test_a_generic_part_is_read_by_its_generic_type() -> None:
    part = {"type": "generic", "generic_type": "search_result", "content": "Text.", "title": "t"}
    (doc,) = documents_of(read_part(part))
    assert (doc.content, doc.doc_uri) == ("Text.", "t")
    odd = read_part({"type": "generic", "generic_type": "weather", "content": "Sunny"})
    assert isinstance(odd, Generic) and odd.modality is None and odd.text == "Sunny"
    assert content_text([{"type": "generic", "generic_type": "weather", "content": "Sunny"}]) == (
        "Sunny"
    )


def test_output_messages_keep_their_finish_reason() -> None:
    (message,) = read_messages(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "a"}],
                "finish_reason": "stop",
            }
        ]
    )
    assert (message.role, message.text, message.finish_reason) == ("assistant", "a", "stop")


# -- native shapes --------------------------------------------------------------------------

DOC = "Water boils at 100 degrees Celsius at sea level."
B64 = base64.b64encode(DOC.encode()).decode()
HEX = DOC.encode().hex()

NATIVE_DOCUMENTS = {
    "anthropic-text": {"type": "document", "title": "w", "source": {"type": "text", "data": DOC}},
    "anthropic-content": {
        "type": "document",
        "title": "w",
        "source": {"type": "content", "content": [{"type": "text", "text": DOC}]},
    },
    "anthropic-base64-text": {
        "type": "document",
        "title": "w",
        "source": {"type": "base64", "media_type": "text/plain", "data": B64},
    },
    "anthropic-search-result": {
        "type": "search_result",
        "source": "w",
        "title": "Water",
        "content": [{"type": "text", "text": DOC}],
    },
    "bedrock-text": {"document": {"name": "w", "format": "txt", "source": {"text": DOC}}},
    "bedrock-base64": {"document": {"name": "w", "format": "txt", "source": {"bytes": B64}}},
    "bedrock-hex": {"document": {"name": "w", "format": "md", "source": {"bytes": HEX}}},
    "bedrock-search-result": {"searchResult": {"source": "w", "content": [{"text": DOC}]}},
    "gemini-inline": {"inlineData": {"mimeType": "text/plain", "data": B64, "displayName": "w"}},
    "gemini-inline-snake": {"inline_data": {"mime_type": "text/markdown", "data": B64}},
    "genai-generic": {"type": "generic", "generic_type": "document", "content": DOC, "name": "w"},
    "genai-blob": {
        "type": "blob",
        "modality": "document",
        "mime_type": "text/plain",
        "content": B64,
    },
    "genai-file-with-text": {
        "type": "file",
        "modality": "document",
        "file_id": "w",
        "text": DOC,
    },
    "cohere": {"type": "document", "document": {"id": "w", "data": {"text": DOC}}},
    "llamaindex-document": {"block_type": "document", "data": B64, "title": "w"},
    "llamaindex-citable": {"block_type": "citable", "source": "w", "content": [{"text": DOC}]},
    "openai-file-data": {
        "type": "file",
        "file": {"filename": "w", "file_data": f"data:text/plain;base64,{B64}"},
    },
    "unknown-type-by-structure": {"type": "kb_chunk", "text": DOC, "id": "w"},
}


@pytest.mark.parametrize("name", sorted(NATIVE_DOCUMENTS))
def test_each_native_document_shape_is_a_document(name: str) -> None:
    part = NATIVE_DOCUMENTS[name]
    docs = documents_of(read_part(part))
    assert [d.content for d in docs] == [DOC]
    assert content_text([part, {"type": "text", "text": "Q?"}]) == "Q?"  # never the question


@pytest.mark.parametrize(
    ("part", "text"),
    [
        ({"text": "keyed"}, "keyed"),  # Bedrock, Gemini
        ({"type": "input_text", "text": "in"}, "in"),  # OpenAI Responses
        ({"type": "output_text", "text": "out", "annotations": []}, "out"),
        ({"block_type": "text", "text": "block"}, "block"),  # LlamaIndex
        ({"citationsContent": {"content": [{"text": "cited"}], "citations": []}}, "cited"),
    ],
)
def test_native_text_parts_are_text(part: dict[str, Any], text: str) -> None:
    assert content_text([part]) == text


@pytest.mark.parametrize(
    "part",
    [
        {"toolUse": {"toolUseId": "t", "name": "search", "input": {}}},
        {"toolResult": {"toolUseId": "t", "content": [{"text": "result"}]}},
        {"functionCall": {"name": "search", "args": {}}},
        {"function_response": {"name": "search", "response": {"r": "x"}}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}},
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
        {"type": "function_call_output", "call_id": "c", "output": "result"},
        {"type": "tool_use", "id": "t", "name": "search", "input": {}},
        {"type": "thinking", "thinking": "hmm"},
        {"reasoningContent": {"reasoningText": {"text": "hmm"}}},
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(b"%PDF-1.7 \x00\xff").decode(),
            },
        },
    ],
)
def test_native_parts_that_are_no_words_of_the_message(part: dict[str, Any]) -> None:
    assert content_text([part, {"type": "text", "text": "Q?"}]) == "Q?"
    assert documents_of(read_part(part)) == []


def test_a_hosted_search_part_gives_its_results() -> None:
    part = {
        "type": "file_search_call",
        "results": [{"filename": "w.md", "text": DOC, "score": 0.5}, {"filename": "x"}],
    }
    (doc,) = documents_of(read_part(part))
    assert (doc.content, doc.doc_uri, doc.score) == (DOC, "w.md", 0.5)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (B64, DOC),
        (HEX, DOC),
        (list(DOC.encode()), DOC),
        (f"data:text/plain;base64,{B64}", DOC),
        ("plain words, not an encoding", "plain words, not an encoding"),
        ("水在海平面上100摄氏度沸腾。", "水在海平面上100摄氏度沸腾。"),
        (base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00").decode(), None),
    ],
)
def test_bytes_that_decode_as_text_are_text(data: Any, text: str | None) -> None:
    assert decoded_text(data)[1] == text


# -- the generator: encodings x positions x languages -----------------------------------------

LANGUAGES = {
    "en": ("What is the boiling point of water?", "Water boils at 100 °C at sea level.", "100 °C."),
    "zh": ("水的沸点是多少？", "在海平面上，水在摄氏100度时沸腾。", "摄氏100度。"),
    "ar": (
        "ما هي درجة غليان الماء؟",
        "يغلي الماء عند مئة درجة مئوية عند مستوى سطح البحر.",
        "مئة درجة.",
    ),
    "de": (
        "Wo liegt der Siedepunkt von Wasser?",
        "Wasser siedet auf Meereshöhe bei 100 °C, ß.",
        "100 °C.",
    ),
}


def _encoded(encoding: str, text: str, name: str) -> dict[str, Any]:
    raw = text.encode()
    encodings: dict[str, dict[str, Any]] = {
        "typed": {"type": "document", "title": name, "source": {"type": "text", "data": text}},
        "keyed": {"document": {"name": name, "format": "txt", "source": {"text": text}}},
        "generic": {"type": "generic", "generic_type": "document", "content": text, "name": name},
        "base64": {
            "document": {
                "name": name,
                "format": "txt",
                "source": {"bytes": base64.b64encode(raw).decode()},
            }
        },
        "hex": {"document": {"name": name, "format": "txt", "source": {"bytes": raw.hex()}}},
        "blob": {
            "type": "blob",
            "modality": "document",
            "mime_type": "text/plain",
            "content": base64.b64encode(raw).decode(),
            "name": name,
        },
    }
    return encodings[encoding]


ENCODINGS = ("typed", "keyed", "generic", "base64", "hex", "blob")
POSITIONS = ("system", "earlier_user", "earlier_assistant", "tool", "last_user")


def _conversation(position: str, part: dict[str, Any], question: str) -> list[dict[str, Any]]:
    """A conversation whose last user turn asks `question`, with the document `part` in
    the message at `position` (its text parts as GenAI writes them)."""

    def text(t: str) -> dict[str, Any]:
        return {"type": "text", "content": t}

    def message(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
        return {"role": role, "parts": list(parts)}

    turns = {
        "system": message(
            "system", text("Answer from the documents."), *([part] if position == "system" else [])
        ),
        "earlier_user": message(
            "user", text("Hello."), *([part] if position == "earlier_user" else [])
        ),
        "earlier_assistant": message(
            "assistant",
            text("Hello, ask away."),
            *([part] if position == "earlier_assistant" else []),
        ),
        "tool": message("tool", part),
        "last_user": message("user", *([part] if position == "last_user" else []), text(question)),
    }
    order = ("system", "earlier_user", "earlier_assistant", "tool", "last_user")
    # a tool turn only where it holds the document (a tool's other results are context too)
    return [turns[k] for k in order if k != "tool" or position == "tool"]


def test_documents_anywhere_in_the_conversation_give_the_right_record() -> None:
    seed = int(os.environ.get("MESSAGE_MODEL_SEED", random.randrange(1 << 32)))
    print(f"MESSAGE_MODEL_SEED={seed}")
    rng = random.Random(seed)
    cases = [(e, p, lang) for e in ENCODINGS for p in POSITIONS for lang in LANGUAGES]
    rng.shuffle(cases)
    wrong = []
    for encoding, position, language in cases:
        question, document, answer = LANGUAGES[language]
        name = f"kb/{language}-{rng.randrange(1000)}.md"
        inputs = _conversation(position, _encoded(encoding, document, name), question)
        (record,) = extract_records(_call(inputs, answer))
        got = (
            record.query,
            [(d.content, d.doc_uri) for d in record.retrieved_context],
            record.response,
            record.context_source,
        )
        if got != (question, [(document, name)], answer, "message_documents"):
            wrong.append((encoding, position, language, got))
    right = 1 - len(wrong) / len(cases)
    assert right >= 0.98, f"seed {seed}: {len(wrong)} of {len(cases)} wrong: {wrong[:3]}"


# -- fixed examples of each failure kind -----------------------------------------------------


def test_a_bedrock_document_in_a_log_event_is_a_document() -> None:
    """The botocore instrumentation's user message event: Converse content blocks, the
    document's bytes as base64."""
    question, document, _ = LANGUAGES["zh"]
    body = {
        "content": [
            {
                "document": {
                    "name": "kb/w",
                    "format": "txt",
                    "source": {"bytes": base64.b64encode(document.encode()).decode()},
                }
            },
            {"text": question},
        ]
    }
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.system": "aws.bedrock"}
    event_attributes = {"gen_ai.event.content": json.dumps(body, ensure_ascii=False)}
    from monitor.spans import SpanEvent

    span = Span(
        "ab" * 16,
        "1" * 16,
        "",
        "chat m",
        1_000,
        2_000,
        attributes={**attributes, "gen_ai.completion": "摄氏100度。"},
        events=[SpanEvent("gen_ai.user.message", 1_500, event_attributes)],
    )
    (record,) = extract_records([span])
    assert record.query == question
    assert [(d.content, d.doc_uri) for d in record.retrieved_context] == [(document, "kb/w")]


def test_placeholders_are_never_content() -> None:
    """Koog with content capture off writes `HIDDEN:non-empty` in place of every message."""
    inputs = [
        {"role": "system", "parts": [{"type": "text", "content": "HIDDEN:non-empty"}]},
        {"role": "user", "parts": [{"type": "text", "content": "HIDDEN:non-empty"}]},
    ]
    spans = _call(inputs, "HIDDEN:non-empty")
    (record,) = extract_records(spans)
    assert record.query is None and record.response is None
    assert not record.retrieved_context and record.context_source == "none"
    assert record.metadata["instrumentation"] == "koog"
    (query,) = [c for c in causes(spans, [record]) if c.part == "query"]
    assert query.key == "content_not_captured" and "setVerbose(true)" in query.detail
    assert content_text("<REDACTED>") is None


def test_a_citations_block_as_the_answer_is_read_for_its_text() -> None:
    question, document, answer = LANGUAGES["de"]
    blocks = [
        {
            "citationsContent": {
                "content": [{"text": answer}],
                "citations": [{"title": "kb/w", "sourceContent": [{"text": document}]}],
            }
        }
    ]
    inputs = _conversation("last_user", _encoded("keyed", document, "kb/w"), question)
    (record,) = extract_records(_call(inputs, json.dumps(blocks, ensure_ascii=False)))
    assert record.response == answer


def test_an_apps_own_json_answer_stays_as_it_is() -> None:
    inputs = [{"role": "user", "parts": [{"type": "text", "content": "Q?"}]}]
    (record,) = extract_records(_call(inputs, '{"answer": "A", "confidence": 0.5}'))
    assert record.response == '{"answer": "A", "confidence": 0.5}'


def test_roles_without_text_read_is_a_failed_read_not_capture_off() -> None:
    inputs = [{"role": "user", "parts": [{"type": "mystery", "payload": {"x": 1}}]}]
    spans = _call(inputs, "An answer.")
    records = extract_records(spans)
    (cause,) = [c for c in causes(spans, records) if c.part == "query"]
    assert cause.key == "content_not_read" and "user" in cause.detail
    assert "capture" not in cause.detail


def test_document_parts_without_text_are_named_as_such() -> None:
    inputs = [
        {
            "role": "user",
            "parts": [
                {
                    "type": "file",
                    "modality": "document",
                    "file_id": "file-9",
                    "mime_type": "application/pdf",
                },
                {"type": "text", "content": "Q?"},
            ],
        }
    ]
    spans = _call(inputs, "An answer.")
    records = extract_records(spans)
    (cause,) = [c for c in causes(spans, records) if c.part == "context"]
    assert cause.key == "document_without_text" and "file-9" in cause.detail


def test_a_users_part_shape_and_placeholder_are_read() -> None:
    config = Extraction.model_validate(
        {
            "conventions": [
                {
                    "name": "acme",
                    "parts": [
                        {
                            "kind": "generic",
                            "types": ["acme_passage"],
                            "text": ["body.words"],
                            "name": ["ref"],
                            "modality": "document",
                        }
                    ],
                    "placeholders": ["[withheld]"],
                }
            ]
        }
    )
    user = conventions_from_config(config.conventions)
    inputs = [
        {
            "role": "user",
            "parts": [
                {"type": "acme_passage", "ref": "kb/a", "body": {"words": DOC}},
                {"type": "text", "content": "Q?"},
            ],
        }
    ]
    (record,) = extract_records(_call(inputs, "[withheld]"), conventions=user)
    assert [(d.content, d.doc_uri) for d in record.retrieved_context] == [(DOC, "kb/a")]
    assert record.query == "Q?" and record.response is None


_RESULT = "Der Eiffelturm wurde 1889 fertiggestellt."
NATIVE_TOOL_TURNS = {
    "bedrock": [
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "t1", "name": "kb", "input": {}}}],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": _RESULT}]}}],
        },
    ],
    "gemini": [
        {"role": "model", "parts": [{"functionCall": {"id": "t1", "name": "kb", "args": {}}}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "t1", "name": "kb", "response": {"output": _RESULT}}}
            ],
        },
    ],
    "anthropic": [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "kb", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": _RESULT}],
        },
    ],
    "openai-responses": [
        {
            "role": "assistant",
            "content": [
                {"type": "function_call", "call_id": "t1", "name": "kb", "arguments": "{}"}
            ],
        },
        {
            "role": "tool",
            "content": [{"type": "function_call_output", "call_id": "t1", "output": _RESULT}],
        },
    ],
}


@pytest.mark.parametrize("name", sorted(NATIVE_TOOL_TURNS))
def test_native_tool_results_are_the_tools_documents(name: str) -> None:
    """A tool's result in any native shape is context, named by its tool (never the tool's
    name as the document)."""
    question = "Wann wurde der Eiffelturm fertiggestellt?"
    inputs = [
        {"role": "user", "content": [{"type": "text", "text": question}]},
        *NATIVE_TOOL_TURNS[name],
    ]
    (record,) = extract_records(_call(inputs, "1889."))
    assert [(d.content, d.doc_uri) for d in record.retrieved_context] == [(_RESULT, "kb")]
    assert record.context_source == "tool_result" and record.query == question


_DOCS_TEXT = "[kb/a.md] 水在海平面上100摄氏度沸腾。\n\n[kb/b.md] Das Wasser gefriert bei 0 °C."


@pytest.mark.parametrize(
    "turns",
    [
        # the documents as a user message of their own, before the question
        [("system", "Answer from the documents."), ("user", _DOCS_TEXT)],
        # the documents put in the model's mouth before any user turn
        [("system", "Answer from the documents."), ("assistant", _DOCS_TEXT)],
    ],
    ids=["earlier-user", "earlier-assistant"],
)
def test_documents_in_an_earlier_turn_of_this_request_are_split(
    turns: list[tuple[str, str]],
) -> None:
    question = "水的沸点是多少？"
    inputs = [
        {"role": role, "parts": [{"type": "text", "content": text}]}
        for role, text in [*turns, ("user", question)]
    ]
    (record,) = extract_records(_call(inputs, "摄氏100度。"))
    assert record.query == question
    assert [d.doc_uri for d in record.retrieved_context] == ["kb/a.md", "kb/b.md"]
    assert record.context_source == "prompt"


def test_earlier_questions_and_answers_stay_history() -> None:
    inputs = [
        {"role": role, "parts": [{"type": "text", "content": text}]}
        for role, text in [
            ("system", _DOCS_TEXT),
            ("user", "Wie heißt du?"),
            ("assistant", "Ich bin ein Assistent."),
            ("user", "水的沸点是多少？"),
        ]
    ]
    (record,) = extract_records(_call(inputs, "摄氏100度。"))
    assert [d.doc_uri for d in record.retrieved_context] == ["kb/a.md", "kb/b.md"]
    assert [h.content for h in record.history] == ["Wie heißt du?", "Ich bin ein Assistent."]


def test_a_tools_name_is_never_a_document() -> None:
    """An agent span lists its tools' names; the system prompt names the tool too: a name
    is no document, found by structure or not."""
    agent = Span(
        "ab" * 16,
        "2" * 16,
        "",
        "invoke_agent kb",
        500,
        3_000,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.tools": json.dumps(["search_knowledge_base", "get_current_weather"]),
        },
    )
    inputs = [
        {"role": "system", "parts": [{"type": "text", "content": "Call search_knowledge_base."}]},
        {"role": "user", "parts": [{"type": "text", "content": "水的沸点是多少？"}]},
    ]
    (call,) = _call(inputs, "摄氏100度。")
    call = Span(
        call.trace_id,
        call.span_id,
        agent.span_id,
        call.name,
        1_000,
        2_000,
        attributes=call.attributes,
    )
    (record,) = extract_records([agent, call])
    assert record.context_source != "structure"
    assert "search_knowledge_base" not in [d.content for d in record.retrieved_context]
