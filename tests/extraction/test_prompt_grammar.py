"""Prompts generated from a grammar, their question and documents known by construction:
layouts (numbered, named-label blocks, tags, headings, YAML items, CSV/TSV rows, separator
lines, a JSON message) × languages (English, Chinese, Russian, Arabic, German) × label
styles (ASCII or full-width colon, square or lenticular brackets) × where the question
sits (before or after the documents, labelled, tagged, bare, a message of its own). Each
service sends three requests of one template after a start, read as the extraction reads
a record whose query is the whole user message (`question_in`, then
`documents_from_prompt`). The seed changes each run and is printed; set
`PROMPT_GRAMMAR_SEED` to replay one."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass

from monitor.extraction._prompt_documents import documents_from_prompt, question_in
from monitor.extraction._prompt_templates import PromptTemplates
from monitor.extraction._span_values import normalized

SERVICES = 20  # per language and layout, three requests each
MIN_RIGHT = 0.98


@dataclass(frozen=True)
class Language:
    words: dict[str, str]  # the labels a template of this language writes
    instruction: str
    facts: tuple[str, ...]  # one opens like a label (`Honey never spoils: ...`)
    questions: tuple[str, ...]
    request: str  # a question that does not ask: found where a label or tag sets it apart
    spaced: bool = True  # a space between a word and a number (`Document 1`, `文档1`)


LANGUAGES = {
    "en": Language(
        {
            "context": "Context",
            "question": "Question",
            "answer": "Answer",
            "source": "Source",
            "content": "Content",
            "doc": "Document",
            "rules": "Instructions",
        },
        "You are a helpful assistant. Answer only from the documents, briefly.",
        (
            "The Eiffel Tower was completed in 1889 for the World's Fair.",
            "Honey never spoils because of its low moisture and high acidity.",
            "Mount Everest is 8849 metres tall, the highest mountain above sea level.",
            "Python was first released in 1991 by Guido van Rossum.",
            "The Moon orbits the Earth roughly once every 27 days.",
            "Light from the Sun takes about eight minutes to reach the Earth.",
            "The Great Wall of China is thousands of kilometres long.",
            "Honey never spoils: its low moisture and high acidity stop microbes.",
        ),
        (
            "When was the Eiffel Tower completed?",
            "Why does honey never spoil?",
            "How tall is Mount Everest?",
            "Who created Python?",
        ),
        "Tell me about the Eiffel Tower",
    ),
    "zh": Language(
        {
            "context": "已知信息",
            "question": "问题",
            "answer": "回答",
            "source": "来源",
            "content": "内容",
            "doc": "文档",
            "rules": "指令",
        },
        "请根据已知信息简洁、专业地回答问题，不要编造内容。",
        (
            "埃菲尔铁塔于1889年建成，是世界博览会的入口。",
            "蜂蜜因为含水量低、酸度高，所以不会变质。",
            "珠穆朗玛峰海拔8849米，是世界最高峰。",
            "Python由吉多·范罗苏姆于1991年首次发布。",
            "月球大约每27天绕地球运行一周。",
            "太阳光到达地球大约需要八分钟。",
            "长城全长数千公里，横跨中国北方。",
            "蜂蜜的特点：含水量低，酸度高，不会变质。",
        ),
        (
            "埃菲尔铁塔是哪一年建成的？",
            "蜂蜜为什么不会变质？",
            "珠穆朗玛峰有多高？",
            "Python是谁创造的？",
        ),
        "介绍一下埃菲尔铁塔",
        spaced=False,
    ),
    "ru": Language(
        {
            "context": "Контекст",
            "question": "Вопрос",
            "answer": "Ответ",
            "source": "Источник",
            "content": "Содержание",
            "doc": "Документ",
            "rules": "Инструкции",
        },
        "Ты полезный помощник. Отвечай только по документам ниже, кратко.",
        (
            "Эйфелева башня была построена в 1889 году к Всемирной выставке.",
            "Мёд не портится из-за низкой влажности и высокой кислотности.",
            "Высота Эвереста составляет 8849 метров над уровнем моря.",
            "Язык Python впервые выпущен в 1991 году Гвидо ван Россумом.",
            "Луна обращается вокруг Земли примерно за 27 дней.",
            "Свет Солнца доходит до Земли примерно за восемь минут.",
            "Великая Китайская стена тянется на тысячи километров.",
            "Мёд не портится: в нём мало воды и много кислоты.",
        ),
        (
            "Когда была построена Эйфелева башня?",
            "Почему мёд не портится?",
            "Какова высота Эвереста?",
            "Кто создал Python?",
        ),
        "Расскажи об Эйфелевой башне",
    ),
    "ar": Language(
        {
            "context": "السياق",
            "question": "السؤال",
            "answer": "الإجابة",
            "source": "المصدر",
            "content": "المحتوى",
            "doc": "مستند",
            "rules": "التعليمات",
        },
        "أنت مساعد مفيد. أجب فقط من المستندات أدناه وباختصار.",
        (
            "اكتمل بناء برج إيفل عام 1889 للمعرض العالمي.",
            "لا يفسد العسل بسبب رطوبته المنخفضة وحموضته العالية.",
            "يبلغ ارتفاع جبل إيفرست 8849 مترا فوق سطح البحر.",
            "صدرت لغة بايثون لأول مرة عام 1991.",
            "يدور القمر حول الأرض مرة كل 27 يوما تقريبا.",
            "يصل ضوء الشمس إلى الأرض في نحو ثماني دقائق.",
            "يمتد سور الصين العظيم آلاف الكيلومترات.",
            "العسل لا يفسد: فيه ماء قليل وحموضة عالية.",
        ),
        (
            "متى اكتمل بناء برج إيفل؟",
            "لماذا لا يفسد العسل؟",
            "كم يبلغ ارتفاع جبل إيفرست؟",
            "من أنشأ لغة بايثون؟",
        ),
        "حدثني عن برج إيفل",
    ),
    "de": Language(
        {
            "context": "Kontext",
            "question": "Frage",
            "answer": "Antwort",
            "source": "Quelle",
            "content": "Inhalt",
            "doc": "Dokument",
            "rules": "Anweisungen",
        },
        "Du bist ein hilfreicher Assistent. Antworte nur anhand der Dokumente, kurz.",
        (
            "Der Eiffelturm wurde 1889 zur Weltausstellung fertiggestellt.",
            "Honig verdirbt nicht, weil er wenig Wasser und viel Säure enthält.",
            "Der Mount Everest ist 8849 Meter hoch, der höchste Berg der Erde.",
            "Python wurde 1991 von Guido van Rossum veröffentlicht.",
            "Der Mond umkreist die Erde etwa alle 27 Tage.",
            "Das Licht der Sonne braucht etwa acht Minuten bis zur Erde.",
            "Die Chinesische Mauer ist Tausende Kilometer lang.",
            "Honig verdirbt nicht: wenig Wasser, viel Säure.",
        ),
        (
            "Wann wurde der Eiffelturm fertiggestellt?",
            "Warum verdirbt Honig nicht?",
            "Wie hoch ist der Mount Everest?",
            "Wer hat Python entwickelt?",
        ),
        "Erzähl mir vom Eiffelturm",
    ),
}
LAYOUTS = ("numbered", "named", "tags", "headings", "yaml", "csv", "separators", "json")
PLACES = ("before", "after", "tagged", "bare", "bare_before", "message")


@dataclass(frozen=True)
class Style:
    """One service's template: fixed across its requests."""

    colon: str
    brackets: tuple[str, str]
    place: str
    numbering: str
    bracket_labels: bool  # `【Source】 a` rather than `Source: a`
    blank_between: bool
    answer_label: bool


