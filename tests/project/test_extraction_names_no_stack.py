"""monitor/extraction names no vendor, framework, SDK or switch: facts about a stack live in
the conventions table (monitor/conventions/), and the readers read the table. The names
looked for are the table's own entry names (and the words they are made of), and a few
more kept here; a module that still names one is on `ALLOWED`, which only shrinks."""

from __future__ import annotations

import re
from pathlib import Path

from monitor.conventions import SHIPPED

EXTRACTION = Path(__file__).resolve().parents[2] / "monitor" / "extraction"
# Names the table's entry names do not spell out.
MORE = ("litellm", "bedrock", "converse", "koog", "haystack", "dspy", "crewai", "strands")
# Words of entry names too common to be a stack's name.
_COMMON = frozenset({"ai", "ai 2.x", "2.x", "java", "dotnet", "framework", "genai", "agent"})
# Modules that still name stacks (in code or docstrings), by how many names: each number
# only goes down as those facts move into the table.
ALLOWED = {
    "_asks_nothing.py": 6,
    "_diagnosis.py": 2,
    "_doubt.py": 2,
    "_extraction_rule.py": 1,
    "_log_events.py": 1,
    "_model_call_spans.py": 1,
    "_prompt_layouts.py": 3,
    "_record_parts.py": 5,
    "_retrieval_spans.py": 2,
    "_sources.py": 7,
    "_span_roles.py": 3,
    "_span_values.py": 4,
    "_structure.py": 2,
    "_table.py": 1,
    "_tool_results.py": 6,
}
# Modules written on the table from the start: they name none.
CLEAN = ("_messages.py", "_message_parts.py", "_instrumentations.py", "_decoding.py")


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


def test_the_modules_written_on_the_table_name_no_stack() -> None:
    for module in CLEAN:
        assert _named(EXTRACTION / module) == set(), module


def test_no_module_names_more_stacks_than_it_did() -> None:
    over = {}
    for path in sorted(EXTRACTION.glob("*.py")):
        if path.name in CLEAN or path.name == "__init__.py":
            continue
        found = _named(path)
        if len(found) > ALLOWED.get(path.name, 0):
            over[path.name] = sorted(found)
    assert over == {}, f"name stacks in monitor/extraction (move them to the table): {over}"
