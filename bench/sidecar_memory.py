"""Memory of an idle sidecar: `rag-monitor run` on the defaults with 1 and with 2 worker
processes (`pipeline.processes`), started, ready (/readyz answers 200), then left idle;
the proportional set size (PSS: a page shared by n processes counts 1/n in each, so the
sum is what the tree costs the machine) of every process of its tree and the total.
rotel, the collector sidecar, measured the same way beside it when its `rotel` package
is installed.

    python -m bench.sidecar_memory [--processes 1 2] [--settle-s 5]

Only the ports differ from the defaults (free ones, so that the bench runs beside
anything else). The monitor runs from its installed `rag-monitor` script when there is
one beside this interpreter (what the container image runs), else as `python -m monitor`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._pss import ProcessMemory, distinct_mb, tree_memory  # noqa: E402
from harness import bench_docs, bench_smoke  # noqa: E402
from harness.ports import check_exited, retrying  # noqa: E402
from harness.ports import free_port as _free_port  # noqa: E402

# The project's guard for an idle sidecar with 2 worker processes (the default on 2 CPUs):
# the PSS of its tree, MB (docs/performance.md, "Targets").
TARGET_PSS_MB = {2: 150}

_READY_TIMEOUT_S = 120.0


def _ready(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait(
    condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path
) -> None:
    """Until `condition()`; raises once `process` has exited (`PortTaken` when its log
    names an address in use) or the timeout passes."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if condition():
            return
        check_exited(process.poll(), log, what)
        time.sleep(0.2)
    raise TimeoutError(f"{what} not ready within {_READY_TIMEOUT_S:g}s")


@contextlib.contextmanager
def _running(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        yield process
    except BaseException:
        sys.stderr.write(log.read_text(errors="replace")[-3000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _entry_point() -> list[str]:
    script = Path(sys.executable).parent / "rag-monitor"
    return [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "monitor"]


Tree = tuple[list[ProcessMemory], float | None]


def _tree(pid: int) -> Tree:
    """Every process's memory, and the tree's distinct pages."""
    tree = tree_memory(pid)
    return tree, distinct_mb(p.pid for p in tree)


def monitor_memory(processes: int, settle_s: float, workdir: Path) -> Tree:
    """Memory of an idle `rag-monitor run` tree with `processes` worker processes."""
    return retrying(lambda: _monitor_memory(processes, settle_s, workdir))


def _monitor_memory(processes: int, settle_s: float, workdir: Path) -> Tree:
    metrics = _free_port()
    config = workdir / f"monitor-{processes}.yaml"
    config.write_text(
        "receivers:\n"
        "  otlp:\n"
        "    protocols:\n"
        f"      grpc: {{endpoint: '127.0.0.1:{_free_port()}'}}\n"
        f"      http: {{endpoint: '127.0.0.1:{_free_port()}'}}\n"
        "exporters:\n"
        f"  prometheus: {{endpoint: '127.0.0.1:{metrics}'}}\n"
        "pipeline:\n"
        f"  processes: {processes}\n"
    )
    argv = [*_entry_point(), "run", "--config", str(config)]
    log = workdir / f"monitor-{processes}.log"
    with _running(argv, log) as process:
        _wait(lambda: _ready(metrics, "/readyz"), "rag-monitor /readyz", process, log)
        time.sleep(settle_s)
        return _tree(process.pid)


def rotel_memory(settle_s: float, workdir: Path) -> Tree | None:
    """PSS of an idle rotel-agent with OTLP receivers and the blackhole exporter; None
    when the `rotel` package is not installed."""
    try:
        import rotel
    except ImportError:
        return None
    binary = Path(rotel.__file__).parent / "rotel-agent"
    return retrying(lambda: _rotel_memory(binary, settle_s, workdir))


def _rotel_memory(binary: Path, settle_s: float, workdir: Path) -> Tree:
    http = _free_port()
    argv = [
        str(binary), "start",
        "--otlp-http-endpoint", f"127.0.0.1:{http}",
        "--otlp-grpc-endpoint", f"127.0.0.1:{_free_port()}",
        "--exporter", "blackhole",
    ]  # fmt: skip
    log = workdir / "rotel.log"
    with _running(argv, log) as process:
        _wait(lambda: _port_open(http), "rotel OTLP/HTTP port", process, log)
        time.sleep(settle_s)
        return _tree(process.pid)


def _print(name: str, measured: Tree) -> float:
    tree, distinct = measured
    total = sum(p.pss_mb for p in tree)
    anon = sum(p.anon_mb for p in tree)
    alone = "" if distinct is None else f"; alone on the machine {distinct:.0f} MB"
    print(f"{name}: {total:.0f} MB PSS in all ({anon:.0f} MB of it anonymous{alone})")
    for p in sorted(tree, key=lambda p: (p.role, p.pid)):
        print(
            f"  {p.role:<17} pid {p.pid:<8} PSS {p.pss_mb:6.1f} MB  "
            f"(anonymous {p.anon_mb:5.1f})  RSS {p.rss_mb:6.1f} MB"
        )
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--settle-s", type=float, default=5.0, help="idle after ready")
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser, processes=[1], settle_s=0.5)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        trees = {}
        for processes in args.processes:
            trees[f"rag-monitor, processes {processes}"] = tree = monitor_memory(
                processes, args.settle_s, workdir
            )
            _print(f"rag-monitor, processes {processes}, idle", tree)
        rotel = rotel_memory(args.settle_s, workdir)
        if rotel is not None:
            _print("rotel-agent (blackhole exporter), idle", rotel)
    anchor = None if rotel is None else sum(p.pss_mb for p in rotel[0])
    rows = [
        _row(name, tree, anchor, TARGET_PSS_MB.get(processes))
        for (name, tree), processes in zip(trees.items(), args.processes, strict=True)
    ]
    if rotel is not None:
        rows.append(_row("rotel-agent (blackhole exporter)", rotel, anchor, None))
    header = [
        "idle",
        "PSS, MB",
        "alone on the machine, MB",
        "PSS by process, MB",
        "PSS against rotel",
        "guard (PSS)",
    ]
    table = bench_docs.table(header, rows)
    print(table)
    if args.write_docs:
        bench_docs.write_block("docs/performance.md", "sidecar-memory", table)


def _row(name: str, measured: Tree, anchor: float | None, target: int | None) -> list[str]:
    tree, alone = measured
    total = sum(p.pss_mb for p in tree)
    by_process = ", ".join(
        f"{p.role} {p.pss_mb:.0f}" for p in sorted(tree, key=lambda p: (p.role, p.pid))
    )
    verdict = ""
    if target is not None:
        verdict = f"≤ {target}: {'met' if total <= target else 'not met'}"
    return [
        name,
        f"{total:.0f}",
        "" if alone is None else f"**{alone:.0f}**",
        by_process,
        "" if anchor is None else f"{total / anchor:.2f}×",
        verdict,
    ]


if __name__ == "__main__":
    main()
