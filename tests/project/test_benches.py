"""Every script in `bench/` runs in its smoke mode (`--smoke`, `harness/bench_smoke.py`: the script's
own code path on tiny inputs) and prints what its figures are printed in, so that a bench the
docs quote cannot break unnoticed. The assertions are on the output's structure (a Markdown
table, the lines a script reports), never on a figure: a smoke run's figures mean nothing.

The scripts run as subprocesses, as a reader runs them (`python bench/NAME.py --smoke`),
several at a time (`PARALLEL`): most of their time is spent waiting on the processes they
start. Scripts that read labelled data get a small generated file (`bench_smoke.write_labelled`),
never the labelled data sets. Each case is in the e2e tier.
"""

from __future__ import annotations

import argparse
import errno
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import bench_smoke
from tests.conftest import REPO

BENCH = REPO / "bench"
# Scripts run at once: most of a smoke run waits on the servers and processes it starts.
PARALLEL = 4
# The longest smoke runs, started first so that the others fill the time beside them.
LONGEST = ("all.py", "install_size.py", "judge_real_model.py", "judge_tlm.py")
# A Markdown table: a header row, then its separator.
TABLE = r"^\|.*\|\n\|(---\|)+$"
# Tries at starting one script's process (see `_run`).
SPAWN_TRIES = 3


@dataclass(frozen=True)
class Case:
    """One smoke run: the script, its arguments (`{data}`: a labelled JSONL file,
    `{data_dir}`: a folder of them named as the data sets, `{tmp}`: a folder of the run's
    own), and what its output must show (a multi-line regular expression)."""

    script: str
    args: tuple[str, ...] = ()
    shows: str = TABLE
    needs: str = ""  # an executable on PATH, without which the case is skipped

    @property
    def id(self) -> str:
        return " ".join((self.script, *self.args))


CASES = (
    Case("alert_attribution.py"),
    Case("alert_fleet.py", needs="prometheus"),
    Case("alert_production.py"),
    Case("alert_regression.py", ("{data}",)),
    Case("alert_slo.py"),
    Case("all.py"),
    Case("audit_estimate.py", ("{data}", "--cache", "{tmp}/verdicts.json")),
    Case("audit_state_stall.py"),
    Case("config_load.py"),
    Case("detector_ablation.py", ("{data}",)),
    Case("detector_chinese.py", (), r"^seen: failing at"),
    Case("detector_compare.py", ("--data-dir", "{data_dir}", "--halueval", "{data_dir}")),
    Case("detector_quality.py", ("{data}",), r"AUROC[\s\S]*^speed: [\s\S]*^memory: "),
    Case("extraction_linear.py"),
    Case("fuzz_long.py", ("--out", "{tmp}/fuzz"), r"^target +execs +slowest +findings$"),
    Case("hostile_prompt_run.py", (), r"^honest traces sent [\d.]+ s or more before the stop"),
    Case("hostile_records_rss.py"),
    Case("ingest.py", (), r"^reference +raw protobuf parse[\s\S]*^otlp_http +accepted"),
    Case("ingest.py", ("--sampling-cost", "1")),
    Case("install_size.py"),
    Case("judge_pipeline.py", ("--data", "{data}")),
    Case("judge_real_model.py"),
    Case("judge_tlm.py", ("{data}",)),
    Case("kafka_ingest.py", ("--side-by-side",), needs="noida-db"),
    Case("kafka_join_leave.py", (), r"^settled in \d+ runs of \d+"),
    Case("label_squatting.py"),
    Case("large_records_rss.py"),
    Case("local_scoring.py", ("--data-dir", "{data_dir}")),
    Case("log_event_decode.py", (), r"^step +time +x parse +peak RSS +x parse$"),
    Case("metrics_endpoint.py"),
    Case("open_traces_memory.py"),
    Case("production_streams.py", ("{tmp}/streams.jsonl.gz",), r"1 services, [\d.]+ days"),
    Case("redaction_quality.py"),
    Case("results_file.py"),
    Case("scorecard.py"),
    Case("sidecar_cost.py"),
    Case("sidecar_memory.py"),
    Case("sidecar_steady_memory.py"),
    Case("sliced_streams.py", ("{tmp}/sliced.jsonl.gz",), r"\d+ results lines over"),
    Case("worker_pool.py"),
)
# Scripts without a smoke mode, and why.
NOT_SMOKED = {
    "test_env_size.py": "it measures downloading the test environments from the package "
    "index into empty caches (GBs over the network): no part of it is small",
}
# What a smoke run writes besides its output: gzip-compressed JSON lines.
WRITES = {"production_streams.py": "streams.jsonl.gz", "sliced_streams.py": "sliced.jsonl.gz"}


def _judge_model_missing() -> str:
    from harness.llama_server import available

    return available() or ""


def _skip_reason(case: Case) -> str:
    if case.needs and shutil.which(case.needs) is None:
        return f"{case.needs} is not on PATH (bash tests/run.sh puts the test tools there)"
    if case.script in ("judge_real_model.py", "judge_tlm.py"):
        return _judge_model_missing()
    return ""


