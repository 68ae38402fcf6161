"""`rag-monitor backtest`: the configured rules over a verdict stream on simulated time, as a
user runs it on last month's results before turning a rule on."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import orjson

from harness.production_streams import DAY_S, START, Change, StreamSpec, stream

CONFIG = """
alerts:
  evaluation_interval_s: 60
  rules:
    - name: regression
      evaluator: local_groundedness
      baseline: {season: day}
"""


def backtest(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "backtest", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def write(path: Path, rows: list[object]) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as out:
        for row in rows:
            out.write(orjson.dumps(row) + b"\n")
    return path


def test_a_rise_in_a_gzipped_verdict_stream_prints_its_page_and_resolve_as_json(
    tmp_path: Path,
) -> None:
    spec = StreamSpec(
        rate=0.5,
        days=3.0,
        icc=0.05,
        ids=False,
        changes=(Change("spell", 2.5, 0.5, 3 / 24),),  # three hours at 0.5, then back
        seed=2,
    )
    rows = write(tmp_path / "verdicts.jsonl.gz", [row for _, row in stream(spec)])
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    result = backtest(rows, "--config", config, "--json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["status"], e["rule"], e["service"]) for e in events] == [
        ("firing", "regression", "svc-0"),
        ("resolved", "regression", "svc-0"),
    ]
    fired = events[0]["time"]
    assert "2026-01-03T12:" <= fired < "2026-01-03T13:"  # within an hour of the rise
    assert events[0]["annotations"]["description"].startswith("defect rate 0.")
    assert events[0]["annotations"]["evaluator_revision"] == "r1"
    assert "pages: regression 1" in result.stderr


def test_rows_that_cannot_be_read_are_named_and_counted(tmp_path: Path) -> None:
    good = {"time": START, "service": "shop", "evaluator": "local_groundedness"}
    rows = write(
        tmp_path / "rows.jsonl",
        [
            {**good, "passes": 90, "fails": 10},
            {**good, "outcome": "maybe"},
            {"service": "shop", "evaluator": "local_groundedness", "outcome": "fail"},
            "not an object",
            {**good, "time": START + 60, "outcome": "fail", "conversation": "s-1"},
            {**good, "time": START - DAY_S, "outcome": "pass"},  # late: replayed later
        ],
    )
    with rows.open("ab") as out:
        out.write(b"{not json\n")
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    relaxed = backtest(rows, "--config", config)
    assert relaxed.returncode == 0, relaxed.stderr
    strict = backtest(rows, "--config", config, "--strict")
    assert strict.returncode == 1
    for line in (
        "backtest: 3 rows, 102 verdicts",
        "note: 1 rows came up to 86,460 s after a later row",
        "refused: 4 invalid",
        f"{rows}:2: outcome: 'maybe' is not pass or fail",
        f"{rows}:3: time: missing (seconds since the epoch, or ISO 8601)",
        f"{rows}:4: expected a JSON object",
        f"{rows}:7: not JSON",
    ):
        assert line in strict.stderr, (line, strict.stderr)


def test_a_results_file_is_read_as_replay_writes_it(tmp_path: Path) -> None:
    """`replay --output` writes results lines with their time, conversation and each
    evaluator's revision; `backtest` reads them back."""
    records = tmp_path / "records.jsonl"
    with records.open("w") as out:
        for i in range(40):
            out.write(
                json.dumps(
                    {
                        "request_id": f"r{i}",
                        "service": "docs-qa",
                        "conversation": f"s{i // 4}",
                        "timestamp": START + 30 * i,
                        "question": "What is the capital of France?",
                        "context": ["Paris is the capital of France."],
                        "answer": "Paris." if i % 3 else "Berlin is the capital.",
                    }
                )
                + "\n"
            )
    results = tmp_path / "results.jsonl"
    replayed = subprocess.run(
        [sys.executable, "-m", "monitor", "replay", str(records), "--output", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert replayed.returncode == 0, replayed.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    (first,) = [line for line in lines if line["request_id"] == "r0"]
    assert first["time"] == START and first["conversation"] == "s0"
    assert first["results"]["local_groundedness"]["revision"].startswith("0.")
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    result = backtest(results, "--config", config)
    assert result.returncode == 0, result.stderr
    assert "backtest: 40 rows, 160 verdicts" in result.stderr  # four local evaluators each
    assert "refused" not in result.stderr


def test_a_config_without_rules_is_refused(tmp_path: Path) -> None:
    rows = write(tmp_path / "rows.jsonl", [])
    config = tmp_path / "monitor.yaml"
    config.write_text("alerts: {rules: []}\n")  # no rules written: the embedded rule
    result = backtest(rows, "--config", config)
    assert result.returncode == 1
    assert "the config has no alerts.rules to replay" in result.stderr


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "monitor.yaml"
    config.write_text(CONFIG)
    result = backtest(tmp_path / "nowhere.jsonl", "--config", config)
    assert result.returncode == 1
    assert "nowhere.jsonl: no such file" in result.stderr
