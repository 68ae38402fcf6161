"""Documents no convention names: found by structure (a span's list of texts that appear in
the model call's prompt) or split out of the prompt (its instruction template and the
question left out). Each trace is written by the real OpenTelemetry SDK and decoded from
the OTLP bytes its exporters send; the shapes are those of stacks the conventions table
does not read (an OpenInference retriever's `set_output`, a Traceloop `@task` retriever, a
database client span, an untraced retriever, a GenAI retrieval with ids only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from harness.otlp import CONVENTIONS, WATER, capture, finished_spans, otlp_bytes
from monitor.extraction import _record_parts, extract_records
from monitor.extraction._prompt_documents import documents_from_prompt
from monitor.extraction._prompt_templates import TEMPLATES, PromptTemplates
from monitor.records import RagRecord
from monitor.spans import Span, decode_protobuf
from tests.extraction.test_event_conventions import ANSWER, DOCS, QUESTION

INSTRUCTION = "You are a careful assistant. Answer only from the documents below."
TEXTS = [text for _, text in DOCS]


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


def _decoded(emit: Callable[[Tracer], object], service: str = "kb-app") -> list[Span]:
    decoded = decode_protobuf(otlp_bytes(finished_spans(service, emit)))
    assert decoded.rejected == 0
    return decoded.spans


def _record(emit: Callable[[Tracer], object], service: str = "kb-app") -> RagRecord:
    (record,) = extract_records(_decoded(emit, service))
    return record


def _numbered_system() -> str:
    blocks = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(TEXTS, 1))
    return f"{INSTRUCTION}\n\n{blocks}"


def _genai_chat(
    tracer: Tracer, system: str | None, user: str = QUESTION, name: str = "chat gpt-4o-mini"
) -> None:
    """A GenAI chat span with content (what LiteLLM's and Google Gen AI's OTel send)."""
    sent = [("system", system), ("user", user)] if system is not None else [("user", user)]
    messages = [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in sent]
    with tracer.start_as_current_span(
        name,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        },
    ):
        pass


def _assert_documents(record: RagRecord, source: str, uris: Sequence[str | None]) -> None:
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [d.content for d in record.retrieved_context] == TEXTS
    assert [d.doc_uri for d in record.retrieved_context] == list(uris)
    assert record.context_source == source
    for doc in record.retrieved_context:
        assert "Answer only" not in doc.content and "You are" not in doc.content


# -- found by structure ------------------------------------------------------------------------


def test_an_openinference_retriever_that_set_its_output_is_found_by_structure() -> None:
    """`span.set_output(docs)` on a RETRIEVER span: no `retrieval.documents`, only
    `output.value` holding the list; the model call's system message holds the texts."""

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "rag",
            attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION},
        ):
            with tracer.start_as_current_span(
                "retrieve",
                attributes={
                    "openinference.span.kind": "RETRIEVER",
                    "input.value": QUESTION,
                    "output.value": json.dumps([{"id": i, "content": t} for i, t in DOCS]),
                    "output.mime_type": "application/json",
                },
            ):
                pass
            with tracer.start_as_current_span(
                "llm",
                attributes={
                    "openinference.span.kind": "LLM",
                    "llm.input_messages.0.message.role": "system",
                    "llm.input_messages.0.message.content": (f"{INSTRUCTION}\n" + "\n".join(TEXTS)),
                    "llm.input_messages.1.message.role": "user",
                    "llm.input_messages.1.message.content": QUESTION,
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": ANSWER,
                },
            ):
                pass

    record = _record(emit)
    _assert_documents(record, "structure", [uri for uri, _ in DOCS])
    assert "'retrieve'" in record.metadata["context_evidence"]
    assert "output.value" in record.metadata["context_evidence"]


def test_a_traceloop_task_retriever_is_found_by_structure() -> None:
    """OpenLLMetry's `@task` retriever: a `task` span whose `traceloop.entity.output` is the
    list of strings it returned; the OpenAI call's indexed prompt attributes."""

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "answer.workflow",
            attributes={
                "traceloop.span.kind": "workflow",
                "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
                "traceloop.entity.output": json.dumps(ANSWER),
            },
        ):
            with tracer.start_as_current_span(
                "retrieve.task",
                attributes={
                    "traceloop.span.kind": "task",
                    "traceloop.entity.name": "retrieve",
                    "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {"k": 2}}),
                    "traceloop.entity.output": json.dumps(TEXTS),
                },
            ):
                pass
            with tracer.start_as_current_span(
                "openai.chat",
                attributes={
                    "llm.request.type": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.prompt.0.role": "system",
                    "gen_ai.prompt.0.content": f"{INSTRUCTION}\n\n" + "\n\n".join(TEXTS),
                    "gen_ai.prompt.1.role": "user",
                    "gen_ai.prompt.1.content": QUESTION,
                    "gen_ai.completion.0.role": "assistant",
                    "gen_ai.completion.0.content": ANSWER,
                },
            ):
                pass

    record = _record(emit)
    _assert_documents(record, "structure", [None, None])
    assert "traceloop.entity.output" in record.metadata["context_evidence"]


