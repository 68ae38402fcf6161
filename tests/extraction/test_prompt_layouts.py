"""Documents split from a prompt by its layout (Markdown headings, list items, XML tags, a
JSON user message), and the instruction template a route learns: from prompts that differ
only in their question, and never from one sender for another. The traces are written by
the real OpenTelemetry SDK and decoded from the OTLP bytes its exporter sends."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from monitor.config import load_config
from monitor.extraction import conventions_from_config, extract_records
from monitor.extraction._prompt_documents import documents_from_prompt
from monitor.extraction._prompt_templates import TEMPLATES, PromptTemplates
from monitor.records import RagRecord
from tests.extraction.test_event_conventions import ANSWER, DOCS, QUESTION
from tests.extraction.test_structure_and_prompt import INSTRUCTION, _decoded, _genai_chat, _record

TEXTS = [text for _, text in DOCS]
URIS = [uri for uri, _ in DOCS]


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()
    yield
    TEMPLATES.clear()


def _assert_split(record: RagRecord, uris: Sequence[str | None]) -> None:
    assert (record.query, record.response) == (QUESTION, ANSWER)
    assert [d.content for d in record.retrieved_context] == TEXTS
    assert [d.doc_uri for d in record.retrieved_context] == list(uris)
    assert record.context_source == "prompt"


MARKDOWN_KB = (
    "# Role\nYou are the support assistant of Acme.\n\n"
    "# Instructions\n- Answer only from the knowledge base.\n- Cite the document id.\n\n"
    "# Knowledge base\n" + "\n".join(f"## {uri}\n{text}\n" for uri, text in DOCS)
)


def test_a_markdown_knowledge_base_gives_a_document_per_heading_named_by_it() -> None:
    """The service's first record: no template learned; the `# Role` and `# Instructions`
    blocks are the template's, each `## <id>` section a document without its heading."""

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, MARKDOWN_KB)

    _assert_split(_record(emit), URIS)


def test_a_json_user_message_gives_its_question_and_its_array_of_documents() -> None:
    """`{"task", "question", "context": [...]}` as the user message, a system prompt that
    never changes: the query is the question field, the documents the array's items."""
    system = "Acme support desk, internal edition."
    for n, context in enumerate([TEXTS, [{"id": u, "text": t} for u, t in DOCS]]):
        user = json.dumps(
            {"task": "Answer from the context.", "question": QUESTION, "context": context}
        )

        def emit(tracer: Tracer, user: str = user) -> None:
            _genai_chat(tracer, system, user)

        _assert_split(_record(emit), [None, None] if n == 0 else URIS)


@pytest.mark.parametrize(
    "fields",
    [
        {"instruction": "Answer from the passages.", "userAsk": QUESTION},
        {"note": "Answer from the passages.", "payload": {"text_in": QUESTION}},
    ],
    ids=["named_as_a_question", "the_one_text_that_asks"],
)
def test_a_json_message_is_read_by_what_its_fields_hold_not_by_a_list_of_names(
    fields: dict[str, object],
) -> None:
    """Field names no list holds: the question is the field named as one (a word of its
    name) or the one text that asks, one object deep; each item's text is its longest
    text, its name a one-word value."""
    hits = [{"ref": uri, "passage_text": text} for uri, text in DOCS]
    user = json.dumps({**fields, "retrieved": {"hits": hits}})

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, "Acme support desk, internal edition.", user)

    _assert_split(_record(emit), URIS)


def test_a_json_messages_history_is_no_document() -> None:
    """The conversation so far inside the JSON (role-tagged messages, a `history` field)
    is history, not documents."""
    turns = [{"role": "user", "content": "Where is the Louvre?"}]
    user = json.dumps(
        {
            "question": QUESTION,
            "history": ["Where is the Louvre?"],
            "turns": turns,
            "context": TEXTS,
        }
    )
    docs = documents_from_prompt([("user", user)], QUESTION, templates=PromptTemplates())
    assert [d.content for d in docs] == TEXTS


@pytest.mark.parametrize(
    "system",
    [
        "Answer from the context below.\n\nContext:\n" + "\n".join(f"- {t}" for t in TEXTS),
        "Answer from the context below.\n\nContext:\n"
        + "\n".join(f"{n}. {t}" for n, t in enumerate(TEXTS, 1)),
        "Use the documents below.\n<documents>\n"
        + "\n".join(f'<document source="{u}">\n{t}\n</document>' for u, t in DOCS)
        + "\n</documents>",
        "# Context\n\n" + "\n\n".join(TEXTS) + "\n\n# Rules\nBe brief.",
        "Use the documents below.\n<documents>\n"
        + "\n".join(
            f'<document index="{n}">\n<source>{u}</source>\n<document_content>\n{t}\n'
            "</document_content>\n</document>"
            for n, (u, t) in enumerate(DOCS, 1)
        )
        + "\n</documents>",
    ],
    ids=["dashes", "numbers", "xml_source", "markdown_context_section", "xml_source_child"],
)
def test_list_items_tags_and_a_context_section_are_split(system: str) -> None:
    docs = documents_from_prompt(
        [("system", system), ("user", QUESTION)], QUESTION, templates=PromptTemplates()
    )
    assert [d.content for d in docs] == TEXTS
    named = "source" in system  # a tag's source attribute or a `<source>` inside it
    assert [d.doc_uri for d in docs] == (URIS if named else [None, None])


