"""Documents taken from a model call's prompt, when no span carries their text (an untraced
retriever, or a retrieval span with ids and scores only): the system messages and the last
user message, without the question and without the instruction template, split at the
prompt's own boundaries.

- **The template** is the text a service's prompts share: the lines that open or close
  every distinct prompt of the sender on the same service and route
  (`_prompt_templates.py`). A document retrieved for several questions moves between
  them; a template's line does not. A block that reads as an instruction (addresses the
  model, tells it how to answer or what to use) is the template's too, learned or not (a
  template's other version, a route not yet learned).
- **Layouts that place the documents** (`_prompt_layouts.py`): a JSON user message's
  arrays, a JVM framework's default RAG prompt, Markdown sections named by their headings.
- **Boundaries**: marked blocks first (`[1] ...`, `[kb/a.md] ...`, `Document 1: ...`,
  `<doc id="a">...</doc>`, a line opening with an id the retrieval span names); text outside
  them is the template's. A prompt with no marks is split at blank lines, a block one
  document a line when its lines are as many as the retrieval's ids or each ends a
  sentence, one an item in a list. A short heading line (`Context:`, `Question:`) ends a block and is never a
  document.
- Documents with the retrieval's ids: a mark that is an id names its block; otherwise, when
  there are as many blocks as ids, they are paired in order.

Instruction text never enters the context: what is left out is the template (learned, or
read by its wording), headings and the question.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.extraction._prompt_layouts import (
    framework_documents,
    framework_question,
    has_headings,
    heading_documents,
    json_documents,
    json_question,
    list_items,
)
from monitor.extraction._prompt_templates import TEMPLATES, PromptTemplates
from monitor.extraction._span_values import Doc, normalized

_MAX_LINES = 512  # lines of one prompt remembered

_BRACKET = re.compile(r"\[([^\]\n]{1,64})\][:.)\-]?\s*")
_NAMED = re.compile(
    r"(?:document|doc|source|passage|chunk|excerpt|snippet|result|context)\s*+#?\s*+(\d{1,4})"
    r"\s*[:.)\-]\s*",
    re.IGNORECASE,
)
_OPEN_TAG = re.compile(r"<([A-Za-z_][\w.-]*)((?:\s++[^<>]*)?)>\s*")
# Searched: the look-behind starts it at a run of whitespace's start only (linear).
_CLOSE_TAG = re.compile(r"(?<!\s)\s*</([A-Za-z_][\w.-]*)>\s*$")
_TAG_ID = re.compile(r"""\b(?:id|source|uri|name|title)\s*=\s*["']([^"']{1,128})["']""")
_NAME_TAGS = frozenset({"source", "title", "id", "doc_id", "uri", "url", "name"})
_SENTENCE_ENDS = frozenset(".!?\"')")
_HEADING = re.compile(r"[^\n.!?]{0,40}:\s*$")
# Wording that addresses the model or tells it how to answer and what from: an instruction.
INSTRUCTION = re.compile(
    r"\byou(?:'re| are)\b[^\n.]{0,40}\b(?:assistant|expert|bot|model|ai|agent|helper)\b"
    r"|\byour (?:task|job|role|goal)\b"
    r"|\b(?:answer|respond|reply)\b[^\n]{0,60}\b(?:question|user|only|using|based|concise|"
    r"brief|sentence)"
    r"|\b(?:answer|respond|reply)\b[^\n]{0,20}\b(?:from|with|using) (?:the|these|this)\b"
    r"|\b(?:use|using|based on|according to|only)\b[^\n]{0,30}\b(?:the|these|this|provided|"
    r"following|given|retrieved)\s+(?:context|documents?|passages?|excerpts?|snippets?|sources?)\b"
    r"|\b(?:context|documents?|passages?|excerpts?|snippets?)\s+(?:below|above|provided|given)\b"
    r"|\bif\b[^\n]{0,60}\b(?:don't|do not|doesn't|does not|cannot|can't)\b[^\n]{0,30}"
    r"\b(?:know|contain|answer|say)"
    r"|\b(?:do not|don't|never)\s+(?:make up|invent|fabricate|guess|speculate)\b",
    re.IGNORECASE,
)


# A labelled question in a prompt: `Question: ...`, `Query: ...`, `Q: ...`.
_QUESTION_LABEL = re.compile(r"\s*+(?:user )?(?:question|query|q)\s*+:\s*+(.*)", re.IGNORECASE)


def labelled_question(prompt: str) -> str | None:
    """The question a prompt labels (`Question: ...`, its text on the line or the lines
    after it up to a blank line or a heading), the last one; None when it labels none."""
    lines = prompt.splitlines()
    found = None
    for i, line in enumerate(lines):
        label = _QUESTION_LABEL.fullmatch(line)
        if label is None:
            continue
        asked = [label.group(1)] if label.group(1).strip() else []
        for rest in lines[i + 1 :]:
            if asked and (not rest.strip() or _HEADING.fullmatch(rest.strip())):
                break
            if rest.strip():
                asked.append(rest)
        text = "\n".join(asked).strip()
        found = text or found
    return found


def question_in(message: str) -> str | None:
    """The question inside a whole user message that holds more: its JSON question field,
    a JVM framework's default RAG prompt's question, or what it labels; None when it
    says none."""
    return json_question(message) or framework_question(message) or labelled_question(message)


@dataclass(slots=True)
class _Block:
    lines: list[str]
    label: str | None = None  # what marked it: a bracket label, an id, a tag's id
    tag: str | None = None  # the tag it is closed by
    content: str | None = None  # its text, where it is not its lines (a list item's)
    opened: str | None = None  # the tag that opened it


def documents_from_prompt(
    messages: Sequence[tuple[str, str]],
    question: str | None,
    ids: Sequence[str] = (),
    key: tuple[str, str] = ("", ""),
    templates: PromptTemplates = TEMPLATES,
    sender: str = "",
) -> list[Doc]:
    """The documents in a model call's prompt (`messages`: (role, text)), in prompt order,
    without the instruction template of the service and route `key` (as `sender`'s
    prompts and the route's other senders tell it) and without the `question`; `ids` are
    the ones the retrieval span names, in retrieval order."""
    texts = [text for role, text in messages if role == "system"]
    user = next((text for role, text in reversed(messages) if role == "user"), None)
    asked = normalized(question)
    if user is not None and normalized(user) != asked:
        texts.append(user)
    found = json_documents(user) if user is not None else None
    for text in reversed(texts if found is None else ()):
        found = framework_documents(text)
        if found is not None:
            break
    if found is not None:
        return _named(_distinct(found), ids)  # the layout says where each document is
    every: list[str] = []
    lines: list[str] = []  # those of the messages not laid out under Markdown headings
    sectioned: list[list[str]] = []
    for text in texts:
        own = _without_question(text, question, asked)
        every += own
        if has_headings(own):
            sectioned.append(own)
        else:
            lines += [*own, ""]  # a message ends a block
    seen = tuple(_line_key(line) for line in every[:_MAX_LINES] if line.strip())
    template = templates.shared(key, seen, sender, asked)
    blocks = _marked(lines, ids)
    if blocks is None:
        blocks = [one for block in _unmarked(lines, template) for one in _one_a_line(block, ids)]
    candidates = list(blocks)
    for section_lines in sectioned:
        for doc in heading_documents(section_lines, _instruction, _blank_line_documents):
            candidates.append(_Block((doc.content or "").splitlines(), doc.doc_uri))
    docs: list[Doc] = []
    for block in candidates:
        body = [line for line in block.lines if line.strip()]
        if template is not None and all(_line_key(line) in template for line in body):
            continue  # a marked block every prompt has: the template's
        content = block.content if block.content is not None else "\n".join(body).strip()
        if not content:
            continue
        if block.label is None and _instruction(content):
            continue  # reads as an instruction: a template not learned, or another version
        docs.append(Doc(content, block.label))
    return _named(_distinct(docs), ids)


def _instruction(text: str) -> bool:
    return INSTRUCTION.search(text) is not None


def _blank_line_documents(lines: list[str]) -> list[Doc]:
    """A context section's unnamed documents: its blank-line blocks, one a line or an item
    where they are so laid out."""
    return [
        Doc(block.content if block.content is not None else "\n".join(block.lines).strip())
        for whole in _unmarked(lines, None)
        for block in _one_a_line(whole, ())
    ]


def _distinct(docs: list[Doc]) -> list[Doc]:
    seen: set[str] = set()
    out = []
    for doc in docs:
        if doc.content and doc.content not in seen:
            seen.add(doc.content)
            out.append(doc)
    return out


def _named(docs: list[Doc], ids: Sequence[str]) -> list[Doc]:
    """Documents paired with the retrieval's `ids`: in order when as many and unnamed; a
    number names the id at that place."""
    if ids and len(docs) == len(ids) and all(d.doc_uri is None for d in docs):
        for doc, doc_id in zip(docs, ids, strict=True):
            doc.doc_uri = doc_id
    for doc in docs:
        if doc.doc_uri is not None and doc.doc_uri.isdigit():
            position = int(doc.doc_uri) - 1
            doc.doc_uri = ids[position] if 0 <= position < len(ids) else None
    return docs


def _without_question(text: str, question: str | None, asked: str) -> list[str]:
    if question and question.strip() and question in text:
        text = text.replace(question, "")
    lines = text.splitlines()
    if asked:
        lines = ["" if asked in normalized(line) else line for line in lines]
    return lines


def _mark(line: str, ids: Sequence[str]) -> tuple[str | None, str, str | None] | None:
    """(label, the rest of the line, the tag that closes the block) when `line` opens a
    marked block."""
    stripped = line.lstrip()
    bracket = _BRACKET.match(stripped)
    if bracket is not None:
        return bracket.group(1).strip(), stripped[bracket.end() :], None
    named = _NAMED.match(stripped)
    if named is not None:
        return named.group(1), stripped[named.end() :], None
    tag = _OPEN_TAG.match(stripped)
    if tag is not None:
        found = _TAG_ID.search(tag.group(2) or "")
        return (found.group(1) if found else None), stripped[tag.end() :], tag.group(1)
    for doc_id in ids:
        if doc_id and stripped.startswith(doc_id):
            rest = stripped[len(doc_id) :]
            if not rest[:1].isalnum():
                return doc_id, rest.lstrip(" :-)]\t"), None
    return None


def _marked(lines: list[str], ids: Sequence[str]) -> list[_Block] | None:
    """The prompt's marked blocks, or None when it has none. A tag that holds other marks
    wraps the documents (`<context>`) and is no document itself."""
    marks = [_mark(line, ids) for line in lines]
    if not any(marks):
        return None
    closes: dict[str, list[int]] = {}  # each tag's closing lines, in order
    marked_before = [0]  # marks before each line
    for j, line in enumerate(lines):
        closed = _CLOSE_TAG.search(line)
        if closed is not None:
            closes.setdefault(closed.group(1), []).append(j)
        marked_before.append(marked_before[-1] + (marks[j] is not None))
    wrappers: set[int] = set()
    for i, mark in enumerate(marks):
        if mark is None or mark[2] is None:
            continue
        after = closes.get(mark[2], [])
        k = bisect.bisect_left(after, i)  # a tag closed on its own line wraps nothing
        if k < len(after) and marked_before[after[k]] - marked_before[i + 1] > 0:
            wrappers.update((i, after[k]))
    blocks: list[_Block] = []
    current: _Block | None = None
    for i, line in enumerate(lines):
        mark = marks[i]
        if i in wrappers:
            current = None
            continue
        if mark is not None:
            label, rest, tag = mark
            current = _Block([rest], label, tag, opened=tag)
            blocks.append(current)
            _closes(current, rest)
            if current.tag == "":
                current = None
            continue
        if current is None:
            continue  # outside every block: the template's
        if current.tag is None and (not line.strip() or _HEADING.fullmatch(line.strip())):
            current = None
            continue
        current.lines.append(line)
        _closes(current, line)
        if current.tag == "":
            current = None
    tagged = [b for b in blocks if b.tag is not None]
    if len(tagged) == 1 and len(blocks) == 1:
        # One tag around the prompt's documents (`<context>`): its blank-line blocks.
        return _unmarked(tagged[0].lines, None)
    return _named_by_child_tags(blocks)


def _named_by_child_tags(blocks: list[_Block]) -> list[_Block]:
    """A `<source>` (`<title>`, `<id>`...) tag inside a document's tag names the block
    after it (`<document><source>a.md</source><document_content>...`) and is no document."""
    out: list[_Block] = []
    name: str | None = None
    for block in blocks:
        if block.opened is not None and block.opened.lower() in _NAME_TAGS:
            name = "\n".join(block.lines).strip() or None
            continue
        if name is not None and block.label is None:
            block.label = name
        name = None
        out.append(block)
    return out


def _one_a_line(block: _Block, ids: Sequence[str]) -> list[_Block]:
    """A block, one document a line when its lines are as many as the retrieval's ids, or
    each ends a sentence (documents joined by single newlines); else whole."""
    lines = [line for line in block.lines if line.strip()]
    items = list_items(lines)
    if items is not None:
        if any(_instruction(item) for _, item in items):
            return [block]  # a list of rules: the template's, whole
        return [_Block(raw, content=item) for raw, item in items]
    if len(lines) > 1 and (
        len(lines) == len(ids) or all(line.rstrip()[-1:] in _SENTENCE_ENDS for line in lines)
    ):
        return [_Block([line]) for line in lines]
    return [block]


def _closes(block: _Block, line: str) -> None:
    """Whether `line` closes `block`'s tag: its closing tag is cut off and `tag` set to ""."""
    if block.tag is None:
        return
    closed = _CLOSE_TAG.search(line)
    if closed is not None and closed.group(1) == block.tag:
        block.lines[-1] = line[: closed.start()]
        block.tag = ""


def _line_key(line: str) -> int:
    """A line as the template memory keeps it: the hash of its normalised text (a few bytes
    whatever the line's length; this process's hashes only)."""
    return hash(normalized(line))


def _unmarked(lines: list[str], template: frozenset[int] | None) -> list[_Block]:
    """Blank-line blocks, with the template's lines and headings as boundaries too."""
    blocks: list[_Block] = []
    current: list[str] = []
    for line in [*lines, ""]:
        text = line.strip()
        boundary = (
            not text
            or _HEADING.fullmatch(text) is not None
            or (template is not None and _line_key(line) in template)
        )
        if boundary:
            if current:
                blocks.append(_Block(current))
            current = []
        else:
            current.append(line)
    return blocks