@pytest.mark.parametrize("where", ["event", "attribute"])
def test_a_database_client_span_is_found_by_structure(where: str) -> None:
    """A retrieval traced as a database client span (`db.system.name`, `db.query.text`):
    its rows in an event or an attribute, under a wrapper no convention names."""
    rows = json.dumps({"rows": [{"doc_id": uri, "body": text} for uri, text in DOCS]})

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            with tracer.start_as_current_span(
                "SELECT kb",
                attributes={
                    "db.system.name": "postgresql",
                    "db.query.text": "SELECT body FROM kb ORDER BY embedding <-> $1 LIMIT 2",
                    **({"db.response.rows": rows} if where == "attribute" else {}),
                },
            ) as span:
                if where == "event":
                    span.add_event("db.result", {"payload": rows})
            _genai_chat(tracer, f"{INSTRUCTION}\n\n" + "\n\n".join(TEXTS))

    record = _record(emit)
    _assert_documents(record, "structure", [None, None])
    assert record.route == "/ask"


def test_texts_that_are_not_in_the_prompt_are_no_documents() -> None:
    """A list of texts the prompt does not hold (an index build's input, a cache's keys) is
    no evidence: the documents come from the prompt itself."""

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            with tracer.start_as_current_span(
                "cache.lookup",
                attributes={"keys": json.dumps(["a different text that is long", "another"])},
            ):
                pass
            _genai_chat(tracer, _numbered_system())

    record = _record(emit)
    _assert_documents(record, "prompt", [None, None])


# -- split out of the prompt -------------------------------------------------------------------


def test_an_untraced_retriever_gives_the_prompt_split_at_its_numbered_blocks() -> None:
    """No retrieval span at all (a plain function retrieves): the documents are the system
    message's numbered blocks; the instruction above them is left out."""

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, _numbered_system())

    record = _record(emit)
    _assert_documents(record, "prompt", [None, None])
    assert record.metadata["context_evidence"].startswith("2 documents")


def test_one_user_message_around_documents_and_question_gives_both() -> None:
    """No retrieval span, no request span, no system message: the question is what the
    user message labels, the documents what it holds besides."""
    user = "Context:\n" + "\n\n".join(TEXTS) + f"\n\nQuestion: {QUESTION}\nAnswer:"

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, None, user, name="litellm_request")

    record = _record(emit)
    _assert_documents(record, "prompt", [None, None])


def test_a_retrieval_span_with_ids_only_names_the_prompt_documents() -> None:
    """A GenAI `retrieval` span whose documents hold `{id, score}` only: the texts come
    from the prompt, each paired with its id in retrieval order."""

    def emit(tracer: Tracer) -> None:
        ids_only = [{"id": uri, "score": 0.9 - n / 10} for n, (uri, _) in enumerate(DOCS)]
        retrieval: dict[str, str] = {"gen_ai.operation.name": "retrieval"}
        retrieval["gen_ai.retrieval.query.text"] = QUESTION
        retrieval["gen_ai.retrieval.documents"] = json.dumps(ids_only)
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            with tracer.start_as_current_span("retrieval kb", attributes=retrieval):
                pass
            _genai_chat(tracer, f"{INSTRUCTION}\n\n" + "\n\n".join(TEXTS))

    record = _record(emit)
    _assert_documents(record, "prompt", [uri for uri, _ in DOCS])


@pytest.mark.parametrize(
    "system",
    [
        f"{INSTRUCTION}\n\n<documents>\n"
        + "\n".join(f'<doc id="{u}">{t}</doc>' for u, t in DOCS)
        + "\n</documents>",
        f"{INSTRUCTION}\n\n" + "\n\n".join(f"Document {n}: {t}" for n, t in enumerate(TEXTS, 1)),
        f"{INSTRUCTION}\n\n" + "\n".join(f"[{u}] {t}" for u, t in DOCS) + "\n\nBe brief.",
        f"{INSTRUCTION}\nContext:\n" + "\n".join(TEXTS),
    ],
    ids=["tags", "named", "bracketed_ids", "heading_and_lines"],
)
def test_the_prompt_is_split_at_its_own_boundaries(system: str) -> None:
    docs = documents_from_prompt(
        [("system", system), ("user", QUESTION)], QUESTION, templates=PromptTemplates()
    )
    assert [d.content for d in docs] == TEXTS
    assert all(d.doc_uri in (None, *(u for u, _ in DOCS)) for d in docs)


