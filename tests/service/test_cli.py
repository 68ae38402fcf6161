"""The `rag-monitor` CLI end to end, as a subprocess: replay, malformed lines, signals, run,
flags and their environment variables, check-config's output, JSON logs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.children import spawn
from harness.servers import monitor_ports, stop_process
from harness.wait import CONDITION_S, SERVER_START_S, wait_until
from monitor.__main__ import FLAG_ENV, _run_loop, main
from monitor.cli.check_config import check_config
from monitor.shared.logs import JsonLogFormatter
from monitor.shared.version import __version__
from tests.conftest import EXAMPLES
from tests.service.test_docs_examples import readme_metric_lines


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without RAG_MONITOR_* variables, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    return {**base, **extra}


GROUNDED_IDS = {"ex-01", "ex-03"}
HALLUCINATED_IDS = {"ex-02", "ex-04"}


def _listening(proc: subprocess.Popen[str], log: Path, *names: str) -> dict[str, int]:
    """The ports a `rag-monitor run` started on port 0 has bound, read from its log once
    every listener in `names` has logged that it is up."""

    def logged() -> dict[str, int] | None:
        assert proc.poll() is None, f"monitor exited:\n{log.read_text()}"
        ports = monitor_ports(log.read_text(errors="replace"))
        return ports if set(names) <= ports.keys() else None

    ports = wait_until(logged, SERVER_START_S, f"{', '.join(names)} listening")
    assert ports is not None
    return ports


def _results(path: Path) -> list[dict[str, Any]]:
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
                "revision",
                "safety",
            }
            assert verdict["error"] is None
            assert verdict["revision"].startswith(__version__ + "+")
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
    # Small queues: the drain after the signal evaluates what they hold, and the point is
    # that what was evaluated is kept, not how much was queued.
    config = tmp_path / "config.yaml"
    config.write_text("pipeline: {queue_size: 50}\n")
    out = tmp_path / "out.jsonl"
    proc = spawn(
        [*cli, "replay", str(data), "--config", str(config), "--output", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: out.exists() and out.stat().st_size > 0, SERVER_START_S, "the first results")
    proc.send_signal(sig)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        stop_process(proc, 60)
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


def test_run_serves_health_and_metrics_and_stops_cleanly(tmp_path: Path, cli: list[str]) -> None:
    """Also: the config from RAG_MONITOR_CONFIG, JSON logs from RAG_MONITOR_LOG_FORMAT, and
    `--log-level` given after the subcommand."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "receivers:\n  otlp:\n    protocols:\n"
        "      grpc: {endpoint: '127.0.0.1:0'}\n"
        "      http: {endpoint: '127.0.0.1:0'}\n"
        "exporters:\n  prometheus: {endpoint: '127.0.0.1:0'}\n"
    )
    log = tmp_path / "monitor.log"
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        proc = spawn(
            [*cli, "run", "--log-level", "debug"],
            stderr=out,
            text=True,
            env=_env(RAG_MONITOR_CONFIG=str(config), RAG_MONITOR_LOG_FORMAT="json"),
        )
    try:
        port = _listening(proc, log, "metrics")["metrics"]
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            assert proc.poll() is None, "monitor exited"
            with urllib.request.urlopen(f"{base}/readyz", timeout=1) as response:
                return bool(response.status == 200)

        wait_until(ready, SERVER_START_S, "/readyz", errors=(OSError,))
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
        stop_process(proc, 60)
    stderr = log.read_text()
    assert proc.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is one object
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    messages = [line["message"] for line in lines]
    assert f"metrics on http://127.0.0.1:{port}/metrics" in messages
    assert any(m.startswith("stopped;") for m in messages)
    assert any(line["level"] == "DEBUG" for line in lines), "--log-level debug after run"
    assert lines[0]["time"].endswith("Z")


