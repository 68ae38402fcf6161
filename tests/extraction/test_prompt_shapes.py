"""Prompts split into question and documents by their structure, whatever their words or
script: one fixed example of each kind real apps were misread on (a Chinese RAG prompt, a
Langchain-Chatchat template, documents named by a label, YAML items, table rows, Spring
AI's document formatter, a service's first requests, a joined prompt with a tool's result).
Each trace is written by the real OpenTelemetry SDK, no convention names its documents, and
they reach the model only inside the prompt; the service's first requests after a start."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.trace import Tracer

from monitor.extraction._prompt_shapes import asks, shape_of
from monitor.extraction._prompt_templates import TEMPLATES
from monitor.records import RagRecord
from tests.extraction.test_structure_and_prompt import _genai_chat, _record

QUESTION_ZH = "埃菲尔铁塔是什么时候建成的？"
DOCS_ZH = [
    ("kb/eiffel.md", "埃菲尔铁塔于1889年建成，是巴黎世界博览会的入口。"),
    ("kb/height.md", "埃菲尔铁塔高330米，位于巴黎战神广场。"),
]
TEXTS_ZH = [text for _, text in DOCS_ZH]
QUESTION = "When was the Eiffel Tower completed?"
DOCS = [
    ("kb/eiffel.md", "The Eiffel Tower was completed in 1889 for the World's Fair."),
    ("kb/height.md", "The tower is 330 metres tall and stands on the Champ de Mars."),
]
TEXTS = [text for _, text in DOCS]
URIS = [uri for uri, _ in DOCS]
ANSWER = "It was completed in 1889."  # what `_genai_chat` answers


@pytest.fixture(autouse=True)
def _fresh_templates() -> Iterator[None]:
    TEMPLATES.clear()  # a service's first requests after a start
    yield
    TEMPLATES.clear()


def _read(system: str | None, user: str) -> RagRecord:
    def emit(tracer: Tracer) -> None:
        _genai_chat(tracer, system, user)

    return _record(emit)


def _assert(record: RagRecord, question: str, texts: list[str], uris: Sequence[str | None]) -> None:
    assert record.query == question
    assert [d.content for d in record.retrieved_context] == texts
    assert [d.doc_uri for d in record.retrieved_context] == list(uris)
    assert record.context_source == "prompt"


CHINESE_RAG = (
    "已知信息：\n"
    + "\n".join(f"{n}. {t}" for n, t in enumerate(TEXTS_ZH, 1))
    + "\n\n根据上述已知信息，简洁和专业地回答用户的问题。\n\n"
    + f"问题：{QUESTION_ZH}\n回答："
)
# Langchain-Chatchat's default knowledge-base prompt, its documents joined by newlines.
CHATCHAT = (
    "<指令>根据已知信息，简洁和专业的来回答问题。如果无法从中得到答案，请说 “根据已知信息无法"
    "回答该问题”，不允许在答案中添加编造成分，答案请使用中文。 </指令>\n"
    "<已知信息>" + "\n".join(TEXTS_ZH) + "</已知信息>\n"
    f"<问题>{QUESTION_ZH}</问题>\n"
)


@pytest.mark.parametrize("user", [CHINESE_RAG, CHATCHAT], ids=["labelled", "chatchat_tags"])
def test_a_chinese_prompt_gives_its_question_and_its_documents(user: str) -> None:
    """The whole prompt in one user message, no span says the question: the question is
    the labelled or tagged text that asks (`？`), the documents the numbered items or the
    lines of the tag that holds them; the instruction and `回答：` are neither."""
    _assert(_read(None, user), QUESTION_ZH, TEXTS_ZH, [None, None])


NAMED_BLOCKS = "Answer from the sources.\n\n" + "\n\n".join(
    f"Source: {u}\nContent: {t}" for u, t in DOCS
)
YAML_ITEMS = "documents:\n" + "".join(f"  - id: {u}\n    text: {t}\n" for u, t in DOCS)
CSV_ROWS = "Context (CSV):\nid,text\n" + "".join(f'{u},"{t}"\n' for u, t in DOCS)
# Spring AI's ContextualQueryAugmenter with a document formatter that writes each
# document's formatted content (`Document.getFormattedContent()`: its metadata as
# `key: value` lines, a blank line, its text), the documents joined by newlines.
SPRING_FORMATTED = (
    "Context information is below.\n\n---------------------\n"
    + "\n".join(f"source: {u}\ndistance: 0.{n}\n\n{t}" for n, (u, t) in enumerate(DOCS, 1))
    + "\n---------------------\n\n"
    "Given the context information and no prior knowledge, answer the query.\n\n"
    f"Query: {QUESTION}\n\nAnswer:\n"
)


@pytest.mark.parametrize(
    "system",
    [NAMED_BLOCKS, YAML_ITEMS, CSV_ROWS],
    ids=["source_content_blocks", "yaml_items", "csv_rows"],
)
def test_documents_named_by_a_label_keep_the_name_and_lose_the_labels(system: str) -> None:
    """Each document's name (`Source:`, `id:`, an id column) is its `doc_uri`; the label
    lines every block repeats are no part of its text."""
    _assert(_read(system, QUESTION), QUESTION, TEXTS, URIS)


def test_spring_ais_formatted_documents_are_named_by_their_source() -> None:
    _assert(_read(None, SPRING_FORMATTED), QUESTION, TEXTS, URIS)


def test_a_services_own_template_is_read_right_from_its_first_request() -> None:
    """A template of the service's own, in Chinese, its documents in blank-line blocks
    under a label: the first two requests after a start (no template learned) give the
    documents alone, never the template's lines."""
    questions = [QUESTION_ZH, "埃菲尔铁塔有多高？"]
    for question in questions:
        user = (
            "你是本公司的客服助理，请用中文回答。\n\n已知信息：\n"
            + "\n\n".join(TEXTS_ZH)
            + f"\n\n问题：{question}\n回答："
        )
        _assert(_read(None, user), question, TEXTS_ZH, [None, None])


