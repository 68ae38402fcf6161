"""No regular expression that reads what a sender wrote can backtrack more than a constant
factor: the shapes that make Python's engine super-linear are found in each pattern's
parsed form, so that one cannot come back unnoticed.

The shapes (each a way for the engine to split one run of characters between two
quantifiers in many ways, and try them all before it fails):

- **adjacent quantifiers over shared characters**: a variable-length repeat, then (past
  nothing but what may match empty) another that can take a character the first can
  (`\\s*#*\\s*$`, `\\s+(.*?)`, `\\s*:?\\s*`): a run of that character is split between
  them every way, at every start;
- **nested quantifiers**: a repeat whose body holds a variable-length repeat (`(a+)+`),
  unless every turn of the outer one must take a character none of the inner ones can
  (`(?:[a-z](?:[a-z-]*[a-z])?\\.)+`: each turn ends at its dot);
- **a repeated alternation whose alternatives can start alike** (`(a|ab)*`);
- **a pattern that starts with a variable-length repeat and is searched** (`re.search`,
  `findall`, `finditer`, `sub`, `split`): every start in a run re-reads the run.

A repeat of at most `BOUNDED` characters costs a constant factor and is allowed. Possessive
repeats and atomic groups never backtrack and are allowed. The patterns are those compiled
at module level (any module-level `re.Pattern`, in a container or not) and those written
as literals in `re.*(...)` calls, in the packages that read a sender's text on the record
path (`PACKAGES`).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The engine's own parser and its names (typeshed holds no stubs for them).
C: Any = importlib.import_module("re._constants")
sre: Any = importlib.import_module("re._parser")

PACKAGES = (
    "monitor.extraction",
    "monitor.spans",
    "monitor.processors.trace",
    "monitor.records",
    # The embedded detector reads the record's texts; a judge's answer can repeat them.
    "monitor.detector",
    "monitor.judge",
)
BOUNDED = 64  # a repeat of at most this many characters costs a constant factor
_SEARCHING = frozenset({"search", "findall", "finditer", "sub", "subn", "split"})
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)
# Characters the shapes are tried on: ASCII and Latin-1, the Unicode spaces, digits and
# letters of other scripts, full-width punctuation and digits.
_ALPHABET = (
    [chr(c) for c in range(0x180)]
    + [chr(c) for c in range(0x2000, 0x2030)]
    + list("\u3000\u3001\u3002\uff1a\uff1f\uff0c\uff01\uff11\uff21\u4e00\u4e2d\u6587")
    + list("\uac00\u0410\u044f\u05d0\u0627\u0660\u0966\u0e01\u2022\u1680\u00a0\ufeff")
)
_CATEGORIES = {
    C.CATEGORY_DIGIT: re.compile(r"\d"),
    C.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    C.CATEGORY_SPACE: re.compile(r"\s"),
    C.CATEGORY_NOT_SPACE: re.compile(r"\S"),
    C.CATEGORY_WORD: re.compile(r"\w"),
    C.CATEGORY_NOT_WORD: re.compile(r"\W"),
}
Node = tuple[Any, Any]


class _Shapes:
    """The super-linear shapes of one parsed pattern (`found`, a line each)."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._flags = pattern.flags
        self.found: list[str] = []
        self._parsed: list[Node] = list(sre.parse(pattern.pattern, pattern.flags))
        self._sequence(self._parsed)

    # -- what a node can match -------------------------------------------------------------

    def _char(self, op: Any, av: Any) -> Callable[[str], bool] | None:
        """The test of a one-character node (None: not one)."""
        fold = bool(self._flags & re.IGNORECASE)

        def same(code: int) -> Callable[[str], bool]:
            return lambda ch: ch == chr(code) or (fold and ch.lower() == chr(code).lower())

        if op is C.LITERAL:
            return same(av)
        if op is C.NOT_LITERAL:
            return lambda ch: not same(av)(ch)
        if op is C.ANY:
            return lambda ch: bool(self._flags & re.DOTALL) or ch != "\n"
        if op is C.IN:
            return self._in(av, fold)
        return None

    @staticmethod
    def _in(items: list[Node], fold: bool) -> Callable[[str], bool]:
        def one(ch: str) -> bool:
            for op, av in items:
                if op is C.LITERAL and ch == chr(av):
                    return True
                if op is C.RANGE and av[0] <= ord(ch) <= av[1]:
                    return True
                if op is C.CATEGORY and _CATEGORIES[av].match(ch):
                    return True
            return False

        negate = bool(items) and items[0][0] is C.NEGATE

        def test(ch: str) -> bool:
            hit = any(one(c) for c in {ch, ch.lower(), ch.upper()}) if fold else one(ch)
            return hit != negate

        return test

    def _chars(self, nodes: list[Node]) -> frozenset[str]:
        """Every character a match of `nodes` may take."""
        out: set[str] = set()
        for op, av in nodes:
            test = self._char(op, av)
            if test is not None:
                out.update(ch for ch in _ALPHABET if test(ch))
            elif op in _REPEATS or op is C.POSSESSIVE_REPEAT:
                out |= self._chars(list(av[2]))
            elif op is C.SUBPATTERN:
                out |= self._chars(list(av[3]))
            elif op is C.ATOMIC_GROUP:
                out |= self._chars(list(av))
            elif op is C.BRANCH:
                for alternative in av[1]:
                    out |= self._chars(list(alternative))
            elif op is C.GROUPREF:
                out.update(_ALPHABET)
        return frozenset(out)

    def _first(self, nodes: list[Node]) -> frozenset[str]:
        """The characters a match of `nodes` may start with."""
        out: set[str] = set()
        for node in nodes:
            out |= self._chars_first(node)
            if not self._nullable([node]):
                break
        return frozenset(out)

    def _chars_first(self, node: Node) -> frozenset[str]:
        op, av = node
        if self._char(op, av) is not None:
            return self._chars([node])
        if op in _REPEATS or op is C.POSSESSIVE_REPEAT:
            return self._first(list(av[2]))
        if op is C.SUBPATTERN:
            return self._first(list(av[3]))
        if op is C.ATOMIC_GROUP:
            return self._first(list(av))
        if op is C.BRANCH:
            return frozenset().union(*(self._first(list(a)) for a in av[1]))
        if op is C.GROUPREF:
            return frozenset(_ALPHABET)
        return frozenset()  # zero-width: anchors, lookarounds

    def _nullable(self, nodes: list[Node]) -> bool:
        for op, av in nodes:
            if self._char(op, av) is not None:
                return False
            if op in _REPEATS or op is C.POSSESSIVE_REPEAT:
                if av[0] > 0 and not self._nullable(list(av[2])):
                    return False
            elif op is C.SUBPATTERN:
                if not self._nullable(list(av[3])):
                    return False
            elif op is C.ATOMIC_GROUP:
                if not self._nullable(list(av)):
                    return False
            elif op is C.BRANCH:
                if not any(self._nullable(list(a)) for a in av[1]):
                    return False
        return True

    # -- variable-length repeats at a node's ends -----------------------------------------

    @staticmethod
    def _variable(node: Node) -> bool:
        """A repeat that may backtrack over more than `BOUNDED` characters' worth of turns."""
        op, av = node
        return op in _REPEATS and av[1] - av[0] > BOUNDED

    def _ends(self, nodes: list[Node], last: bool) -> Iterator[Node]:
        """The variable repeats that can take the last (`last`) or first character a match
        of `nodes` takes."""
        for node in reversed(nodes) if last else nodes:
            op, av = node
            if self._variable(node):
                yield node
            elif op in _REPEATS:
                yield from self._ends(list(av[2]), last)
            elif op is C.SUBPATTERN:
                yield from self._ends(list(av[3]), last)
            elif op is C.BRANCH:
                for alternative in av[1]:
                    yield from self._ends(list(alternative), last)
            if not self._nullable([node]):
                return

    # -- the shapes ------------------------------------------------------------------------

    def _sequence(self, nodes: list[Node]) -> None:
        for i, node in enumerate(nodes):
            self._node(node)
            for tail in self._ends([node], last=True):
                self._after(tail, nodes[i + 1 :])

    def _after(self, tail: Node, later: list[Node]) -> None:
        """A variable repeat `tail` followed by `later`: one that can take what `tail` can,
        past what may match empty or what `tail` could have taken itself
        (`[0-9:]*:[0-9:]*`)."""
        taken = self._chars([tail])
        for node in later:
            for head in self._ends([node], last=False):
                shared = taken & self._chars([head])
                if shared:
                    self._found("adjacent quantifiers share", shared)
            if not (self._nullable([node]) or self._chars([node]) <= taken):
                return

    def _node(self, node: Node) -> None:
        op, av = node
        if op in _REPEATS:
            body = list(av[2])
            if av[1] > BOUNDED:
                self._nested(body)
                self._alternatives(body)
            self._sequence(body)
        elif op is C.POSSESSIVE_REPEAT:
            self._sequence(list(av[2]))
        elif op is C.SUBPATTERN:
            self._sequence(list(av[3]))
        elif op is C.ATOMIC_GROUP:
            self._sequence(list(av))
        elif op is C.BRANCH:
            for alternative in av[1]:
                self._sequence(list(alternative))
        elif op in (C.ASSERT, C.ASSERT_NOT):
            self._sequence(list(av[1]))

    def _nested(self, body: list[Node]) -> None:
        inner = list(self._repeats(body))
        if not inner:
            return
        taken = frozenset().union(*(self._chars([r]) for r in inner))
        for op, av in body:
            test = self._char(op, av)
            if test is not None and not any(test(ch) for ch in taken):
                return  # every turn takes a character no inner repeat can
        self._found("a repeat holds a repeat over", taken)

    def _repeats(self, nodes: list[Node]) -> Iterator[Node]:
        for node in nodes:
            op, av = node
            if op in _REPEATS and av[1] > 1:
                yield node
            if op in _REPEATS or op is C.POSSESSIVE_REPEAT:
                yield from self._repeats(list(av[2]))
            elif op is C.SUBPATTERN:
                yield from self._repeats(list(av[3]))
            elif op is C.BRANCH:
                for alternative in av[1]:
                    yield from self._repeats(list(alternative))

    def _alternatives(self, body: list[Node]) -> None:
        turn = self._first(body)  # what may follow an alternative that matches empty
        for branch in self._branches(body):
            firsts = [
                self._first(list(a)) | (turn if self._nullable(list(a)) else frozenset())
                for a in branch
            ]
            for i, first in enumerate(firsts):
                for other in firsts[i + 1 :]:
                    if first & other:
                        self._found(
                            "a repeated alternation's alternatives start alike", first & other
                        )

    def _branches(self, nodes: list[Node]) -> Iterator[list[Any]]:
        """The alternations of a repeat's body, outside the repeats it holds."""
        for op, av in nodes:
            if op is C.BRANCH:
                yield av[1]
            elif op is C.SUBPATTERN:
                yield from self._branches(list(av[3]))

    def _found(self, shape: str, chars: frozenset[str]) -> None:
        sample = "".join(sorted(chars)[:8])
        self.found.append(f"{shape} {sample!r}")

    def leading(self) -> bool:
        """Whether the pattern starts with a variable-length repeat that what follows it
        can fail after (a searched `\\d+` alone never fails once it started), unless a
        look-behind starts it only where a run of what it takes starts
        (`(?<!\\s)\\s*`)."""
        guarded: frozenset[str] = frozenset()
        for i, node in enumerate(self._parsed):
            op, av = node
            if op is C.ASSERT_NOT and av[0] == -1:
                guarded |= self._chars(list(av[1]))
            heads = list(self._ends([node], last=False))
            if heads:
                unguarded = any(not self._chars([head]) <= guarded for head in heads)
                return unguarded and not self._nullable(self._parsed[i + 1 :])
            if not self._nullable([node]):
                return False
        return False


