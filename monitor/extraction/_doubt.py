"""Signs that documents split out of a prompt (`context_source = prompt`) were split
wrongly: the record is whole and looks right, yet its context may be the template's text
or the question. Each sign is a reason (`DOUBTS`); the record carries them
(`metadata.context_doubt`, comma-separated), the trace stage counts each per service
(`records_context_doubtful_total`) and logs it once per service and reason, naming
`rag-monitor explain`. The record is still evaluated: a doubt is no proof, and an answer
that shares no word with its documents is what a fabricated answer looks like too."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from monitor.extraction._prompt_documents import INSTRUCTION
from monitor.extraction._prompt_shapes import is_heading
from monitor.extraction._span_values import normalized

DOUBTS: dict[str, str] = {
    "document_is_question": "a document is the question itself",
    "heading_or_instruction": "a document is a heading or an instruction line",
    "document_is_system_prompt": "a document is the whole system prompt",
    "no_document_shares_answer_words": "no document shares a word with the answer",
    "prompt_not_split": "its layout cannot be split exactly (a chat memory its "
    "instrumentation joined into one string, around a content-injection template of the "
    "app's own), so no document was taken",
}
_MIN_WORD = 4  # letters of a word that tells (shorter ones are everywhere)
_MIN_ANSWER_WORDS = 3  # an answer with fewer long words ("I don't know") tells nothing
_MAX_HEADING = 64  # characters of a Markdown heading line


def context_doubts(
    query: str | None,
    documents: Sequence[str],
    response: str | None,
    system: Sequence[str] = (),
) -> tuple[str, ...]:
    """The reasons (keys of `DOUBTS`, in that order) to doubt that `documents`, split out
    of a prompt whose system messages are `system`, are the documents the model was
    given for `query` and answered `response` from; () when none."""
    texts = [d for d in documents if d.strip()]
    if not texts:
        return ()
    found: list[str] = []
    asked = normalized(query)
    if asked and any(normalized(t) == asked for t in texts):
        found.append("document_is_question")
    if any(_heading(t.strip()) or INSTRUCTION.search(t) for t in texts):
        found.append("heading_or_instruction")
    prompts = {normalized(s) for s in system if s.strip()}
    if any(normalized(t) in prompts for t in texts):
        found.append("document_is_system_prompt")
    said = _words(response or "")
    if len(said) >= _MIN_ANSWER_WORDS and not any(said & _words(t) for t in texts):
        found.append("no_document_shares_answer_words")
    return tuple(found)


def _heading(text: str) -> bool:
    """A line that only heads what follows: a label before a colon of any script with
    nothing after it (`Context:`, `已知信息：`), or a short Markdown heading."""
    if "\n" in text:
        return False
    if text.startswith("#"):
        level = len(text) - len(text.lstrip("#"))
        return level <= 6 and text[level : level + 1].isspace() and len(text) <= _MAX_HEADING
    return is_heading(text)


def _words(text: str) -> set[str]:
    """The words that tell: runs of four letters or more, and in a script written without
    spaces (Chinese, Japanese: wide characters) each pair of letters."""
    found: set[str] = set()
    run: list[str] = []
    for c in [*text.casefold(), " "]:
        if c.isalpha():
            run.append(c)
            continue
        if run:
            _add_run(run, found)
            run = []
    return found


def _add_run(run: list[str], found: set[str]) -> None:
    wide = [c for c in run if unicodedata.east_asian_width(c) in ("W", "F")]
    if len(wide) * 2 > len(run):
        found.update(run[k] + run[k + 1] for k in range(len(run) - 1))
    elif len(run) >= _MIN_WORD:
        found.add("".join(run))
