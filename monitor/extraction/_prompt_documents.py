"""Documents taken from a model call's prompt, when no span carries their text (an untraced
retriever, or a retrieval span with ids and scores only): the system messages and the last
user message, without the question and without the instruction template, split at the
prompt's own boundaries.

- **Layouts that place the documents** (`_prompt_layouts.py`): a JSON user message's
  arrays, a JVM framework's default RAG prompt, Markdown sections named by their headings.
- **Structure** (`_prompt_shapes.py`), in any language and script: the prompt's sections
  (a label alone on its line, a tag it opens once), and in them the blocks a mark repeated
  with varying content opens (numbers, brackets, tags, label blocks, YAML items, list
  items, separator lines, table rows), each named by a field of single words or its mark;
  text outside them is the template's. Where no mark repeats, the section with most
  blank-line blocks holds the documents, a block one document a line when its lines are
  as many as the retrieval's ids or each ends a sentence. A label alone on its line ends a
  block and is never a document; those a prompt ends on (`Answer:`, `回答：`) head the
  answer.
- **The template** is the text a service's prompts share: the lines that open or close
  every distinct prompt of the sender on the same service and route
  (`_prompt_templates.py`). A document retrieved for several questions moves between
  them; a template's line does not. Where the structure says nothing (blank-line blocks),
  a block that reads as an instruction in English wording (`INSTRUCTION`) is the
  template's too, learned or not; a block a repeated mark opens is a document even where
  the learned template holds its lines (a popular document that closed the last prompts),
  unless it holds every block of the section (steps every prompt repeats).
- Documents with the retrieval's ids: a mark that is an id names its block; otherwise, when
  there are as many blocks as ids, they are paired in order.
- **The question** of a whole user message: what its structure sets apart and asks
  (`question_in`), else, once the route's template is learned, the paragraph after the
  documents that no prompt of the route shares (`varying_question`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from monitor.extraction._prompt_layouts import (
    framework_documents,
    framework_question,
    has_headings,
    heading_documents,
    json_documents,
    json_question,
)
from monitor.extraction._prompt_shapes import (
    Block,
    asked_in,
    ends_sentence,
    is_heading,
    sections,
    shape_of,
    structured_blocks,
)
from monitor.extraction._prompt_templates import TEMPLATES, PromptTemplates
from monitor.extraction._span_values import Doc, loads, normalized

_MAX_LINES = 512  # lines of one prompt remembered
_GROUPS = 4  # groups of a section read after the template's rules or steps, at most

# Wording that addresses the model or tells it how to answer and what from: an instruction.
# Read only where a prompt's structure says nothing (unmarked blocks, a route whose template
# is not learned yet); the structure and the learned template come first.
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


def question_in(message: str) -> str | None:
    """The question inside a whole user message that holds more: its JSON question field,
    a JVM framework's default RAG prompt's question, or what its structure sets apart and
    asks (`_prompt_shapes.asked_in`); None when it says none."""
    return json_question(message) or framework_question(message) or asked_in(message)


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
        own = _without_answer_cue(_without_question(text, question, asked))
        every += own
        if has_headings(own):
            sectioned.append(own)
        else:
            lines += [*own, ""]  # a message ends a block
    if user is not None and normalized(user) == asked and "\n" in user.strip():
        # A whole prompt taken as the question (none found in it yet): its lines still
        # teach the route's template, from which the question is then found.
        every += user.splitlines()
    seen = tuple(_line_key(line) for line in every[:_MAX_LINES] if line.strip())
    template = templates.shared(key, seen, sender, asked)
    candidates = _by_structure(lines, ids, template)
    for section_lines in sectioned:
        for doc in heading_documents(section_lines, _instruction, _blank_line_documents):
            lines_of = (doc.content or "").splitlines()
            candidates.append(Block(lines_of, doc.doc_uri, structured=doc.doc_uri is not None))
    docs: list[Doc] = []
    for block in candidates:
        if not _kept(block, template):
            continue
        content = block.content if block.content is not None else _joined(block.lines)
        docs.append(Doc(content, block.label))
    return _named(_distinct(docs), ids)


def _joined(lines: list[str]) -> str:
    return "\n".join(line for line in lines if line.strip()).strip()


def varying_question(
    message: str,
    key: tuple[str, str],
    templates: PromptTemplates = TEMPLATES,
    sender: str = "",
) -> str | None:
    """The question of a whole user message as the part that varies between the prompts
    of its template: its last paragraph that no prompt of the route shares, after the
    documents, its label left out; None while the route's template is not learned or the
    message holds nothing else."""
    template = templates.known(key, sender)
    if not template:
        return None
    runs: list[list[str]] = [[]]
    for line in message.splitlines():
        if not line.strip() or _line_key(line) in template:
            runs.append([])
        else:
            runs[-1].append(line)
    runs = [run for run in runs if run]
    if len(runs) < 2 or not any(_line_key(line) in template for line in message.splitlines()):
        return None
    last = [shape_of(line) for line in runs[-1]]
    if structured_blocks(last) is not None:
        return None  # the documents end the prompt
    asked = [line.rest if line.key is not None else line.raw for line in last]
    return "\n".join(a for a in asked if a.strip()).strip() or None


def _kept(block: Block, template: frozenset[int] | None) -> bool:
    """Whether a block is a document: not every line of it the template's, some text, and
    unless a mark names it, no instruction."""
    body = [line for line in block.lines if line.strip()]
    learned = template is not None and body and all(_line_key(ln) in template for ln in body)
    if learned and not block.structured:
        # A block every prompt has: the template's. A block a repeated mark opens is a
        # document even where the same one closed the last prompts (a popular document).
        return False
    content = block.content if block.content is not None else _joined(block.lines)
    if not content.strip():
        return False
    return block.label is not None or not _instruction(content)


def _by_structure(
    lines: list[str], ids: Sequence[str], template: frozenset[int] | None
) -> list[Block]:
    """The documents' blocks: those of the sections whose blocks a repeated mark opens
    (named ones before bare list items, a list of rules the template's), else the
    blank-line blocks of the section that holds most of them."""
    shaped = [shape_of(line, tuple(ids)) for line in lines]
    named: list[Block] = []
    listed: list[list[Block]] = []
    plain: list[list[Block]] = []
    for section in sections(shaped):
        pending = section.lines
        for _ in range(_GROUPS):
            found = structured_blocks(pending)
            if found is None:
                raw = [line.raw for line in pending]
                blocks = [b for block in _unmarked(raw, template) for b in _one_a_line(block, ids)]
                kept = [b for b in blocks if _kept(b, template)]
                if kept:
                    plain.append(kept)
            elif _learned(found, template) or _rules(found):
                # Every block in every prompt, or a list with an instruction among its
                # items: the template's rules or steps; documents may follow them.
                if 0 < found[-1].end < len(pending):
                    pending = pending[found[-1].end :]
                    continue
            elif all(b.bullet for b in found):
                listed.append(found)
            else:
                named += found
            break
    if named:
        return named
    for choice in (listed, plain):
        if choice:
            return max(choice, key=lambda bs: (len(bs), sum(len(_text(b)) for b in bs)))
    return []


def _learned(blocks: list[Block], template: frozenset[int] | None) -> bool:
    """Whether every line of every block is the learned template's: a popular document
    may close the last prompts, not all of a section's documents."""
    if template is None:
        return False
    return all(_line_key(line) in template for b in blocks for line in b.lines if line.strip())


def _rules(blocks: list[Block]) -> bool:
    """Blocks no name tells apart (list items, numbers) of which one reads as an
    instruction: the template's rules or steps."""
    positional = all(b.label is None or b.label.isdecimal() for b in blocks)
    return positional and any(_instruction(_text(b)) for b in blocks)


def _text(block: Block) -> str:
    return block.content if block.content is not None else _joined(block.lines)


def _instruction(text: str) -> bool:
    return INSTRUCTION.search(text) is not None


def _blank_line_documents(lines: list[str]) -> list[Doc]:
    """A context section's unnamed documents: its blank-line blocks, one a line or an item
    where they are so laid out."""
    return [
        Doc(_text(block)) for whole in _unmarked(lines, None) for block in _one_a_line(whole, ())
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
    lines = [_json_literal(line) for line in text.splitlines()]
    if asked:
        lines = ["" if asked in normalized(line) else line for line in lines]
    return lines


def _without_answer_cue(lines: list[str]) -> list[str]:
    """A message's lines without the labels it ends on (`Answer:`, `回答：`): they head what
    the model is to write, nothing of a document."""
    end = len(lines)
    while end and (not lines[end - 1].strip() or is_heading(lines[end - 1].strip())):
        end -= 1
    return lines[:end]


def _json_literal(line: str) -> str:
    """A line that is a JSON string is its text (a tool's result a framework joined into
    the prompt as JSON); `null` is nothing."""
    stripped = line.strip()
    if stripped == "null":
        return ""
    if len(stripped) > 1 and stripped[0] == stripped[-1] == '"':
        decoded = loads(stripped)
        if isinstance(decoded, str):
            return decoded
    return line


def _one_a_line(block: Block, ids: Sequence[str]) -> list[Block]:
    """A block, one document an item when it is a list, one a line when its lines are as
    many as the retrieval's ids or each ends a sentence (documents joined by single
    newlines); else whole."""
    lines = [line for line in block.lines if line.strip()]
    items = structured_blocks([shape_of(line) for line in lines]) if len(lines) > 1 else None
    if items is not None and all(b.bullet for b in items) and items[0].lines[0] == lines[0]:
        if any(_instruction(b.content or "") for b in items):
            return [block]  # a list of rules: the template's, whole
        return items
    if len(lines) > 1 and (len(lines) == len(ids) or all(ends_sentence(line) for line in lines)):
        return [Block([line]) for line in lines]
    return [block]


def _line_key(line: str) -> int:
    """A line as the template memory keeps it: the hash of its normalised text (a few bytes
    whatever the line's length; this process's hashes only)."""
    return hash(normalized(line))


def _unmarked(lines: list[str], template: frozenset[int] | None) -> list[Block]:
    """Blank-line blocks, with the template's lines and headings as boundaries too."""
    blocks: list[Block] = []
    current: list[str] = []
    for line in [*lines, ""]:
        text = line.strip()
        boundary = (
            not text or is_heading(text) or (template is not None and _line_key(line) in template)
        )
        if boundary:
            if current:
                blocks.append(Block(current))
            current = []
        else:
            current.append(line)
    return blocks