def test_a_comment_in_a_code_sample_is_no_heading() -> None:
    code = "```python\n# boil water first\nkettle.boil()\n```"
    system = f"Use the context below.\n\nContext:\n{code}\n\n{TEXTS[1]}"
    docs = documents_from_prompt([("system", system)], QUESTION, templates=PromptTemplates())
    assert [d.content for d in docs] == [code, TEXTS[1]]


def test_a_list_of_rules_is_no_list_of_documents() -> None:
    system = "Rules:\n- Answer only from the context.\n- Be brief.\n\nContext:\n" + "\n".join(
        f"- {t}" for t in TEXTS
    )
    docs = documents_from_prompt([("system", system)], QUESTION, templates=PromptTemplates())
    assert [d.content for d in docs] == TEXTS


def test_a_system_prompt_that_never_changes_is_learned_as_the_template() -> None:
    """A plain-worded system prompt (no cue of an instruction) sent unchanged with every
    question: from the third question on it is the template, not a document."""
    templates = PromptTemplates()
    system = "Acme support desk, internal edition."
    found = [
        documents_from_prompt(
            [("system", system), ("user", f"question {n}?")],
            f"question {n}?",
            key=("app", "/ask"),
            templates=templates,
        )
        for n in range(4)
    ]
    assert [len(docs) for docs in found] == [1, 1, 0, 0]


HEADER = "Acme knowledge service."
TARGET = "Honey never spoils: its low moisture and high acidity stop microbes growing."
FACTS = [f"Fact number {n} is a plain statement about topic {n}." for n in range(40)]


def _split(templates: PromptTemplates, docs: list[str], sender: str, n: int) -> list[str]:
    system = f"{HEADER}\n\n" + "\n\n".join(docs)
    found = documents_from_prompt(
        [("system", system), ("user", f"question {n}?")],
        f"question {n}?",
        key=("kb-app", "/ask"),
        templates=templates,
        sender=sender,
    )
    return [d.content or "" for d in found]


def test_one_sender_cannot_teach_the_template_that_drops_another_senders_document() -> None:
    """16 forged prompts that open with a target document for each honest one: honest
    prompts that open with it keep it."""
    templates = PromptTemplates()
    for n in range(4):
        assert (
            _split(templates, FACTS[2 * n : 2 * n + 2], "pod-a", n)[-2:] == FACTS[2 * n : 2 * n + 2]
        )
    for round_ in range(3):
        for k in range(16):
            _split(templates, [TARGET, FACTS[k]], f"forger-{k % 2}", 100 + 16 * round_ + k)
        honest = [TARGET, FACTS[10 + round_]]
        assert _split(templates, honest, "pod-a", 10 + round_) == honest


def test_a_document_first_in_many_prompts_in_a_row_is_never_learned_away() -> None:
    """Honest traffic alone: once the template is known, a document retrieved first for
    twenty questions in a row stays a document in each."""
    templates = PromptTemplates()
    for n in range(4):
        _split(templates, FACTS[2 * n : 2 * n + 2], "pod-a", n)
    for n in range(20):
        pair = [TARGET, FACTS[10 + n]]
        assert _split(templates, pair, "pod-a", 10 + n) == pair


def test_a_new_sender_gets_the_template_other_senders_agree_on() -> None:
    templates = PromptTemplates()
    for sender in ("pod-a", "pod-b"):
        for n in range(3):
            _split(templates, FACTS[n : n + 2], sender, n)
    assert _split(templates, [FACTS[20], FACTS[21]], "pod-c", 50) == [FACTS[20], FACTS[21]]


# The JVM frameworks' default RAG prompts, as each renders its template: the documents
# joined as the framework joins them (Spring AI: one a line; LangChain4j: blank lines).
SPRING_QA = (
    f"{QUESTION}\n\n"
    "Context information is below, surrounded by ---------------------\n\n"
    "---------------------\n" + "\n".join(TEXTS) + "\n---------------------\n\n"
    "Given the context and provided history information and not prior knowledge,\n"
    "reply to the user comment. If the answer is not in the context, inform\n"
    "the user that you can't answer the question.\n"
)
SPRING_AUGMENTER = (
    "Context information is below.\n\n---------------------\n"
    + "\n".join(TEXTS)
    + "\n---------------------\n\n"
    "Given the context information and no prior knowledge, answer the query.\n\n"
    "Follow these rules:\n\n"
    "1. If the answer is not in the context, just say that you don't know.\n"
    '2. Avoid statements like "Based on the context..." or "The provided information...".\n\n'
    f"Query: {QUESTION}\n\nAnswer:\n"
)
LANGCHAIN4J = f"{QUESTION}\n\nAnswer using the following information:\n" + "\n\n".join(TEXTS)
# LangChain4j's `gen_ai.prompt` under Quarkus LangChain4j 1.5 (PromptTextSpanContributor):
# the chat memory's messages joined by single newlines, an earlier turn (its question with
# its injected content, then the model's answer) before the last.
LANGCHAIN4J_MEMORY = (
    "Where is the Louvre?\n\nAnswer using the following information:\n"
    "The Louvre is a museum in Paris.\n\nThe Mona Lisa hangs in the Louvre.\n"
    "The Louvre is in Paris.\n" + LANGCHAIN4J
)


