"""Structure, not names: the extraction reads prompts and spans by their shape, so its name
lists (a tuple, list or set of three string literals or more, or `frozenset`/`set` of one)
and its regular expressions (`re.compile` and the module-level `re` calls with a literal
pattern) are counted, and the counts may only fall (`CEILING`). Run
`python -m tests.project.test_extraction_lists` to print them per file."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

EXTRACTION = Path(__file__).resolve().parents[2] / "monitor" / "extraction"
# What monitor/extraction holds today; lower these when a list or a regex goes.
CEILING = {"lists": 28, "regexes": 6}
_RE_CALLS = frozenset(
    {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "split"}
)
_MIN_NAMES = 3


def _is_names(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        elements = node.elts
    else:
        return False
    strings = [e for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return len(strings) >= _MIN_NAMES and len(strings) == len(elements)


def _is_regex(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "re"
        and node.func.attr in _RE_CALLS
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant | ast.JoinedStr | ast.BinOp)
    )


def counts(source: str) -> Counter[str]:
    """The name lists and regular expressions in one module's source (a module's
    `__all__` is its exports, no list of names it reads)."""
    found: Counter[str] = Counter()
    tree = ast.parse(source)
    exports = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    }
    for node in ast.walk(tree):
        found["lists"] += _is_names(node) and id(node) not in exports
        found["regexes"] += _is_regex(node)
    return found


def extraction_counts() -> dict[str, Counter[str]]:
    return {p.name: counts(p.read_text()) for p in sorted(EXTRACTION.glob("*.py"))}


def test_the_counter_counts_lists_and_regexes() -> None:
    source = (
        "import re\n"
        "A = ('a', 'b', 'c')\nB = frozenset({'x', 'y', 'z', 'w'})\nC = ('a', 'b')\n"
        "D = ('a', 1, 'c')\n__all__ = ['a', 'b', 'c']\nE = re.compile(r'x+')\nF = re.match('y', s)\nG = re.compile(p)\n"
    )
    assert counts(source) == Counter({"lists": 2, "regexes": 2})


def test_monitor_extraction_grows_no_name_list_or_regex() -> None:
    total: Counter[str] = Counter()
    for found in extraction_counts().values():
        total.update(found)
    assert {k: total[k] for k in CEILING} == CEILING


if __name__ == "__main__":
    grand: Counter[str] = Counter()
    for name, found in extraction_counts().items():
        grand.update(found)
        if found["lists"] or found["regexes"]:
            print(f"{name:28} lists {found['lists']:3}  regexes {found['regexes']:3}")
    print(f"{'total':28} lists {grand['lists']:3}  regexes {grand['regexes']:3}")