@dataclass(frozen=True)
class Prompt:
    messages: list[tuple[str, str]]
    question: str
    texts: list[str]
    uris: list[str | None]


def _style(rng: random.Random, layout: str) -> Style:
    places = ("before", "message") if layout == "headings" else PLACES
    return Style(
        colon=rng.choice((":", "：")),
        brackets=rng.choice((("[", "]"), ("【", "】"))),
        place="message" if layout == "json" else rng.choice(places),
        numbering=rng.choice(("bracket", "dot", "word", "ideographic")),
        bracket_labels=rng.random() < 0.3,
        blank_between=rng.random() < 0.5,
        answer_label=rng.random() < 0.5,
    )


def _documents(rng: random.Random, lang: Language, layout: str) -> list[tuple[str, str]]:
    # Each sentence once in a prompt: documents that share a line are not what is tested.
    facts = rng.sample(lang.facts, len(lang.facts))
    docs = []
    for _ in range(rng.randint(2, 4)):
        fact = facts.pop()
        if layout in ("named", "tags", "separators", "headings") and rng.random() < 0.3:
            fact = f"{fact}\n{facts.pop()}"  # a document of two lines
        docs.append((f"kb/{rng.randrange(10**6)}.md", fact))
    return docs


def _number(style: Style, lang: Language, n: int) -> str:
    o, e = style.brackets
    if style.numbering == "bracket":
        return f"{o}{n}{e} "
    if style.numbering == "dot":
        return f"{n}. "
    if style.numbering == "word":
        return f"{lang.words['doc']}{' ' if lang.spaced else ''}{n}{style.colon} "
    return chr(0xFF10 + n) + "、"  # a full-width digit, an ideographic comma


