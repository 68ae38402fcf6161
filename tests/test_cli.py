"""The `rag-monitor` CLI end to end, as a subprocess: replay, malformed lines, signals, run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

GROUNDED_IDS = {"ex-01", "ex-03"}
HALLUCINATED_IDS = {"ex-02", "ex-04"}


def _results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_replay_examples_scores_hallucinations_lower(tmp_path: Path, cli: list[str]) -> None:
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [*cli, "replay", str(EXAMPLES / "records.jsonl"), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = _results(out)
    records = (EXAMPLES / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(records)
    assert "local_groundedness" in result.stdout and "mean_normalized" in result.stdout
    score = {line["request_id"]: line["results"]["local_groundedness"]["score"] for line in lines}
    assert max(score[i] for i in HALLUCINATED_IDS) < min(score[i] for i in GROUNDED_IDS)
    for line in lines:
        for verdict in line["results"].values():
            assert set(verdict) == {
                "score",
                "normalized",
                "label",
                "passed",
                "severity",
                "explanation",
                "error",
            }
            assert verdict["error"] is None
            assert 0 <= verdict["normalized"] <= 1


def test_malformed_lines_reported_counted_and_skipped(tmp_path: Path, cli: list[str]) -> None:
    data = tmp_path / "mixed.jsonl"
    good = {"request": "Warranty?", "retrieved_context": ["Two years."], "response": "Two years."}
    data.write_text(
        "\n".join(
            [
                json.dumps(good),
                "{not json",
                json.dumps({"request": "q", "retrieved_context": []}),
                json.dumps({"request": "q", "response": 42}),
                "",
                json.dumps([1, 2]),
                json.dumps({**good, "request_id": "last"}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [*cli, "replay", str(data), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0
    assert "line 2: bad JSON" in result.stderr
    assert "line 3: response: missing" in result.stderr
    assert "line 4: response: expected str, got int" in result.stderr
    assert "line 6: expected a JSON object" in result.stderr
    assert "2 records evaluated, 4 malformed lines skipped" in result.stdout
    assert len(_results(out)) == 2
    strict = subprocess.run(
        [*cli, "replay", str(data), "--strict"], capture_output=True, text=True, timeout=120
    )
    assert strict.returncode == 1


def test_replay_missing_file(cli: list[str], tmp_path: Path) -> None:
    result = subprocess.run(
        [*cli, "replay", str(tmp_path / "nope.jsonl")], capture_output=True, text=True
    )
    assert result.returncode == 1 and "no such file" in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_replay_keeps_every_evaluated_result(
    tmp_path: Path, cli: list[str], sig: signal.Signals
) -> None:
    data = tmp_path / "big.jsonl"
    context = " ".join(f"Fact {i}: the part number {i} weighs {i * 3} grams." for i in range(40))
    with data.open("w") as handle:
        for i in range(50_000):
            handle.write(
                json.dumps(
                    {
                        "request_id": f"id-{i}",
                        "request": f"What does part {i} weigh?",
                        "retrieved_context": [context],
                        "response": f"It weighs {i * 3} grams.",
                    }
                )
            )
            handle.write("\n")
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        [*cli, "replay", str(data), "--output", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while (not out.exists() or out.stat().st_size == 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "(interrupted)" in stdout
    summary = stdout.splitlines()[0]
    accepted = int(summary.split()[0])
    abandoned = int(summary.split(", ")[2].split()[0])
    lines = _results(out)
    ids = [line["request_id"] for line in lines]
    assert len(ids) == len(set(ids))
    assert 0 < len(lines) < 50_000
    assert len(lines) == accepted - abandoned


def test_run_serves_health_and_metrics_and_stops_cleanly(
    tmp_path: Path, cli: list[str], free_port: Callable[[], int]
) -> None:
    port = free_port()
    config = tmp_path / "c.yaml"
    config.write_text(
        "receivers:\n  otlp:\n"
        f"    grpc: {{endpoint: '127.0.0.1:{free_port()}'}}\n"
        f"    http: {{endpoint: '127.0.0.1:{free_port()}'}}\n"
        f"exporters:\n  prometheus: {{endpoint: '127.0.0.1:{port}'}}\n"
    )
    proc = subprocess.Popen(
        [*cli, "run", "--config", str(config)], stderr=subprocess.PIPE, text=True
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=1) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "monitor did not become ready"
                time.sleep(0.1)
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            assert response.read() == b"ok\n"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            body = response.read().decode()
        assert "# TYPE rag_monitor_evaluations_total counter" in body
        request = urllib.request.Request(
            f"{base}/metrics", headers={"Accept": "application/openmetrics-text"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "stopped;" in stderr


def test_run_with_bad_config_exits_1(tmp_path: Path, cli: list[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sampling:\n  rate: 2\n")
    result = subprocess.run([*cli, "run", "--config", str(config)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "config error: sampling.rate" in result.stderr