def test_a_joined_prompt_with_a_tools_result_gives_the_question_and_the_result() -> None:
    """A framework that joined its messages into one prompt: the question, the assistant's
    empty turn (`null`), the tool's result as a JSON string."""
    user = f"{QUESTION}\nnull\n{json.dumps(TEXTS[0])}"
    _assert(_read(None, user), QUESTION, [TEXTS[0]], [None])


def test_question_marks_and_colons_of_any_script() -> None:
    for asking in ("Why?", "为什么？", "لماذا؟", "Γιατί\u037e", "«Почему?»"):
        assert asks(asking), asking
    assert not asks("¿Por qué") and not asks("Why.")
    for line, label in (
        ("来源：kb/a.md", "来源:"),
        ("المصدر: a", "المصدر:"),
        ("Quelle: a", "quelle:"),
    ):
        assert shape_of(line).shape == label
    assert shape_of("文档12：内容").shape == shape_of("文档3：其他").shape == "文档9:"
    assert shape_of("【1】文本").shape == shape_of("【22】文本").shape
    assert shape_of("at 10:30 we met").shape == "text"
    assert shape_of("https://a.b/c").shape == "text"


def test_a_question_that_does_not_ask_is_the_part_that_varies_once_the_template_is_known() -> None:
    """A bare request without a question mark after the documents, no label: the first
    two prompts of the service cannot tell it (the query stays the whole message, and no
    document is guessed); from the third on, the template the route learned (what opens
    and closes every prompt) sets it apart, in any language."""
    asks_nothing = ["Расскажи об Эйфелевой башне", "Опиши башню", "Назови год постройки"]
    facts = [*TEXTS, "The tower was the tallest structure in the world until 1930."]
    read = []
    for n, request in enumerate([*asks_nothing, *asks_nothing]):
        docs = [facts[n % 3], facts[(n + 1) % 3]]
        user = (
            "Контекст:\n"
            + "\n".join(f"[{k}] {t}" for k, t in enumerate(docs, 1))
            + f"\n\n{request}\n\nОтвечай кратко, по-русски."
        )
        record = _read(None, user)
        right = record.query == request and [d.content for d in record.retrieved_context] == docs
        read.append(right)
        if not right:
            assert record.query == user and record.retrieved_context == ()  # nothing guessed
    assert read == [False, False, True, True, True, True]


def _steps(text: str) -> int:
    """Python lines run to split `text` as a whole user message: a count of work that does
    not depend on the machine's speed."""
    import sys
    from types import FrameType
    from typing import Any

    from monitor.extraction._prompt_documents import documents_from_prompt, question_in
    from monitor.extraction._prompt_templates import PromptTemplates

    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        asked = question_in(text)
        documents_from_prompt([("user", text)], asked, templates=PromptTemplates())
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize(
    "line",
    [
        "<tag{n}>never closed {n}",  # a tag per line, none closed
        "Label {n}x: value {n}",  # a label per line, none repeated
        "Source{n}: a\nSource{n}: a",  # each label twice, the same line
        "[{n}] text {n}",
        "- item {n}, with, commas",
        "word " * 30 + "{n}",
    ],
    ids=["unclosed_tags", "distinct_labels", "repeated_pairs", "brackets", "items", "long_lines"],
)
def test_splitting_is_linear_in_the_prompt(line: str) -> None:
    """Twice the prompt costs at most about twice the work, whatever its lines repeat."""
    small = _steps("\n".join(line.format(n=n) for n in range(300)))
    large = _steps("\n".join(line.format(n=n) for n in range(600)))
    assert large < 2.3 * small


