"""Prompt layouts that say where each document is by their structure rather than by a mark
on the document's first line: a JSON user message (`{"question": ..., "context": [...]}`),
a Markdown knowledge base (a heading per document), and list items. `_prompt_documents.py`
tries these before its marked and blank-line blocks.

- **A JSON user message**: an object whose question field is the question and whose
  arrays of texts (or of objects holding a text) are the documents, an item's name its
  `doc_uri`; the rest (`task`, instructions) is the template's. Fields are found by what
  they hold, not only by name: the question is a field named as one (`question`, `query`,
  `userAsk`, `input`...: a word of its name), else the one text that asks (ends with `?`);
  an item's text is a known text field, else its longest text with spaces, and its name a
  known name field, else a value of one word (`kb/returns.md`). Arrays are looked for one
  object deep (`{"context": {"documents": [...]}}`).
- **Markdown headings**: a message with `#` headings is read as sections. A section with
  sub-headings wraps them and is no document itself; a leaf section is one document named
  by its heading (`## kb/returns.md`: the heading is the `doc_uri`, never part of the
  text), unless its heading names a part of the template (`# Role`, `# Instructions`,
  `# Question`, ...) or its text reads as an instruction. A leaf headed as the place of the
  context (`# Context`, `# Documents`, `# Knowledge base`) holds unnamed documents: its
  blocks are split as a prompt's unmarked text is.
- **List items** (`- ...`, `* ...`, `1. ...`): a block of them is one document an item,
  the marker left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from monitor.conventions import BEFORE, PARAGRAPH, RagPrompt
from monitor.extraction._prompt_shapes import asks, ends_sentence, shape_of, structured_blocks
from monitor.extraction._span_values import Doc, content_text, loads
from monitor.extraction._table import current

# Fields of a document object that hold its text (its parts, where a list).
_TEXT_FIELDS = ("content", "text", "page_content", "body", "passage", "chunk", "snippet")
_MAX_JSON_DOCS = 256  # items read as documents, of one array and in all
_MAX_JSON_DEPTH = 2  # objects inside the message looked into for arrays
# Words of a field's name that name the question, and the conversation so far.
_QUESTION_WORDS = frozenset({"question", "query", "ask", "input", "q", "prompt", "questions"})
_HISTORY_WORDS = frozenset({"history", "messages", "conversation", "turns", "memory"})

# Headings that name a part of the template, never a document; read on the heading with
# its whitespace runs made one space and a closing colon dropped (`_heading_words`), so that
# no two quantifiers of the pattern can share a character.
_TEMPLATE_HEADING = re.compile(
    r"(?:(?:the|your|system|user|output|answer|response) )?"
    r"(?:role|persona|identity|instructions?|rules?|guidelines?|guidance|constraints?|"
    r"task|objective|goal|style|tone|format|formatting|output|policy|policies|notes?|"
    r"examples?|question|query|answer|response|conversation|history|chat history|"
    r"system|behaviou?r|steps?|requirements?)",
    re.IGNORECASE,
)
# Headings that name the place of the context: their section holds unnamed documents.
_CONTEXT_HEADING = re.compile(
    r"(?:(?:the|retrieved|relevant|reference|provided|supporting|search) )?"
    r"(?:context|contexts|documents?|docs|knowledge(?: base)?|kb|sources?|passages?|"
    r"excerpts?|snippets?|results?|information|facts|references?)",
    re.IGNORECASE,
)


def json_question(text: str) -> str | None:
    """The question field of a user message that is a JSON object, or None."""
    value = _json_object(text)
    return None if value is None else _question_in(value, 0)


def _question_in(value: dict[str, Any], depth: int) -> str | None:
    texts = [(name, v.strip()) for name, v in value.items() if isinstance(v, str) and v.strip()]
    for name, found in texts:
        if _QUESTION_WORDS & _words(name):
            return found
    asking = [found for _, found in texts if asks(found)]
    if len(asking) == 1:
        return asking[0]
    if depth >= _MAX_JSON_DEPTH:
        return None
    inner = (_question_in(v, depth + 1) for v in value.values() if isinstance(v, dict))
    return next((found for found in inner if found), None)


def _words(name: str) -> set[str]:
    """The lower-cased words of a field name (`userAsk`, `user_ask`, `user-ask`,
    `HTTPRequest`): split where letters meet other characters and where a lower-case
    letter meets an upper-case one (an upper-case run before one that is not keeps its
    last letter for the word after it)."""
    words: list[str] = []
    current = ""
    for n, c in enumerate(name):
        if not c.isalnum():
            words.append(current)
            current = ""
            continue
        before = name[n - 1] if n else ""
        after = name[n + 1] if n + 1 < len(name) else ""
        boundary = (
            (c.isupper() and before.islower())
            or (c.isupper() and before.isupper() and after.islower())
            or (c.isdecimal() != before.isdecimal() and before.isalnum())
        )
        if boundary:
            words.append(current)
            current = ""
        current += c
    words.append(current)
    return {w.lower() for w in words if w}


def json_documents(text: str) -> list[Doc] | None:
    """The documents of a user message that is a JSON object: the items of its arrays of
    texts, in order (None: not such a message)."""
    value = _json_object(text)
    if value is None:
        return None
    docs: list[Doc] = []
    _collect(value, docs, 0)
    return docs or None


def _collect(value: dict[str, Any], docs: list[Doc], depth: int) -> None:
    for name, field in value.items():
        if _words(name) & (_QUESTION_WORDS | _HISTORY_WORDS):
            continue
        if isinstance(field, dict) and depth < _MAX_JSON_DEPTH:
            _collect(field, docs, depth + 1)
        if not isinstance(field, list):
            continue
        for item in field[:_MAX_JSON_DOCS]:
            doc = _json_doc(item)
            if doc is not None and len(docs) < _MAX_JSON_DOCS:
                docs.append(doc)


def _worded(text: str) -> bool:
    """A text rather than a name: words with spaces, or a sentence's end."""
    return " " in text.strip() or ends_sentence(text)


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    value = loads(stripped)
    return value if isinstance(value, dict) else None


