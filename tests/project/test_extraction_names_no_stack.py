"""monitor/extraction names no vendor, framework, SDK or switch, in code, comments or
docstrings: facts about a stack live in the conventions table (monitor/conventions/), and
the readers read the table; the stacks each shape was seen from are listed in
monitor/extraction/README.md. The names looked for are the table's own entry names (and
the words they are made of), and a few more kept here. `ALLOWED` holds the modules that
may still name some, each with the most it may name and why: it is empty, and its count
may only fall (an entry is never added)."""

from __future__ import annotations

import re
from pathlib import Path

from monitor.conventions import SHIPPED

EXTRACTION = Path(__file__).resolve().parents[2] / "monitor" / "extraction"
# Names the table's entry names do not spell out.
MORE = (
    *("litellm", "bedrock", "converse", "koog", "haystack", "dspy", "crewai", "strands"),
    *("langchain", "ollama", "mistral", "traceloop"),
)
# Words of entry names too common to be a stack's name.
_COMMON = frozenset({"ai", "ai 2.x", "2.x", "java", "dotnet", "framework", "genai", "agent"})
# Module → the most names it may hold (a one-line reason beside each). Only shrinks.
ALLOWED: dict[str, int] = {}


def _names() -> frozenset[str]:
    words = set(MORE)
    for convention in SHIPPED:
        name = convention.name.lower()
        words.add(name)
        words.update(w for w in re.split(r"[-\s]", name) if len(w) > 3)
    return frozenset(w for w in words if w not in _COMMON)


def _named(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8").lower()
    return {
        name
        for name in _names()
        if re.search(rf"(?<![a-z0-9_]){re.escape(name)}(?![a-z0-9])", text)
    }


def test_no_module_names_a_stack() -> None:
    over = {}
    for path in sorted(EXTRACTION.glob("*.py")):
        found = _named(path)
        if len(found) > ALLOWED.get(path.name, 0):
            over[path.name] = sorted(found)
    assert over == {}, f"name stacks in monitor/extraction (move them to the table): {over}"


def test_the_check_finds_a_name_in_code_or_a_comment(tmp_path: Path) -> None:
    module = tmp_path / "_reader.py"
    module.write_text('# as LangChain batches them\nHEADER = "Spring AI"\nKEY = "lc"\n')
    assert _named(module) == {"langchain", "spring"}