@pytest.mark.parametrize(
    "user",
    [SPRING_QA, SPRING_AUGMENTER, LANGCHAIN4J, LANGCHAIN4J_MEMORY],
    ids=[
        "spring_ai_question_answer_advisor",
        "spring_ai_contextual_query_augmenter",
        "langchain4j_content_injector",
        "langchain4j_chat_memory",
    ],
)
def test_the_jvm_frameworks_default_rag_prompts_give_question_and_documents(user: str) -> None:
    """The documents only in the prompt (a store built without observation): the block
    between the delimiters, one document a line, without header or instructions; the
    question is the user's own text."""

    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, None, user)

    _assert_split(_record(emit), [None, None])


# A stack the shipped table does not know, whose default RAG prompt a user declares
# (`extraction.conventions[].rag_prompts`): Chinese, full-width punctuation.
ZH_QUESTION = "埃菲尔铁塔是哪一年建成的？"
ZH_DOCS = ["埃菲尔铁塔位于巴黎，于1889年建成。", "在海平面，纯水在摄氏100度沸腾。"]
ZH_PROMPT = (
    f"{ZH_QUESTION}\n\n以下是参考资料，位于两行等号之间：\n======\n"
    + "\n".join(ZH_DOCS)
    + "\n======\n请只根据参考资料回答，不要编造。"
)
RU_QUESTION = "Когда была построена Эйфелева башня?"
RU_DOCS = ["Эйфелева башня стоит в Париже и построена в 1889 году.", "Вода кипит при 100 °C."]
RU_PROMPT = f"{RU_QUESTION}\n\nИспользуй эти сведения:\n" + "\n\n".join(RU_DOCS)
USER_PROMPTS = """
extraction:
  conventions:
    - name: acme-rag
      rag_prompts:
        - {header: "以下是参考资料，位于两行等号之间：", delimiter: "======", question: before}
        - {header: "Используй эти сведения:", question: paragraph}
"""


def _user_conventions(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return conventions_from_config(load_config(str(path)).extraction.conventions)


@pytest.mark.parametrize(
    ("user", "question", "texts"),
    [(ZH_PROMPT, ZH_QUESTION, ZH_DOCS), (RU_PROMPT, RU_QUESTION, RU_DOCS)],
    ids=["delimited_chinese", "paragraphs_cyrillic"],
)
def test_a_default_rag_prompt_the_user_declares_gives_question_and_documents(
    tmp_path: Path, user: str, question: str, texts: list[str]
) -> None:
    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, None, user)

    spans = _decoded(emit)
    (plain,) = extract_records(spans)
    (record,) = extract_records(spans, conventions=_user_conventions(tmp_path, USER_PROMPTS))
    assert isinstance(plain, RagRecord) and isinstance(record, RagRecord)
    assert (record.query, record.response) == (question, ANSWER)
    assert [d.content for d in record.retrieved_context] == texts
    assert record.context_source == "prompt"
    # The declaration is what reads it: without it the header and question are no layout.
    assert (plain.query, [d.content for d in plain.retrieved_context]) != (question, texts)


# A stack that traces its chat memory's messages joined into one string, told by a mark.
JOINED_CONFIG = """
extraction:
  conventions:
    - name: acme-memory
      marks: [acme.memory.]
      joins_messages: true
"""


def test_a_stack_declared_to_join_its_messages_gets_no_documents_guessed(
    tmp_path: Path,
) -> None:
    """The earlier turns' documents cannot be told from this turn's in one joined string
    without a default RAG prompt's header: none is taken rather than guessed."""
    joined = f"{INSTRUCTION}\n" + "\n".join(f"[{n}] {t}" for n, t in enumerate(TEXTS, 1))

    def emit(tracer: Tracer) -> None:
        with tracer.start_as_current_span("answer", attributes={"acme.memory.turns": 3}):
            _genai_chat(tracer, None, f"{joined}\n{QUESTION}")

    spans = _decoded(emit)
    (plain,) = extract_records(spans)
    (record,) = extract_records(spans, conventions=_user_conventions(tmp_path, JOINED_CONFIG))
    assert isinstance(plain, RagRecord) and isinstance(record, RagRecord)
    assert plain.retrieved_context != ()
    assert record.retrieved_context == ()
    assert record.context_source == "prompt"