def _json_doc(item: Any) -> Doc | None:
    if isinstance(item, str):
        return Doc(item.strip()) if item.strip() else None
    if not isinstance(item, dict) or "role" in item:
        return None  # not a document: a message of the conversation
    field = next((f for f in _TEXT_FIELDS if f in item), None)
    if field is None:
        # No known text field: the item's longest text, when it is longer than a name (a
        # text without spaces, as Chinese is written, counts by its characters).
        texts = [(len(v.strip()), f) for f, v in item.items() if isinstance(v, str)]
        longest = max(texts) if texts else None
        field = longest[1] if longest is not None and _worded(item[longest[1]]) else None
    text = content_text(item[field]) if field is not None else None
    if not text or not text.strip():
        return None
    # Its name: a value of one word (an id, a path, a URL), else a number.
    names = [v for f, v in item.items() if f != field and isinstance(v, str | int)]
    words = [v for v in names if isinstance(v, str) and v.strip() and len(v.split()) == 1]
    numbers = [v for v in names if isinstance(v, int) and not isinstance(v, bool)]
    name = next(iter(words or numbers), None)
    return Doc(text.strip(), None if name is None else str(name))


@dataclass(slots=True)
class _Section:
    level: int
    heading: str
    lines: list[str]
    parent: bool = False  # holds sub-headings


def has_headings(lines: list[str]) -> bool:
    return any(heading for _, heading in _headings(lines))


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int  # how many `#`
    text: str  # without the `#`s, closing ones included, and the whitespace around


def _headings(lines: list[str]) -> list[tuple[str, _Heading | None]]:
    """Each line with its Markdown heading, if it is one: a `#` line inside a code fence
    (a comment in a code sample) is none."""
    fenced = False
    out: list[tuple[str, _Heading | None]] = []
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        out.append((line, None if fenced else _heading(line)))
    return out


def _heading(line: str) -> _Heading | None:
    """The line as a Markdown heading: up to three whitespace characters, one to six `#`,
    whitespace, the text; `#`s closing it are left out. Read by scanning the line once
    (a pattern's quantifiers over the whitespace around the text would backtrack)."""
    start = _indent(line)
    if start is None or not line.startswith("#", start):
        return None
    end = start
    while end < len(line) and line[end] == "#":
        end += 1
    if end - start > 6 or end == len(line) or not line[end].isspace():
        return None
    return _Heading(end - start, line[end:].strip().rstrip("#").rstrip())