def test_a_numbered_list_of_rules_is_the_templates() -> None:
    from monitor.extraction._prompt_documents import documents_from_prompt
    from monitor.extraction._prompt_templates import PromptTemplates

    system = "Rules:\n1. Answer only from the context.\n2. Be brief.\n\nContext:\n" + "\n".join(
        f"{n}. {t}" for n, t in enumerate(TEXTS, 1)
    )
    docs = documents_from_prompt([("system", system)], QUESTION, templates=PromptTemplates())
    assert [d.content for d in docs] == TEXTS


def test_a_line_past_the_csv_modules_field_limit_is_no_table_and_no_error() -> None:
    from monitor.extraction._prompt_documents import documents_from_prompt
    from monitor.extraction._prompt_templates import PromptTemplates

    long = "word " * 40_000  # 200,000 characters, past csv's 131,072
    system = f"id,text\nkb/a.md,{long}\nkb/b.md,{TEXTS[1]}"
    docs = documents_from_prompt([("system", system)], QUESTION, templates=PromptTemplates())
    assert len(docs) == 1 and long.strip() in (docs[0].content or "")


def test_steps_and_a_parenthesis_are_no_documents() -> None:
    """Numbered steps that instruct are the template's; a line of prose that opens with a
    parenthesis is no mark of a document."""
    from monitor.extraction._prompt_documents import documents_from_prompt
    from monitor.extraction._prompt_templates import PromptTemplates

    steps = "Step 1: Read the context below.\nStep 2: Answer only from the context.\n\n"
    docs = documents_from_prompt(
        [("system", steps + "\n\n".join(f"[{n}] {t}" for n, t in enumerate(TEXTS, 1)))],
        QUESTION,
        templates=PromptTemplates(),
    )
    assert [d.content for d in docs] == TEXTS
    prose = f"{TEXTS[0]}\n\n(As measured in 2022) {TEXTS[1]}"
    docs = documents_from_prompt([("system", prose)], QUESTION, templates=PromptTemplates())
    assert [d.content for d in docs] == [TEXTS[0], f"(As measured in 2022) {TEXTS[1]}"]


def test_numbered_steps_every_prompt_repeats_are_learned_as_the_template() -> None:
    """Steps in words no cue gives away, the same in every prompt: once the route has
    shown them, they are the template's, and a document that closed the last prompts
    stays a document."""
    from monitor.extraction._prompt_documents import documents_from_prompt
    from monitor.extraction._prompt_templates import PromptTemplates

    templates = PromptTemplates()
    steps = "第1步：阅读资料。\n第2步：写出结论。\n\n资料：\n"
    found = []
    for n, docs in enumerate([TEXTS, TEXTS[::-1], [TEXTS[0], "Another document here."]]):
        system = steps + "\n".join(f"[{k}] {t}" for k, t in enumerate(docs, 1))
        split = documents_from_prompt(
            [("system", system), ("user", f"问题{n}？")],
            f"问题{n}？",
            key=("s", "/"),
            templates=templates,
        )
        found.append([d.content for d in split])
    assert found[2] == [TEXTS[0], "Another document here."]


def test_a_chat_message_with_a_label_keeps_its_whole_text_as_the_question() -> None:
    """No documents around it: a label in a user's own message sets no question apart."""
    from monitor.extraction._prompt_documents import question_in

    assert question_in("Summary: the meeting went well\nPlease make it shorter") is None
    assert question_in("摘要：会议很顺利\n请写得更短一些") is None
    chatchat = CHATCHAT.replace(QUESTION_ZH, "介绍一下埃菲尔铁塔")
    assert question_in(chatchat) == "介绍一下埃菲尔铁塔"


def test_a_table_inside_a_documents_prose_is_the_documents() -> None:
    from monitor.extraction._prompt_documents import documents_from_prompt
    from monitor.extraction._prompt_templates import PromptTemplates

    doc = (
        "Opening hours by day are below.\nday,hours\nMonday,9-17\nTuesday,9-17\nClosed on holidays."
    )
    docs = documents_from_prompt(
        [("system", f"{doc}\n\n{TEXTS[0]}")], QUESTION, templates=PromptTemplates()
    )
    assert [d.content for d in docs] == [doc, TEXTS[0]]


def test_a_question_closed_by_many_brackets_costs_one_pass() -> None:
    """`asks` walks back past closing marks once, not once a mark."""
    small = _steps("What?" + ")" * 2000)
    large = _steps("What?" + ")" * 4000)
    assert large < 2.3 * small