def _render(layout: str, lang: Language, style: Style, docs: list[tuple[str, str]]) -> str:
    w, c = lang.words, style.colon
    gap = "\n\n" if style.blank_between else "\n"
    if layout == "numbered":
        return gap.join(
            _number(style, lang, n) + t.replace("\n", " ") for n, (_, t) in enumerate(docs, 1)
        )
    if layout == "named":
        if style.bracket_labels:
            o, e = style.brackets
            return gap.join(f"{o}{w['source']}{e} {u}\n{o}{w['content']}{e} {t}" for u, t in docs)
        return gap.join(f"{w['source']}{c} {u}\n{w['content']}{c} {t}" for u, t in docs)
    if layout == "tags":
        if style.numbering == "word":
            return (
                "<documents>\n"
                + "\n".join(
                    f"<document>\n<source>{u}</source>\n<content>\n{t}\n</content>\n</document>"
                    for u, t in docs
                )
                + "\n</documents>"
            )
        if style.numbering == "ideographic":  # a tag named in the prompt's language
            return "\n".join(f'<{w["doc"]} id="{u}">{t}</{w["doc"]}>' for u, t in docs)
        return "\n".join(f'<doc id="{u}">{t}</doc>' for u, t in docs)
    if layout == "headings":
        return "\n\n".join(f"## {u}\n{t}" for u, t in docs)
    if layout == "yaml":
        return f"{w['context']}{c}\n" + "".join(
            f"  - {w['source']}: {u}\n    {w['content']}: {t}\n" for u, t in docs
        )
    if layout == "csv":
        out = io.StringIO()
        tab = style.numbering == "dot"  # a TSV table
        writer = csv.writer(out, delimiter="\t" if tab else ",", lineterminator="\n")
        writer.writerow([w["source"], w["content"]])
        writer.writerows([u, t] for u, t in docs)
        return f"{w['context']}{c}\n" + out.getvalue()
    if layout == "separators":
        line = "-" * 8 if style.numbering != "dot" else "=" * 20
        return line + "\n" + f"\n{line}\n".join(t for _, t in docs) + f"\n{line}"
    raise AssertionError(layout)


def _expected_uris(layout: str, docs: list[tuple[str, str]]) -> list[str | None]:
    named = layout in ("named", "tags", "headings", "yaml", "csv", "json")
    return [u if named else None for u, _ in docs]


def _prompt(rng: random.Random, lang: Language, layout: str, style: Style) -> Prompt:
    docs = _documents(rng, lang, layout)
    question = rng.choice(lang.questions)
    if style.place in ("before", "after", "tagged", "message") and layout != "json":
        # A request that does not ask, set apart by its label or tag or a message of its
        # own (in a JSON message nothing but its key's name would tell it).
        question = rng.choice((*lang.questions, lang.request))
    texts = [t for _, t in docs]
    uris = _expected_uris(layout, docs)
    w, c = lang.words, style.colon
    if layout == "json":
        body = {
            w["rules"]: lang.instruction,
            w["question"]: question,
            w["context"]: [{w["source"]: u, w["content"]: t} for u, t in docs],
        }
        return Prompt([("user", json.dumps(body, ensure_ascii=False))], question, texts, uris)
    rendered = _render(layout, lang, style, docs)
    if layout == "numbered":
        texts = [t.replace("\n", " ") for t in texts]
    header = "" if layout in ("yaml", "csv", "headings") else f"{w['context']}{c}\n"
    context = header + rendered
    if style.bracket_labels:
        labelled = f"{style.brackets[0]}{w['question']}{style.brackets[1]} {question}"
        header = header and f"{style.brackets[0]}{w['context']}{style.brackets[1]}\n"
        context = header + rendered
    else:
        labelled = f"{w['question']}{c} {question}"
    parts = {
        "before": [lang.instruction, labelled, context],
        "after": [lang.instruction, context, labelled],
        "tagged": [
            f"<{w['rules']}>{lang.instruction}</{w['rules']}>",
            context,
            f"<{w['question']}>{question}</{w['question']}>",
        ],
        "bare": [lang.instruction, context, question],
        "bare_before": [lang.instruction, question, context],
        "message": [lang.instruction, context],
    }[style.place]
    if style.answer_label and style.place != "message":
        parts.append(f"{w['answer']}{c}")
    text = "\n\n".join(parts)
    if style.place == "message":
        return Prompt([("system", text), ("user", question)], question, texts, uris)
    return Prompt([("user", text)], question, texts, uris)


