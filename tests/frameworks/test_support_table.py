"""The README's "Tracing your app" table and the tests agree: every row says how its stack
was tested, by real apps (`app:instrumentation:variant`, a case of the real-framework
tests, or a real app's own test file, `tests/frameworks/test_frameworks_*.py`, which
exists) or by span shapes written from the stack's source (`test_*`, a test of
`tests/spans/test_jvm_dotnet_go_shapes.py`); every case named is a test, and every real
app of the agent, JavaScript and no-content tests and every shape test is named. A shape
test follows the source files of the version its row names."""

from __future__ import annotations

import ast
import re

from tests.frameworks.test_frameworks_agents import AGENT_STACKS, ORDERED, WITHOUT_CONTENT
from tests.frameworks.test_frameworks_agents import APPS as AGENT_APPS
from tests.frameworks.test_frameworks_js import APPS as JS_APPS
from tests.frameworks.test_frameworks_js import WITHOUT_CONTENT as JS_WITHOUT_CONTENT
from tests.frameworks.test_frameworks_real import APPS as RAG_APPS
from tests.frameworks.test_frameworks_real import REPO
from tests.frameworks.test_frameworks_sdks import APPS as SDK_APPS
from tests.frameworks.test_frameworks_sdks import TRANSLATED

_CASE = re.compile(r"`([a-z0-9_]+):([a-z0-9-]+):([a-z0-9_-]+)`")
_SHAPE = re.compile(r"`(test_[a-z0-9_]+)`")
# A real app's own test file (the JVM and Go apps: one Maven or Go project each).
_APP_FILE = re.compile(r"`(tests/frameworks/test_frameworks_[a-z0-9_]+\.py)`")
_VERSION = re.compile(r"\d+\.\d+\.\d+")
# A source file of a stack written in Java, C# or Go.
_SOURCE_FILE = re.compile(r"[A-Za-z]\w*\.(?:java|cs|go)\b")
SHAPES = REPO / "tests" / "spans" / "test_jvm_dotnet_go_shapes.py"


def _table() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Tracing your app") :]
    section = section[: section.index("\n## ")]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]


def _shape_tests() -> set[str]:
    tree = ast.parse(SHAPES.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def _shape_sources() -> dict[str, str]:
    """Each shape test's source comment: the `# -- STACK VERSION --` block above it, which
    names the repository, version and files that test's spans follow."""
    sources: dict[str, str] = {}
    block: list[str] = []
    in_block = False
    for line in SHAPES.read_text().splitlines():
        if line.startswith("# -- "):
            block, in_block = [line], True
        elif in_block and line.startswith("#"):
            block.append(line)
        else:
            in_block = False
        match = re.match(r"(?:async )?def (test_\w+)", line)
        if match:
            sources[match[1]] = "\n".join(block)
    return sources


def test_every_row_says_how_it_was_tested_and_every_test_is_named() -> None:
    header, *rows = _table()
    assert header.startswith("| your app | tracing |") and header.endswith("| tested by |")
    named: set[tuple[str, ...]] = set()
    shapes: set[str] = set()
    for row in rows:
        tested_by = row.split("|")[-2]
        cases = {m.groups() for m in _CASE.finditer(tested_by)}
        found = set(_SHAPE.findall(tested_by))
        files = _APP_FILE.findall(tested_by)
        assert all((REPO / f).is_file() for f in files), files
        assert cases or found or files or "tests/trace" in tested_by, f"how was this tested? {row}"
        named |= cases
        shapes |= found
    stacks = [
        *AGENT_STACKS,
        *ORDERED,
        *WITHOUT_CONTENT,
        *JS_APPS,
        *JS_WITHOUT_CONTENT,
        *SDK_APPS,
        TRANSLATED,
    ]
    real = {(a, i, v) for a, i, v, *_ in [*AGENT_APPS, *stacks]} | set(RAG_APPS)
    assert named <= real, named - real
    must_name = {(a, i, v) for a, i, v, *_ in stacks}
    assert must_name <= named, must_name - named
    assert shapes == _shape_tests(), shapes ^ _shape_tests()


def test_every_shape_test_follows_the_source_files_of_the_version_its_row_names() -> None:
    sources = _shape_sources()
    for row in _table():
        tested_by = row.split("|")[-2]
        tests = _SHAPE.findall(tested_by)
        if not tests:
            continue
        versions = _VERSION.findall(tested_by)
        assert versions, f"which version were these shapes written from? {row}"
        for test in tests:
            source = sources.get(test, "")
            assert _SOURCE_FILE.search(source), f"{test} names no source file: {source!r}"
            for version in versions:
                assert version in source, f"{test} does not follow {version}: {source!r}"