def test_the_command_ends_with_its_code_whatever_thread_is_left_running() -> None:
    """Once `main` has returned, `rag-monitor` ends with its code, its log and stdout
    flushed: a thread the shutdown left behind (an export blocked on a collector that never
    answers) does not hold the process, nor does the interpreter's teardown."""
    script = (
        "import logging, sys, threading\n"
        "import monitor.__main__ as command\n"
        "def main():\n"
        "    threading.Thread(target=threading.Event().wait).start()  # never ends\n"
        "    logging.basicConfig()\n"
        "    logging.getLogger('monitor').warning('logged')\n"
        "    sys.stdout.write('printed')  # a pipe: buffered until flushed\n"
        "    return 3\n"
        "command.main = main\n"
        "command.cli()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=CONDITION_S
    )
    assert result.returncode == 3, result.stderr
    assert result.stdout == "printed"
    assert "logged" in result.stderr


def test_the_loop_closes_without_waiting_on_a_call_the_shutdown_abandoned() -> None:
    """An evaluation still scoring in a thread at the deadline (`pipeline.processes: 0`)
    holds neither `run` nor `replay`: closing their loop does not join its executor."""
    started, release = threading.Event(), threading.Event()

    def call() -> None:
        started.set()
        release.wait()

    async def leave_a_call_running() -> int:
        running = asyncio.create_task(asyncio.to_thread(call))
        assert await asyncio.to_thread(started.wait, 30)
        assert not running.done()
        return 7

    returned: list[int] = []
    closing = threading.Thread(target=lambda: returned.append(_run_loop(leave_a_call_running())))
    closing.start()
    closing.join(30)
    try:
        assert not closing.is_alive(), "closing the loop waited on the abandoned call"
        assert returned == [7]
    finally:
        release.set()


def test_json_log_line_carries_the_exception() -> None:
    try:
        raise ValueError("disk on fire")
    except ValueError:
        record = logging.LogRecord(
            "monitor.x",
            logging.ERROR,
            __file__,
            1,
            "write failed: %s",
            ("results",),
            sys.exc_info(),
        )
    line = json.loads(JsonLogFormatter().format(record))
    assert line["level"] == "ERROR" and line["logger"] == "monitor.x"
    assert line["message"] == "write failed: results"
    assert (
        line["exception"].startswith("Traceback")
        and "ValueError: disk on fire" in line["exception"]
    )
    assert "\n" not in JsonLogFormatter().format(record)  # one line