def shapes(pattern: re.Pattern[str]) -> list[str]:
    return _Shapes(pattern).found


def starts_with_repeat(pattern: re.Pattern[str]) -> bool:
    return _Shapes(pattern).leading()


# -- the patterns --------------------------------------------------------------------------


def _modules() -> Iterator[Any]:
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            yield importlib.import_module(info.name)


def _module_patterns(module: Any) -> Iterator[tuple[str, re.Pattern[str]]]:
    for name, value in vars(module).items():
        values = value if isinstance(value, list | tuple | frozenset | set) else [value]
        for item in values:
            for part in item if isinstance(item, tuple) else (item,):
                if isinstance(part, re.Pattern) and isinstance(part.pattern, str):
                    yield name, part


def _literal_calls(tree: ast.AST) -> Iterator[tuple[str, re.Pattern[str]]]:
    """`re.compile("...")`, `re.findall("...", ...)`...: the literal patterns."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield f"line {node.lineno}", re.compile(node.args[0].value)


def _searched(tree: ast.AST) -> set[str]:
    """The module-level names that are searched (`NAME.search(...)`, `re.findall(...)`)."""
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _SEARCHING
            and isinstance(node.func.value, ast.Name)
        ):
            names.add(node.func.value.id)
    return names


def _patterns() -> Iterator[tuple[str, re.Pattern[str], bool]]:
    """Every pattern, where it is, and whether it is searched (a literal compiled at
    module level is read once, by its name)."""
    for module in _modules():
        path = Path(module.__file__)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        searched = _searched(tree)
        where = module.__name__
        named = {pattern.pattern for _, pattern in _module_patterns(module)}
        for name, pattern in _module_patterns(module):
            yield f"{where}.{name}", pattern, name in searched
        for line, pattern in _literal_calls(tree):
            if pattern.pattern not in named:
                yield f"{where} {line}", pattern, "re" in searched


PATTERNS = list(_patterns())


def test_the_packages_hold_patterns() -> None:
    """The search finds the patterns the extraction reads prompts with."""
    assert len(PATTERNS) >= 10
    assert any(where.endswith("_TEMPLATE_HEADING") for where, _, _ in PATTERNS)


@pytest.mark.parametrize(("where", "pattern", "searched"), PATTERNS, ids=[p[0] for p in PATTERNS])
def test_no_pattern_can_backtrack(where: str, pattern: re.Pattern[str], searched: bool) -> None:
    found = shapes(pattern)
    if searched and starts_with_repeat(pattern):
        found.append("searched, and starts with a variable-length repeat")
    assert not found, f"{where}: {pattern.pattern!r}: " + "; ".join(found)


@pytest.mark.parametrize(
    "pattern",
    [
        r"\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$",  # the heading line this test was written for
        r"\s*(?:the\s+)?role\s*:?\s*",
        r"(a+)+b",
        r"(a|aa)*b",
        r"[0-9:]*:[0-9:]*:[0-9:]*",
        r"\s+\S*\s+.*",
    ],
)
def test_the_shapes_are_found(pattern: str) -> None:
    assert shapes(re.compile(pattern))


@pytest.mark.parametrize(
    "pattern",
    [
        r"\s{0,3}#{1,6}\s",
        r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,24}",
        r"'(?:[^'\\]|\\.)*'",
        r"(?:the|your) (?:role|task)",
        r"[^\W\d_]{4,}",
        r"\d+",
        r"(?:\d{1,3}\.){3}\d{1,3}",
    ],
)
def test_linear_shapes_pass(pattern: str) -> None:
    assert not shapes(re.compile(pattern))


def test_a_searched_leading_repeat_is_found() -> None:
    assert starts_with_repeat(re.compile(r"\s*</(\w+)>"))
    assert not starts_with_repeat(re.compile(r"</(\w+)>\s*$"))
    assert not starts_with_repeat(re.compile(r"(?<!\s)\s*</(\w+)>"))
    assert not starts_with_repeat(re.compile(r"[^\W\d_]{4,}"))
