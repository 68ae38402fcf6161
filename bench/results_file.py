"""The results file's write path: CPU and wall time to take evaluated records through
`ResultsFileSink` until every line is synced, against a plain loop writing the same lines
(JSON-encode, append in batches of 1,000, `fdatasync` each batch: the floor of any sink),
and against the sink of another revision on the same records in the same run.

    python bench/results_file.py [--records 20000] [--rounds 5] [--against REV] [--dir DIR]

Each round runs every contender once, in turn, on a fresh file in DIR (default: the
system's temporary directory), so the contenders of a round share the machine's state; the
printed figures are medians over the rounds, and the ratios are medians of each round's
ratio. CPU is the process's (the writer thread included). `--against REV` loads
`monitor/exporters/results_file.py` as it is at REV (`git show`) beside this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Protocol

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_smoke  # noqa: E402
from monitor.component import Evaluated  # noqa: E402
from monitor.exporters.results_file import ResultsFileSink, results_line  # noqa: E402
from monitor.records import ContextDoc, RagRecord  # noqa: E402
from monitor.results import EvalResult  # noqa: E402
from monitor.telemetry import Telemetry, create_telemetry  # noqa: E402

EVALUATORS = ("local_groundedness", "local_relevance", "local_retrieval", "local_safety")
CHUNK = 100  # records emitted per turn of the event loop, as an evaluation batch finishes
Item = tuple[RagRecord, dict[str, EvalResult]]


class Sink(Protocol):
    async def start(self) -> None: ...

    def emit(self, batch: Sequence[Evaluated]) -> Sequence[asyncio.Future[bool]]: ...

    async def shutdown(self, deadline_s: float) -> None: ...


def records(n: int) -> list[Item]:
    items = []
    for i in range(n):
        record = RagRecord(
            request_id=f"req-{i:08d}",
            trace_id=f"{i:032x}",
            span_id=f"{i:016x}",
            service="docs-qa",
            route="/ask",
            query=f"When did bridge number {i} open?",
            retrieved_context=(ContextDoc(content=f"Bridge {i} opened in {1900 + i % 100}."),),
            response=f"It opened in {1900 + i % 100}.",
        )
        results = {
            name: EvalResult(
                name=name,
                score=0.5 + (i % 5) / 10,
                normalized=0.5 + (i % 5) / 10,
                label="pass" if i % 4 else "fail",
                passed=bool(i % 4),
                explanation=f"{name}: supported by the context of request {i}",
            )
            for name in EVALUATORS
        }
        items.append((record, results))
    return items


async def through_sink(
    make: Callable[[Path, Telemetry], Sink], path: Path, items: list[Item]
) -> None:
    sink = make(path, create_telemetry())
    await sink.start()
    futures: list[asyncio.Future[bool]] = []
    for start in range(0, len(items), CHUNK):
        futures.extend(sink.emit([Evaluated(*item) for item in items[start : start + CHUNK]]))
        await asyncio.sleep(0)
    written = await asyncio.gather(*futures)
    await sink.shutdown(60)
    assert all(written), "a line was not written"


async def plain_loop(path: Path, items: list[Item]) -> None:
    """The floor: encode each line, append 1,000 at a time off the loop, sync each batch."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for start in range(0, len(items), 1000):
            lines = [
                encode(results_line(r, res)).encode() + b"\n"
                for r, res in items[start : start + 1000]
            ]
            await asyncio.to_thread(_append, fd, b"".join(lines))
    finally:
        os.close(fd)


def _append(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fdatasync(fd)


def sink_at(revision: str) -> Callable[[Path, Telemetry], Sink]:
    """The results file sink as it is at `revision`."""
    source = subprocess.run(
        ["git", "show", f"{revision}:monitor/exporters/results_file.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    directory = Path(tempfile.mkdtemp(prefix="bench-results-file-"))
    module_path = directory / "results_file_at_revision.py"
    module_path.write_text(source)
    spec = importlib.util.spec_from_file_location("results_file_at_revision", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made: Callable[[Path, Telemetry], Sink] = module.ResultsFileSink
    return made


def measure(
    run: Callable[[Path], Coroutine[object, object, None]], directory: Path, lines: int
) -> tuple[float, float]:
    """CPU seconds and wall seconds of one run over a fresh file, checked for `lines`."""
    path = directory / "results.jsonl"
    path.unlink(missing_ok=True)
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(run(path))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with path.open("rb") as handle:
        assert sum(1 for _ in handle) == lines, "lines missing from the file"
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", metavar="REV", help="also run the sink at this revision")
    parser.add_argument("--dir", type=Path, default=None, help="where the files are written")
    args = bench_smoke.parse_args(parser, records=200, rounds=1)
    items = records(args.records)
    contenders: dict[str, Callable[[Path], Coroutine[object, object, None]]] = {
        "plain loop (reference)": lambda path: plain_loop(path, items),
        "ResultsFileSink (this tree)": lambda path: through_sink(ResultsFileSink, path, items),
    }
    if args.against:
        old = sink_at(args.against)
        contenders[f"ResultsFileSink ({args.against})"] = lambda path: through_sink(
            old, path, items
        )
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for run in contenders.values():  # a warm-up round, not counted
            measure(run, Path(tmp), len(items))
        for _ in range(args.rounds):
            for name, run in contenders.items():
                figures[name].append(measure(run, Path(tmp), len(items)))
    reference = figures["plain loop (reference)"]
    per_10k = 10_000 / len(items)
    print(f"{len(items)} records, {args.rounds} rounds, medians; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(
        "| contender | CPU s / 10k lines | wall s / 10k lines | CPU vs reference | wall vs reference |"
    )
    print("|---|---|---|---|---|")
    for name, rounds in figures.items():
        cpu = statistics.median(c for c, _ in rounds) * per_10k
        wall = statistics.median(w for _, w in rounds) * per_10k
        cpu_ratio = statistics.median(
            c / rc for (c, _), (rc, _) in zip(rounds, reference, strict=True)
        )
        wall_ratio = statistics.median(
            w / rw for (_, w), (_, rw) in zip(rounds, reference, strict=True)
        )
        print(f"| {name} | {cpu:.3f} | {wall:.3f} | {cpu_ratio:.2f} | {wall_ratio:.2f} |")
    if args.against:
        new, old_rounds = (
            figures["ResultsFileSink (this tree)"],
            figures[f"ResultsFileSink ({args.against})"],
        )
        cpu_ratios = sorted(n / o for (n, _), (o, _) in zip(new, old_rounds, strict=True))
        wall_ratios = sorted(n / o for (_, n), (_, o) in zip(new, old_rounds, strict=True))
        print(f"\nthis tree / {args.against}, medians of the rounds' ratios (lowest–highest):")
        for what, ratios in (("CPU", cpu_ratios), ("wall", wall_ratios)):
            spread = f"{ratios[0]:.2f}–{ratios[-1]:.2f}"
            print(f"  {what} {statistics.median(ratios):.2f} ({spread})")


if __name__ == "__main__":
    main()
