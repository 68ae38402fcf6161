"""The tables the bench scripts write into the docs (`harness/bench_docs.py`): every block of every
Markdown page names the command that printed it, a script that exists, and a date; every
block a script writes is in its page; and the helper replaces one block and nothing else."""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import re
import shlex
from pathlib import Path

import pytest

from harness import bench_docs
from tests.conftest import REPO

BLOCK = re.compile(r"^<!-- bench:([a-z0-9-]+) -->\n(.*?)^<!-- /bench:\1 -->$", re.M | re.S)
HEADER = re.compile(r"^Printed by `([^`]+)` on (\d{4}-\d{2}-\d{2}) \((.+)\):$")


def _pages() -> list[Path]:
    """The repository's Markdown pages, outside hidden folders and build outputs."""
    pages = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [
            d for d in subfolders if not d.startswith((".", "__")) and not d.endswith(".egg-info")
        ]
        pages += [Path(folder) / f for f in files if f.endswith(".md")]
    return sorted(pages)


def _blocks() -> list[tuple[str, str, str]]:
    """(page, block id, body) of every block in the repository's Markdown pages."""
    return [
        (str(page.relative_to(REPO)), m.group(1), m.group(2))
        for page in _pages()
        for m in BLOCK.finditer(page.read_text(encoding="utf-8"))
    ]


def test_every_marker_opens_or_closes_a_block() -> None:
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        markers = re.findall(r"<!-- /?bench:[^>]*-->", text)
        paired = 2 * len(BLOCK.findall(text))
        assert len(markers) == paired, f"{page.relative_to(REPO)}: a bench marker without its pair"


@pytest.mark.parametrize(
    ("page", "block", "body"), [pytest.param(*b, id=f"{b[0]}:{b[1]}") for b in _blocks()]
)
def test_every_block_names_its_command_and_date(page: str, block: str, body: str) -> None:
    first, _, rest = body.partition("\n")
    header = HEADER.match(first)
    assert header, f"{page} bench:{block}: no 'Printed by `COMMAND` on DATE (...)' line"
    command, date, _ = header.groups()
    words = shlex.split(command)
    assert words[0] == "python" and (REPO / words[1]).is_file(), f"{page} bench:{block}: {command}"
    assert words[1].startswith("bench/"), command
    assert datetime.date.fromisoformat(date) <= datetime.date.today()
    assert rest.strip(), f"{page} bench:{block}: a command and a date but no table"


def _written_blocks() -> set[tuple[str, str]]:
    """(page, block id) of every `bench_docs.write_block` call with literal arguments in bench/."""
    found: set[tuple[str, str]] = set()
    for script in (REPO / "bench").glob("*.py"):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "write_block"
            ):
                page, block = node.args[0], node.args[1]
                assert isinstance(page, ast.Constant) and isinstance(page.value, str), (
                    f"{script.name}: a page that is not a literal"
                )
                # The block id, or the ids of a conditional expression choosing one.
                found |= {
                    (page.value, n.value)
                    for n in ast.walk(block)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)
                }
    return found


def test_every_block_a_script_writes_is_in_its_page() -> None:
    written = _written_blocks()
    assert ("docs/performance.md", "all") in written
    present = {(page, block) for page, block, _ in _blocks()}
    assert written <= present, sorted(written - present)


def test_replace_block_replaces_that_block_only() -> None:
    text = (
        "intro\n<!-- bench:a -->\nold a\n<!-- /bench:a -->\nmiddle\n"
        "<!-- bench:b -->\nold b\n<!-- /bench:b -->\nend\n"
    )
    assert bench_docs.replace_block(text, "a", "new a\n| x |") == text.replace(
        "old a", "new a\n| x |"
    )
    with pytest.raises(ValueError, match=r"docs/x\.md has 0 blocks `bench:c`"):
        bench_docs.replace_block(text, "c", "new", page="docs/x.md")
    twice = text + "<!-- bench:a -->\n<!-- /bench:a -->\n"
    with pytest.raises(ValueError, match="2 blocks"):
        bench_docs.replace_block(twice, "a", "new")


def test_the_block_starts_with_the_command_and_the_date() -> None:
    body = bench_docs.block("| t |", mode="quick", today=datetime.date(2026, 1, 2))
    header = HEADER.match(body.splitlines()[0])
    assert header and header.group(2) == "2026-01-02" and header.group(3).endswith("; quick")


def test_the_command_is_the_one_a_reader_types(tmp_path: Path) -> None:
    outside = tmp_path / "labelled.jsonl"
    outside.write_text("")
    argv = [
        str(REPO / "bench" / "judge_tlm.py"),
        str(outside),
        "--write-docs",
        f"--data={outside}",
        str(REPO / "tests" / "data" / "redaction_sample.jsonl"),
        "--rates",
        "0,0.01",
        "a b",
    ]
    assert bench_docs.command(argv) == (
        "python bench/judge_tlm.py labelled.jsonl --data=labelled.jsonl "
        "tests/data/redaction_sample.jsonl --rates 0,0.01 'a b'"
    )


def test_writing_the_docs_is_off_unless_asked() -> None:
    parser = argparse.ArgumentParser()
    bench_docs.add_flag(parser)
    assert parser.parse_args([]).write_docs is False
    assert parser.parse_args(["--write-docs"]).write_docs is True