@dataclass(frozen=True)
class Ran:
    returncode: int
    output: str
    tmp: Path


def _run(case: Case, data: Path, data_dir: Path, tmp: Path) -> Ran:
    tmp.mkdir(parents=True)
    words = [a.format(data=data, data_dir=data_dir, tmp=tmp) for a in case.args]
    command = [sys.executable, str(BENCH / case.script), bench_smoke.FLAG, *words]
    for _ in range(SPAWN_TRIES - 1):
        try:
            return _spawn(command, tmp)
        except OSError as error:
            # A spawn that fails with EFAULT never ran the script: some virtual machines'
            # kernels return it from exec now and then while several threads spawn at once.
            if error.errno != errno.EFAULT:
                raise
    return _spawn(command, tmp)


def _spawn(command: list[str], tmp: Path) -> Ran:
    done = subprocess.run(
        command,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    return Ran(done.returncode, done.stdout, tmp)


@pytest.fixture(scope="module")
def smoke_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Ran]]]:
    """Every selected case started at once (`PARALLEL` at a time); each test waits on its own."""
    root = tmp_path_factory.mktemp("benches")
    data = bench_smoke.write_labelled(root / "labelled.jsonl")
    data_dir = bench_smoke.write_data_dir(root / "data")
    selected = [
        item.callspec.params["case"]
        for item in request.session.items
        if item.path == request.path
        and hasattr(item, "callspec")
        and "case" in item.callspec.params
    ]
    selected.sort(key=lambda case: case.script not in LONGEST)
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {
            case.id: pool.submit(_run, case, data, data_dir, root / f"run{i}")
            for i, case in enumerate(selected)
            if not _skip_reason(case)
        }
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.e2e
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_bench_smoke_run_prints_its_tables(case: Case, smoke_runs: dict[str, Future[Ran]]) -> None:
    reason = _skip_reason(case)
    if reason:
        pytest.skip(reason)
    ran = smoke_runs[case.id].result()
    assert ran.returncode == 0, f"{case.id} --smoke exited {ran.returncode}:\n{ran.output[-6000:]}"
    assert re.search(case.shows, ran.output, re.M), (
        f"{case.id} --smoke printed no {case.shows!r}:\n{ran.output[-6000:]}"
    )
    if case.script in WRITES:
        with gzip.open(ran.tmp / WRITES[case.script], "rt", encoding="utf-8") as written:
            assert written.readline().startswith("{"), f"{case.id} wrote no JSON lines"


def test_every_bench_script_has_a_smoke_run() -> None:
    """A new script in bench/ gets a case here (or a stated reason in NOT_SMOKED), and each
    case's script parses `--smoke` through `harness/bench_smoke.py`."""
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    smoked = {case.script for case in CASES}
    assert scripts == smoked | set(NOT_SMOKED), (
        f"no smoke case: {sorted(scripts - smoked - set(NOT_SMOKED))}; "
        f"not in bench/: {sorted((smoked | set(NOT_SMOKED)) - scripts)}"
    )
    assert not smoked & set(NOT_SMOKED)
    for script in smoked:
        source = (BENCH / script).read_text(encoding="utf-8")
        assert "bench_smoke.parse_args(" in source, f"{script} does not parse --smoke"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=25)
    parser.add_argument("--days", type=float, default=365.0)
    parser.add_argument("--write-docs", action="store_true")
    return parser


def test_smoke_flag_makes_the_tiny_sizes_the_defaults() -> None:
    plain = bench_smoke.parse_args(_parser(), [], trials=1, days=0.1)
    assert (plain.smoke, plain.trials, plain.days) == (False, 25, 365.0)
    smoke = bench_smoke.parse_args(_parser(), ["--smoke"], trials=1, days=0.1)
    assert (smoke.smoke, smoke.trials, smoke.days) == (True, 1, 0.1)
    given = bench_smoke.parse_args(_parser(), ["--smoke", "--trials", "3"], trials=1, days=0.1)
    assert (given.trials, given.days) == (3, 0.1)


def test_smoke_run_never_writes_the_docs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_smoke.parse_args(_parser(), ["--smoke", "--write-docs"], trials=1)
    assert "never writes the docs" in capsys.readouterr().err


def test_labelled_fixture_has_the_data_sets_shape(tmp_path: Path) -> None:
    lines = (
        bench_smoke.write_labelled(tmp_path / "l.jsonl").read_text(encoding="utf-8").splitlines()
    )
    rows = [json.loads(line) for line in lines]
    assert {"request", "retrieved_context", "response", "label"} <= set(rows[0])
    hallucinated = sum(r["label"]["hallucinated"] for r in rows)
    assert 0 < hallucinated < len(rows) / 2
    assert len({r["request_id"] for r in rows}) == len(rows)
    assert os.path.exists(bench_smoke.write_data_dir(tmp_path / "d") / bench_smoke.HALUEVAL_QA)
