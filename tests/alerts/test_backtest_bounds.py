"""`rag-monitor backtest` on what a careless or hostile file holds (issue 70, item 4) and
as a new user runs it (issue 69, item 6): a gap in time is jumped, a line is read no
further than its bound (plain and gzip), rows out of order are information, the
config is found where it usually is, and each service's defect rate per day is printed
with the SLO objective that holds under it."""

from __future__ import annotations

import gzip
import math
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.production_streams import DAY_S, START
from monitor.alerts.backtest import MAX_LINE_BYTES, Backtest, Event, read_rows
from monitor.config import load_config
from tests.alerts.test_backtest import CONFIG, backtest, write

INTERVAL = 60.0  # CONFIG's evaluation interval
SLO_RULE = """
    - name: quality_slo
      evaluator: local_groundedness
      slo:
        objective: 0.77
        window: 28d
        burn_rates:
          - {burn_rate: 1, long: 1d, short: 2h, severity: ticket}
"""
GOOD = {"service": "shop", "evaluator": "local_groundedness"}


def _backtest(tmp_path: Path, config: str = CONFIG) -> Backtest:
    path = tmp_path / "monitor.yaml"
    path.write_text(config)
    return Backtest(load_config(path))


def _counted(replay: Backtest, bound: int) -> list[int]:
    """Counts the engine's evaluations; more than `bound` fail the test at once (the old
    clock ran every one between two rows: days of them)."""
    calls = [0]
    evaluate = replay.engine.evaluate

    def counted() -> Any:
        calls[0] += 1
        assert calls[0] <= bound, "the clock ran every evaluation of an empty stretch"
        return evaluate()

    replay.engine.evaluate = counted  # type: ignore[method-assign]
    return calls


def test_two_rows_a_century_apart_jump_the_clock(tmp_path: Path) -> None:
    rows = write(
        tmp_path / "rows.jsonl",
        [
            {**GOOD, "time": 0, "outcome": "pass"},
            {**GOOD, "time": 99_999_999_999, "outcome": "fail"},
        ],
    )
    replay = _backtest(tmp_path, CONFIG + SLO_RULE)
    judging = replay.engine.judging_window_s
    calls = _counted(replay, int(judging / INTERVAL) + 4)
    assert list(replay.run(read_rows([rows]))) == []
    assert calls[0] > judging / INTERVAL  # what the first row's windows judge is evaluated
    assert replay.summary.rows == 2 and not replay.summary.refused
    (jump,) = replay.summary.jumps
    assert jump.startswith(f"{rows}:2: 99,999,999,999 s after the row before it")
    assert f"note: {jump}" in replay.summary.lines()


def _minutes(start: float, minutes: int, rate: float, per_minute: int = 20) -> Iterator[Any]:
    for k in range(minutes):
        fails = round(per_minute * rate)
        yield {**GOOD, "time": start + 60 * k, "passes": per_minute - fails, "fails": fails}


def _events(replay: Backtest, rows: list[Any]) -> list[tuple[float, str, str]]:
    events: list[Event] = list(replay.run(("rows", row) for row in rows))
    return [(e.time, e.status, e.alert.labels["alertname"]) for e in events]


