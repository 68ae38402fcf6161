"""Bench tables in the docs: a benchmark run with `--write-docs` writes its table into a
marked block of a page, with the command that printed it, the date and the machine.

A block in a Markdown page (docs/performance.md, docs/quality.md, docs/reliability.md):

    <!-- bench:worker-pool -->
    Printed by `python bench/worker_pool.py --rounds 3` on 2026-11-25 (2 CPUs, ...):

    | ... the table ... |
    <!-- /bench:worker-pool -->

Everything between the two markers belongs to the script and is replaced on every run;
the text around the block (what is measured, what a figure means, the targets) is written
by hand and names no figure the block has. To adopt it in a bench script:

    from harness import bench_docs

    bench_docs.add_flag(parser)                      # --write-docs, off by default
    ...
    table = bench_docs.table(["measurement", "value"], rows)
    print(table)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "my-bench", table, mode="quick: --rounds 3")

`write_block` fails, naming the page and the block, when the page has no such block: a
new block is added by hand (the two marker lines) where the table should go.
`tests/project/test_bench_docs.py` checks every block of every page: a command naming a
script that exists, and a date.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

REPO = Path(__file__).resolve().parents[1]
# The first line of a block's body; `tests/project/test_bench_docs.py` reads it.
HEADER = "Printed by `{command}` on {date} ({machine}{mode}):"


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="also write the table into its block of the docs page (off by default: a run "
        "never edits the repository unless asked)",
    )


def machine() -> str:
    """The CPUs this process may use, their model, and the load average now."""
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    cpus = len(os.sched_getaffinity(0))
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{cpus} CPUs ({model}), load average {load}"


def command(argv: Sequence[str] | None = None) -> str:
    """The command line that ran this script, as a reader types it from the repository
    root: `python bench/NAME.py ARGS`, without `--write-docs`. A file argument inside the
    repository is given relative to it; one outside it by its name only (the docs never
    point outside the repository)."""
    args = list(sys.argv if argv is None else argv)
    script = Path(args[0]).resolve()
    words = ["python", _shown(script)]
    for arg in args[1:]:
        if arg == "--write-docs":
            continue
        option, equals, value = arg.partition("=")
        if equals and option.startswith("--"):
            words.append(f"{option}={_shown_path(value)}")
        else:
            words.append(_shown_path(arg))
    return " ".join(shlex.quote(word) for word in words)


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """What is printed inside, printed as usual and also kept: for a script whose report is
    what it prints (its tables with their headings)."""
    kept = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, kept)):
        yield kept


class _Tee(io.TextIOBase):
    def __init__(self, *streams: TextIO) -> None:
        self._streams = streams

    def write(self, text: str) -> int:
        for stream in self._streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self._streams:
            stream.flush()


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; cells are written with `str`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def block(body: str, *, mode: str = "", today: datetime.date | None = None) -> str:
    """What goes between a block's markers: the header line, an empty line, `body`."""
    header = HEADER.format(
        command=command(),
        date=(today or datetime.date.today()).isoformat(),
        machine=machine(),
        mode=f"; {mode}" if mode else "",
    )
    return f"{header}\n\n{body.strip()}"


def replace_block(text: str, block_id: str, content: str, *, page: str = "the page") -> str:
    """`text` with the body of block `block_id` replaced by `content`."""
    pattern = re.compile(
        rf"(^<!-- bench:{re.escape(block_id)} -->\n).*?(^<!-- /bench:{re.escape(block_id)} -->$)",
        re.M | re.S,
    )
    found = len(pattern.findall(text))
    if found != 1:
        raise ValueError(
            f"{page} has {found} blocks `bench:{block_id}`, not one: add the lines "
            f"`<!-- bench:{block_id} -->` and `<!-- /bench:{block_id} -->` where the table goes"
        )
    return pattern.sub(lambda m: f"{m.group(1)}{content}\n{m.group(2)}", text)


def write_block(page: str, block_id: str, body: str, *, mode: str = "") -> None:
    """Replace block `block_id` of `page` (a path from the repository root) with `body`,
    after the command, date and machine; `mode` says how the run differs from the
    script's defaults (e.g. a quick mode)."""
    path = REPO / page
    text = path.read_text(encoding="utf-8")
    path.write_text(
        replace_block(text, block_id, block(body, mode=mode), page=page), encoding="utf-8"
    )
    print(f"wrote block bench:{block_id} of {page}", file=sys.stderr)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return path.name


def _shown_path(arg: str) -> str:
    """A path argument as the docs show it; any other argument unchanged."""
    if "/" not in arg or not Path(arg).exists():
        return arg
    return _shown(Path(arg).resolve())