def _read(prompt: Prompt, templates: PromptTemplates, key: tuple[str, str]) -> bool:
    """Whether the prompt reads right, as `_record_parts.context_of` reads it."""
    user = prompt.messages[-1][1]
    asked = question_in(user) or user
    if normalized(asked) != normalized(prompt.question):
        return False
    docs = documents_from_prompt(prompt.messages, asked, key=key, templates=templates)
    got = [(normalized(d.content), d.doc_uri) for d in docs]
    return got == [(normalized(t), u) for t, u in zip(prompt.texts, prompt.uris, strict=True)]


def _seed() -> int:
    given = os.environ.get("PROMPT_GRAMMAR_SEED")
    return int(given) if given else time.time_ns() % 2**32


def _run(
    seed: int,
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]], dict[tuple[str, str], Prompt]]:
    """Each language and layout's services on `seed`: prompts read right, prompts, and the
    first misread prompt of each."""
    rng = random.Random(seed)
    right: Counter[tuple[str, str]] = Counter()
    total: Counter[tuple[str, str]] = Counter()
    wrong: dict[tuple[str, str], Prompt] = {}
    templates = PromptTemplates()
    for code, lang in LANGUAGES.items():
        for layout in LAYOUTS:
            for service in range(SERVICES):
                style = _style(rng, layout)
                key = (f"{code}-{layout}-{service}", "/ask")
                for _ in range(3):  # the service's first requests after a start
                    prompt = _prompt(rng, lang, layout, style)
                    ok = _read(prompt, templates, key)
                    right[(code, layout)] += ok
                    total[(code, layout)] += 1
                    if not ok:
                        wrong.setdefault((code, layout), prompt)
    return right, total, wrong


def test_generated_prompts_are_read_right_in_every_language_and_layout() -> None:
    seed = _seed()
    print(f"PROMPT_GRAMMAR_SEED={seed}")
    right, total, wrong = _run(seed)
    rates = {k: right[k] / total[k] for k in total}
    for k in sorted(rates):
        print(f"{k[0]} {k[1]:11} {right[k]}/{total[k]}")
    failing = {k: v for k, v in rates.items() if v < MIN_RIGHT}
    assert not failing, f"seed {seed}: {failing}; first misread: " + "; ".join(
        f"{k}: {wrong[k]!r}" for k in sorted(failing)
    )


def test_the_grammar_knows_its_answers() -> None:
    """The generator's own answers are right: a document it writes holds no label, and a
    named layout's documents each carry their name."""
    rng = random.Random(7)
    for code, lang in LANGUAGES.items():
        for layout in LAYOUTS:
            prompt = _prompt(rng, lang, layout, _style(rng, layout))
            whole = "\n".join(text for _, text in prompt.messages)
            assert prompt.question in whole, (code, layout)
            for text, uri in zip(prompt.texts, prompt.uris, strict=True):
                assert lang.words["source"] not in text and lang.words["content"] not in text
                assert uri is None or uri in whole


if __name__ == "__main__":
    # `python -m tests.extraction.test_prompt_grammar N`: each language and layout's share
    # read right over seeds 0 to N-1.
    import sys

    right_all: Counter[tuple[str, str]] = Counter()
    total_all: Counter[tuple[str, str]] = Counter()
    for seed in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
        right, total, _ = _run(seed)
        right_all.update(right)
        total_all.update(total)
    for layout in LAYOUTS:
        cells = [f"{right_all[(c, layout)] / total_all[(c, layout)]:7.2%}" for c in LANGUAGES]
        print(f"{layout:11}", *cells)
    print(f"{'':11}", *(f"{c:>7}" for c in LANGUAGES))