@pytest.mark.e2e  # a few seconds: subprocesses, or a day replayed twice
def test_a_jump_sends_what_every_evaluation_would(tmp_path: Path) -> None:
    """A day, three days of nothing, then a day and a rise: the same pages and resolves,
    at the same times, whether the clock jumps the gap or runs every evaluation in it."""
    config = CONFIG.replace("baseline: {season: day}", "baseline: {season: none}") + SLO_RULE
    day = 24 * 60
    rows = [
        *_minutes(START, day, 0.2),
        *_minutes(START + 4 * DAY_S, 20 * 60, 0.2),
        *_minutes(START + 4 * DAY_S + 20 * 3600, 6 * 60, 0.5),  # the SLO counts a day first
        *_minutes(START + 4 * DAY_S + 26 * 3600, 4 * 60, 0.2),
    ]
    jumped = _backtest(tmp_path, config)
    every = _backtest(tmp_path, config)
    every._horizon = every._judging = math.inf
    expected = _events(every, rows)
    assert sorted({(status, name) for _, status, name in expected}) == [
        ("firing", "quality_slo"),
        ("firing", "regression"),
        ("resolved", "regression"),
    ]
    assert _events(jumped, rows) == expected
    assert len(jumped.summary.jumps) == 1 and not every.summary.jumps


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.jsonl.gz"])
def test_a_line_past_the_bound_is_refused_unread(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with (gzip.open if name.endswith(".gz") else open)(path, "wb") as out:
        out.write(b'{"time": 1, "service": "shop", "evaluator": "local_groundedness", ')
        out.write(b'"outcome": "pass"}\n')
        out.write(b"x" * 10_000 + b"\n")  # ten times the bound
        out.write(b'{"time": 2, "service": "shop", "evaluator": "local_groundedness", ')
        out.write(b'"outcome": "fail"}\n')
        out.write(b"y" * 5_000)  # the last line, without a newline
    replay = _backtest(tmp_path)
    list(replay.run(read_rows([path], max_line=1_000)))
    assert replay.summary.rows == 2
    assert replay.summary.refused == {"too_long": 2}
    assert replay.summary.refusals == [
        f"{path}:2: a line longer than 1,000 bytes",
        f"{path}:4: a line longer than 1,000 bytes",
    ]


@pytest.mark.e2e  # a few seconds: subprocesses, or a day replayed twice
@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
def test_a_gzip_bomb_without_newlines_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """1 GiB of one line, from a 1 MB file, under an address space of 700 MiB (the command
    needs about 300): refused by name, not a `MemoryError`."""
    member = gzip.compress(b"x" * (8 << 20), compresslevel=9)  # concatenated members inflate as one
    bomb = tmp_path / "bomb.jsonl.gz"
    with bomb.open("wb") as out:
        out.write(
            gzip.compress(
                b'{"time": 1, "service": "shop", "evaluator": '
                b'"local_groundedness", "outcome": "pass"}\n'
            )
        )
        for _ in range(128):
            out.write(member)
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    result = subprocess.run(
        [
            "prlimit",
            f"--as={700 << 20}",
            sys.executable,
            "-m",
            "monitor",
            "backtest",
            str(bomb),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MemoryError" not in result.stderr
    assert "refused: 1 too_long" in result.stderr
    assert f"{bomb}:2: a line longer than {MAX_LINE_BYTES:,} bytes" in result.stderr


@pytest.mark.e2e  # a few seconds: subprocesses, or a day replayed twice
def test_rows_out_of_order_are_information_not_refusals(tmp_path: Path) -> None:
    rows = write(
        tmp_path / "rows.jsonl",
        [
            {**GOOD, "time": START + 30, "outcome": "pass"},
            {**GOOD, "time": START, "outcome": "fail"},  # written 30 s late
            {**GOOD, "time": START + 60, "outcome": "pass"},
        ],
    )
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    result = backtest(rows, "--config", config, "--strict")
    assert result.returncode == 0, result.stderr
    assert (
        "note: 1 rows came up to 30 s after a later row (normal when evaluations run in "
        "parallel); each was replayed at the time of the row before it"
    ) in result.stderr
    assert "refused" not in result.stderr


@pytest.mark.e2e  # a few seconds: subprocesses, or a day replayed twice
def test_the_defect_rate_per_day_and_the_objective_it_allows(tmp_path: Path) -> None:
    rows = write(
        tmp_path / "rows.jsonl",
        [
            *_minutes(START, 24 * 60, 0.20),
            *_minutes(START + DAY_S, 24 * 60, 0.25),
            *_minutes(START + 2 * DAY_S, 24 * 60, 0.20),
            *_minutes(START + 3 * DAY_S, 60, 0.50),  # an hour of a partial day
        ],
    )
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    result = backtest(rows, "--config", config)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    at = lines.index(
        "defect rate per day (UTC), by rule and service; an SLO objective under which the "
        "worst full day burns 0.9 of its error budget:"
    )
    # The worst full day is 0.25: 1 - 0.25 / 0.9 = 0.722; the partial day does not decide.
    assert lines[at + 1] == (
        "  regression shop: 4 days, 0.2205 over all, worst full day 0.2500: objective 0.72"
    )
    assert lines[at + 2] == (
        "    2026-01-01 0.2000, 2026-01-02 0.2500, 2026-01-03 0.2000, 2026-01-04 0.5000"
    )


@pytest.mark.e2e  # a few seconds: subprocesses, or a day replayed twice
def test_without_config_the_usual_one_is_read_or_the_way_to_give_one_said(
    tmp_path: Path,
) -> None:
    rows = write(tmp_path / "rows.jsonl", [{**GOOD, "time": START, "outcome": "pass"}])
    command = [sys.executable, "-m", "monitor", "backtest", str(rows)]
    env = {k: v for k, v in __import__("os").environ.items() if k != "RAG_MONITOR_CONFIG"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    bare = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    if bare.returncode == 1:  # embedded defaults without rules
        assert "give the sidecar's config with --config FILE or RAG_MONITOR_CONFIG" in bare.stderr
        assert "monitor.yaml, rag-monitor.yaml, /etc/rag-monitor/config.yaml" in bare.stderr
    (tmp_path / "monitor.yaml").write_text(CONFIG)
    found = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert found.returncode == 0, found.stderr
    assert "backtest: reading the config monitor.yaml" in found.stderr
    assert "  regression shop: 1 days" in found.stderr