def test_the_question_inside_the_user_message_is_left_out() -> None:
    user = f"Context:\n{TEXTS[0]}\n\n{TEXTS[1]}\n\nQuestion: {QUESTION}\nAnswer:"
    docs = documents_from_prompt([("user", user)], QUESTION, templates=PromptTemplates())
    assert [d.content for d in docs] == TEXTS


def test_the_template_a_route_shares_is_learned_and_never_taken_for_documents() -> None:
    """A template in plain words that no cue gives away (no `you`, no `answer`): once the
    route has shown a few prompts, its shared lines are the template and left out; a
    document retrieved for two questions is still a document."""
    kb = [
        "Honey never spoils: its low moisture and high acidity stop microbes growing.",
        "The Moon orbits the Earth once every 27 days.",
        "Mount Everest, 8849 metres tall, is the highest mountain above sea level.",
        "Python was created by Guido van Rossum and first released in 1991.",
    ]
    header = "Acme Corp knowledge service, internal edition."
    footer = "Reply in the customer's language and keep it short."
    templates = PromptTemplates()
    chosen = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]
    for n, (a, b) in enumerate(chosen):
        system = f"{header}\n\n{kb[a]}\n\n{kb[b]}\n\n{footer}"
        docs = documents_from_prompt(
            [("system", system), ("user", f"question {n}?")],
            f"question {n}?",
            key=("kb-app", "/ask"),
            templates=templates,
        )
        if n >= 2:  # two earlier prompts tell the template
            assert [d.content for d in docs] == [kb[a], kb[b]]
    # Another route has not shown its template: nothing of this one's is assumed there.
    docs = documents_from_prompt(
        [("system", f"{header}\n\n{kb[0]}")], "q?", key=("kb-app", "/other"), templates=templates
    )
    assert [d.content for d in docs] == [header, kb[0]]


def test_the_template_memory_is_bounded() -> None:
    """Routes and senders a route learns from are bounded; a sender's learned lines shrink
    to what its prompts share, whatever their number."""
    templates = PromptTemplates(routes=3, senders=2)
    for route in range(10):
        for sender in range(5):
            for n in range(5):
                templates.shared(("svc", str(route)), (-1, n, -2), str(sender))
    assert len(templates._seen) == 3
    assert all(len(senders) == 2 for senders in templates._seen.values())
    assert templates.shared(("svc", "9"), (-1, 7, -2), "4") == frozenset({-1, -2})


def test_a_document_every_prompt_holds_is_no_template_where_it_moves() -> None:
    """A small knowledge base: one document is retrieved for every question, first for
    some, second for others; the header every prompt opens with is the template."""
    header = "Acme knowledge service."
    popular = "Honey never spoils: its low moisture and high acidity stop microbes growing."
    others = [f"Fact number {n} is a plain statement of a fact." for n in range(6)]
    templates = PromptTemplates()
    for n, other in enumerate(others):
        pair = [popular, other] if n % 2 else [other, popular]
        system = f"{header}\n\n" + "\n\n".join(pair)
        docs = documents_from_prompt(
            [("system", system)], None, key=("kb-app", "/ask"), templates=templates
        )
        assert [d.content for d in docs] == (pair if n >= 2 else [header, *pair])
    # The same documents again (the same question asked twice) tell nothing new.
    docs = documents_from_prompt(
        [("system", system)], None, key=("kb-app", "/ask"), templates=templates
    )
    assert [d.content for d in docs] == pair


def test_a_prompt_of_instructions_only_gives_no_context() -> None:
    """A chat app with no retrieval: its system prompt is instructions, never documents."""

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, "You are a friendly assistant. Answer the user's question briefly.")

    record = _record(emit)
    assert record.retrieved_context == ()
    assert record.context_source == "none"


# -- convention-read traces ---------------------------------------------------------------------