def _indent(line: str) -> int | None:
    """Where a line's text starts after up to three whitespace characters (None: more)."""
    for i, char in enumerate(line[:4]):
        if not char.isspace():
            return i
    return None if len(line) >= 4 else len(line)


def _heading_words(heading: str) -> str:
    """A heading as `_TEMPLATE_HEADING` and `_CONTEXT_HEADING` read it: its words one space
    apart, a closing colon left out."""
    words = " ".join(heading.split())
    return words[:-1].rstrip() if words.endswith(":") else words


def heading_documents(
    lines: list[str],
    instruction: Callable[[str], bool],
    unnamed: Callable[[list[str]], list[Doc]],
) -> list[Doc]:
    """The documents of a message's lines laid out under Markdown headings (see the module
    docstring); `instruction` tells a block that reads as one, `unnamed` splits a context
    section's text."""
    sections: list[_Section] = []
    # The sections still open, their levels rising: the last one of a lower level than a
    # new heading is its parent (each section goes on and off it once).
    open_sections: list[_Section] = []
    for line, heading in _headings(lines):
        if heading is not None:
            while open_sections and open_sections[-1].level >= heading.level:
                open_sections.pop()
            if open_sections:
                open_sections[-1].parent = True
            section = _Section(heading.level, heading.text, [])
            sections.append(section)
            open_sections.append(section)
        elif sections:
            sections[-1].lines.append(line)
    docs: list[Doc] = []
    for section in sections:
        body = [line for line in section.lines if line.strip()]
        words = _heading_words(section.heading)
        if section.parent or not body or _TEMPLATE_HEADING.fullmatch(words):
            continue  # a wrapper, or the template's part
        if _CONTEXT_HEADING.fullmatch(words):
            docs += unnamed(section.lines)
            continue
        content = "\n".join(body).strip()
        if instruction(content):
            continue
        docs.append(Doc(content, section.heading or None))
    return docs


def _question_before(prompt: RagPrompt, before: str) -> str | None:
    """The question in the text before `prompt`'s header (`prompt.question` says where)."""
    before = before.strip()
    if prompt.question == PARAGRAPH:
        # The header earlier too: the turns were joined by single newlines into one string.
        earlier = prompt.header in before
        before = (before.splitlines() if earlier else before.split("\n\n"))[-1].strip()
    return before or None


def framework_question(text: str) -> str | None:
    """The user's question in a framework's default RAG prompt (the table's
    `rag_prompts`, those that place it: before the header, or the last paragraph before
    it); None for other text.

    A chat memory's messages joined by single newlines into one string: after an earlier
    turn (its own injection, documents and the model's reply) the question is the last
    line before the header, the earlier turns history."""
    for prompt in current().table.rag_prompts:
        at = text.rfind(prompt.header)
        if prompt.question in (BEFORE, PARAGRAPH) and at > 0:
            return _question_before(prompt, text[:at])
    return None


def _has_header(prompt: RagPrompt, text: str, stripped: list[str]) -> bool:
    return prompt.header in stripped if prompt.line else prompt.header in text


def framework_documents(text: str) -> list[Doc] | None:
    """The documents of a framework's default RAG prompt (the table's `rag_prompts`);
    None: not such a prompt."""
    lines = text.splitlines()
    stripped = [line.strip() for line in lines]
    for prompt in current().table.rag_prompts:
        if prompt.delimiter is None:
            at = text.rfind(prompt.header)
            if at < 0:
                continue
            contents = text[at + len(prompt.header) :].strip()
            return [Doc(part.strip()) for part in contents.split("\n\n") if part.strip()]
        if not _has_header(prompt, text, stripped):
            continue
        marks = [i for i, line in enumerate(stripped) if line == prompt.delimiter]
        if len(marks) < 2:
            return None
        between = lines[marks[0] + 1 : marks[1]]
        # One a line, unless a document formatter wrote each with its metadata
        # (`source: ...` lines repeated with each document).
        blocks = structured_blocks([shape_of(line) for line in between])
        if blocks is not None and not all(b.bullet for b in blocks):
            return [Doc(b.content or "", b.label) for b in blocks if b.content]
        return [Doc(line.strip()) for line in between if line.strip()]
    return None