def test_json_log_line_stays_one_line_for_unicode_line_breaks() -> None:
    """A hostile value quoted in a log message (a service name holding U+2028) must not
    split the line for readers that break at Unicode line separators."""
    name = "svc\x85a\u2028b\u2029c"
    record = logging.LogRecord("monitor.x", logging.WARNING, __file__, 1, "label %s", (name,), None)
    formatted = JsonLogFormatter().format(record)
    assert len(formatted.splitlines()) == 1
    assert json.loads(formatted)["message"] == f"label {name}"


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--log-level", "nonsense", "run"], {}, "argument --log-level: invalid choice"),
        (["run", "--log-level", "nonsense"], {}, "argument --log-level: invalid choice"),
        (["run", "--log-format", "xml"], {}, "argument --log-format: invalid choice"),
        (["run"], {"RAG_MONITOR_LOG_LEVEL": "nonsense"}, "RAG_MONITOR_LOG_LEVEL: invalid value"),
        (["run"], {"RAG_MONITOR_LOG_FORMAT": "xml"}, "RAG_MONITOR_LOG_FORMAT: invalid value"),
        (["check-config"], {}, "check-config: give a FILE or set RAG_MONITOR_CONFIG"),
    ],
)
def test_bad_flags_are_usage_errors(
    argv: list[str],
    env: dict[str, str],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In this process: the flags are refused by the entry point's parser before anything
    # else runs, so a subprocess would only add the cost of starting Python.
    for key in [k for k in os.environ if k.startswith("RAG_MONITOR_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    stderr = capsys.readouterr().err
    assert exited.value.code == 2, stderr
    assert expected in stderr and "Traceback" not in stderr


def _check_config(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, **env: str
) -> tuple[int, str, str]:
    """`check-config PATH` in this process (its exit code, stdout and stderr): the entry
    point's own path, with its exit code and streams, is
    tests/config/test_check_config.py's, in a subprocess."""
    for key in [k for k in os.environ if k.startswith("RAG_MONITOR_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = check_config(path, tuple(FLAG_ENV.values()))
    out, err = capsys.readouterr()
    return code, out, err


def test_flag_variables_do_not_collide_with_config_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"RAG_MONITOR_LOG_LEVEL": "DEBUG", "RAG_MONITOR_LOG_FORMAT": "json"}
    code, _, err = _check_config(EXAMPLES / "config.yaml", capsys, monkeypatch, **env)
    assert code == 0 and err == "", err


def test_variables_nothing_reads_are_named_by_check_config_and_run(
    cli: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unread = {"RAG_MONITOR_LOGLEVEL": "debug", "RAG_MONITOR_FOO": "1"}
    code, _, err = _check_config(EXAMPLES / "config.yaml", capsys, monkeypatch, **unread)
    assert code == 0, err
    assert err.splitlines() == [
        "RAG_MONITOR_LOGLEVEL: not read (no flag or config key has this name); "
        "did you mean RAG_MONITOR_LOG_LEVEL?",
        "RAG_MONITOR_FOO: not read (no flag or config key has this name); the flags' "
        "variables are RAG_MONITOR_LOG_LEVEL, RAG_MONITOR_LOG_FORMAT, RAG_MONITOR_CONFIG; "
        "config keys are set by RAG_MONITOR_<SECTION>__<KEY>",
    ]
    # `run` logs them before it starts (here it stops at the config's problem).
    config = tmp_path / "c.yaml"
    config.write_text("sampling:\n  rate: 2\n")
    ran = subprocess.run(
        [*cli, "--log-format", "json", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        env=_env(RAG_MONITOR_LOGLEVEL="debug"),
        timeout=CONDITION_S,
    )
    assert ran.returncode == 1
    logged = [json.loads(line) for line in ran.stderr.splitlines()]
    assert [(e["level"], e["message"].split(":")[0]) for e in logged] == [
        ("WARNING", "RAG_MONITOR_LOGLEVEL"),
        ("ERROR", "config error"),
    ], logged
    assert "did you mean RAG_MONITOR_LOG_LEVEL?" in logged[0]["message"]


def test_check_config_prints_the_effective_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "receivers:\n  otlp:\n    protocols: {grpc: }\n    auth_token_env: T\n"
        "alerts:\n  webhooks: [{url: 'https://u:pw-42@hooks.example/a'}]\n"
    )
    code, out, err = _check_config(
        config, capsys, monkeypatch, T="tok-9f2c-81d0-4e7a-b3c5", RAG_MONITOR_SAMPLING__RATE="0.5"
    )
    assert code == 0, err
    assert err == ""
    assert f"# {config}: ok" in out and "# evaluator local_groundedness" in out
    assert "tok-9f2c" not in out and "pw-42" not in out
    shown = yaml.safe_load(out)
    assert shown["receivers"]["otlp"]["auth_token"] == "<masked>"
    assert shown["receivers"]["otlp"]["http"]["enabled"] is False
    assert shown["sampling"]["rate"] == 0.5  # the override is part of the effective config
    assert shown["pipeline"]["queue_size"] == 1000  # defaults filled in


def test_check_config_problems_go_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "receivers:\n  otlp:\n    grpc:\n      endpoint: nowhere\n  kafak: {}\n"
        "evaluators:\n  - name: local_groundedness\n    threshold: 1.5\n"
    )
    code, out, err = _check_config(bad, capsys, monkeypatch)
    assert code == 1
    assert out == ""
    assert "receivers.otlp.grpc.endpoint: expected host:port" in err
    assert "receivers.kafak: unknown key" in err
    ok_endpoints = bad.read_text().replace("nowhere", "127.0.0.1:4317").replace("  kafak: {}\n", "")
    bad.write_text(ok_endpoints)
    code, out, err = _check_config(bad, capsys, monkeypatch)
    assert code == 1 and out == ""
    assert "evaluators.0.threshold: 1.5 is outside local_groundedness's scale 0..1" in err


def test_run_with_bad_config_exits_1(tmp_path: Path, cli: list[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sampling:\n  rate: 2\n")
    result = subprocess.run([*cli, "run", "--config", str(config)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "config error: sampling.rate" in result.stderr


def test_replay_summary_shows_what_each_evaluator_skipped_and_why(
    tmp_path: Path, cli: list[str]
) -> None:
    data = tmp_path / "no_context.jsonl"
    grounded = {
        "request": "Warranty?",
        "retrieved_context": ["Two years."],
        "response": "Two years.",
    }
    no_context = {"request": "Warranty?", "response": "Two years."}
    data.write_text(json.dumps(grounded) + "\n" + json.dumps(no_context) + "\n")
    result = subprocess.run(
        [*cli, "replay", str(data)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "skipped" in rows["evaluator"]
    assert rows["local_groundedness"].split()[1] == "1"  # the record with context
    assert rows["local_groundedness"].endswith("1 no context")
    assert "local_groundedness skipped a record of service" in result.stderr


def test_send_sample_gives_a_pass_and_a_fail_on_metrics(tmp_path: Path, cli: list[str]) -> None:
    """The quick start's last step: against a real `rag-monitor run`, `send-sample` makes
    one faithful and one hallucinated trace, and /metrics shows a pass and a fail."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "receivers:\n  otlp:\n    protocols:\n"
        "      grpc: {endpoint: '127.0.0.1:0'}\n"
        "      http: {endpoint: '127.0.0.1:0'}\n"
        "exporters:\n  prometheus: {endpoint: '127.0.0.1:0'}\n"
    )
    log = tmp_path / "monitor.log"
    with log.open("w") as out:  # the child keeps its own copy of the descriptor
        proc = spawn([*cli, "run", "--config", str(config)], stderr=out, text=True, env=_env())
    ports = _listening(proc, log, "metrics", "http")
    http = ports["http"]
    base = f"http://127.0.0.1:{ports['metrics']}"

    def metrics() -> str:
        assert proc.poll() is None, "monitor exited"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def groundedness(outcome: str) -> float:
        prefix = "rag_monitor_evaluations_total{"
        for line in metrics().splitlines():
            if (
                line.startswith(prefix)
                and 'service="rag-monitor-sample"' in line
                and 'evaluator="local_groundedness"' in line
                and f'outcome="{outcome}"' in line
            ):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    try:
        wait_until(lambda: bool(metrics()), CONDITION_S, "/metrics", errors=(OSError,))
        sent = subprocess.run(
            [*cli, "send-sample", "--endpoint", f"http://127.0.0.1:{http}"],
            capture_output=True,
            text=True,
            timeout=CONDITION_S,
            env=_env(),
        )
        assert sent.returncode == 0, sent.stderr
        assert "sent 2 traces" in sent.stdout
        wait_until(
            lambda: groundedness("pass") + groundedness("fail") >= 2, CONDITION_S, "two verdicts"
        )
        assert (groundedness("pass"), groundedness("fail")) == (1, 1)
        # The lines the README's quick start shows are the ones scraped, labels and all.
        scraped = set(metrics().splitlines())
        assert set(readme_metric_lines()) <= scraped, sorted(scraped)
    finally:
        stop_process(proc, 60)
    assert proc.returncode == 0, log.read_text()[-3000:]


def test_send_sample_without_a_monitor_says_so(cli: list[str], closed_port: int) -> None:
    closed = closed_port
    result = subprocess.run(
        [*cli, "send-sample", "--endpoint", f"http://127.0.0.1:{closed}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert result.returncode == 1
    # At once, in one line: no export retried with warnings until its timeout.
    assert result.stderr.splitlines() == [
        f"http://127.0.0.1:{closed}/v1/traces: the monitor did not take the sample traces "
        "(is it running?): connection refused"
    ]


def test_send_sample_to_a_server_that_is_not_the_monitor_says_so_in_one_line(
    cli: list[str],
) -> None:
    """An HTTP server that refuses the POST (501): the exporter's own ERROR line is not
    printed; send-sample's one line carries what it said."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = subprocess.run(
            [*cli, "send-sample", "--endpoint", url],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{url}/v1/traces: the monitor did not take the sample traces (is this the monitor's "
        "OTLP/HTTP endpoint?): Failed to export spans batch code: 501, reason: Unsupported "
        "method ('POST')"
    ]