@pytest.mark.parametrize("convention", sorted(set(CONVENTIONS) - {"genai_ids_only"}))
def test_traces_a_convention_reads_never_run_structure_or_prompt_splitting(
    convention: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_: Any) -> Any:
        raise AssertionError("ran on a trace whose documents a convention read")

    monkeypatch.setattr(_record_parts, "found_by_structure", refused)
    monkeypatch.setattr(_record_parts, "documents_from_prompt", refused)
    _, spans = capture(CONVENTIONS[convention], WATER)
    (record,) = extract_records(decode_protobuf(otlp_bytes(spans)).spans)
    assert [d.content for d in record.retrieved_context] == WATER.contents
    assert record.context_source == (
        "convention" if convention.startswith("plain") else "retrieval_span"
    )
    assert "context_evidence" not in record.metadata


def test_tool_results_say_so() -> None:
    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "execute_tool search",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.result": json.dumps(TEXTS),
            },
        ):
            pass
        _genai_chat(tracer, "Use the tool results.")

    record = _record(emit)
    assert [d.content for d in record.retrieved_context] == TEXTS
    assert record.context_source == "tool_result"


def _haystack_message(role: str, text: str) -> dict[str, Any]:
    """A Haystack `ChatMessage.to_dict()`, as its tracer serializes a component's values."""
    return {"role": role, "meta": {}, "name": None, "content": [{"text": text}]}


def test_haystacks_own_tracer_gives_its_model_call_and_documents_by_structure() -> None:
    """Haystack's tracer (`opentelemetry-haystack`), no convention declared: a pipeline span
    and one span per component, their values in `haystack.component.input` / `.output`;
    the generator's `{"messages": [...]}` in, `{"replies": [...]}` out; the prompt holds the
    documents and the question in one user message."""
    documents: list[dict[str, Any]] = [
        {"id": uri, "content": text, "score": 1.5, "meta": {}, "embedding": None}
        for uri, text in DOCS
    ]
    user = "Documents:\n" + "\n".join(TEXTS) + f"\n\nQuestion: {QUESTION}\nAnswer:"
    prompt = [_haystack_message("system", INSTRUCTION), _haystack_message("user", user)]

    def component(tracer: Tracer, name: str, inputs: Any, outputs: Any) -> None:
        with tracer.start_as_current_span(
            "haystack.component.run",
            attributes={
                "haystack.component.name": name,
                "haystack.component.type": name.title(),
                "haystack.component.input": json.dumps(inputs),
                "haystack.component.output": json.dumps(outputs),
            },
        ):
            pass

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span(
            "haystack.pipeline.run",
            attributes={
                "haystack.pipeline.input_data": json.dumps(
                    {"retriever": {"query": QUESTION}, "prompt_builder": {"question": QUESTION}}
                ),
                "haystack.pipeline.output_data": json.dumps(
                    {"llm": {"replies": [_haystack_message("assistant", ANSWER)]}}
                ),
            },
        ):
            component(tracer, "retriever", {"query": QUESTION}, {"documents": documents})
            component(
                tracer,
                "prompt_builder",
                {"documents": documents, "question": QUESTION, "template": None},
                {"prompt": prompt},
            )
            component(
                tracer,
                "llm",
                {"messages": prompt},
                {"replies": [_haystack_message("assistant", ANSWER)]},
            )

    record = _record(emit)
    _assert_documents(record, "structure", [uri for uri, _ in DOCS])


def test_a_long_document_the_prompt_cut_short_is_found_by_its_opening() -> None:
    long_text = TEXTS[0] + " " + " ".join(f"It has detail number {n}." for n in range(40))

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            with tracer.start_as_current_span(
                "search", attributes={"return": json.dumps([long_text, TEXTS[1]])}
            ):
                pass
            cut = f"{INSTRUCTION}\n\n{long_text[:300]}...\n\n{TEXTS[1]}"
            _genai_chat(tracer, cut)

    record = _record(emit)
    assert [d.content for d in record.retrieved_context] == [long_text, TEXTS[1]]
    assert record.context_source == "structure"


def test_a_list_of_documents_written_as_their_reprs_is_found_by_structure() -> None:
    """A decorator that records `str()` of what the retriever returned: LangChain
    `Document` reprs, quotes escaped as Python writes them."""
    docs = [f"Document(metadata={{'source': {u!r}}}, page_content={t!r})" for u, t in DOCS]
    quoted = "The manager's note: it's done."

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("POST /ask", attributes={"http.route": "/ask"}):
            returned = "[" + ", ".join([*docs, f"Document(page_content={quoted!r})"]) + "]"
            with tracer.start_as_current_span("retrieve", attributes={"return": returned}):
                pass
            _genai_chat(tracer, f"{INSTRUCTION}\n\n" + "\n\n".join([*TEXTS, quoted]))

    record = _record(emit)
    assert [d.content for d in record.retrieved_context] == [*TEXTS, quoted]
    assert record.context_source == "structure"
