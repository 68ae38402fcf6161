"""`rag-monitor` command line: run | replay | check-config | backtest | send-sample | explain.

The only module that parses argv, installs signal handlers and picks exit codes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import signal
import sys
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

import orjson

# First: they set the BLAS thread count and gRPC's own logging before anything below
# imports numpy or gRPC.
# isort: off
import monitor.shared.threads  # noqa: F401
from monitor.shared.logs import configure_logging

# isort: on
from monitor.cli.check_config import (
    check_config,
    config_warnings,
    convention_keys,
    judge_credentials,
)
from monitor.config import Config, ConfigError, load_config
from monitor.evaluators.registry import evaluator_problems
from monitor.receivers.replay import replay_file
from monitor.receivers.replay_summary import SummarySink, skipped_counts
from monitor.service import Service, tune_gc
from monitor.shared.version import __version__

log = logging.getLogger("monitor")

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("text", "json")
# A flag's environment variable is `RAG_MONITOR_` + its name, with no `__` in it: a
# variable with `__` (`RAG_MONITOR_SAMPLING__RATE`) is a config key (monitor.config).
FLAG_ENV = {
    "log_level": "RAG_MONITOR_LOG_LEVEL",
    "log_format": "RAG_MONITOR_LOG_FORMAT",
    "config": "RAG_MONITOR_CONFIG",
}


def _logging_flags(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None) -> None:
    """`--log-level` and `--log-format`; given both before and after the subcommand, so
    the subcommand's copies default to "not given" (`environ` None) and never overwrite."""

    def default(dest: str, fallback: str) -> str:
        if environ is None:
            return argparse.SUPPRESS
        return environ.get(FLAG_ENV[dest]) or fallback

    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        default=default("log_level", "info"),
        help=f"log threshold (env {FLAG_ENV['log_level']}; default info)",
    )
    parser.add_argument(
        "--log-format",
        type=str.lower,
        choices=LOG_FORMATS,
        default=default("log_format", "text"),
        help=f"text, or json: one object per line (env {FLAG_ENV['log_format']})",
    )


def _parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-monitor",
        description="Quality monitor for production RAG services.",
        epilog="Every flag can be set by its environment variable (RAG_MONITOR_LOG_LEVEL, "
        "RAG_MONITOR_LOG_FORMAT, RAG_MONITOR_CONFIG); a flag given wins. Config keys are "
        "set by RAG_MONITOR_<SECTION>__<KEY>.",
    )
    parser.add_argument("--version", action="version", version=f"rag-monitor {__version__}")
    _logging_flags(parser, environ)
    config_default = environ.get(FLAG_ENV["config"]) or None
    config_help = f"YAML config (env {FLAG_ENV['config']}; embedded defaults without it)"
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run the sidecar (OTLP/Kafka in, metrics and alerts out)",
        description="Run the sidecar: take traces over OTLP (and Kafka), score a sample of "
        "them, serve metrics on the metrics port and send alerts. SIGTERM or SIGINT stops "
        "intake, drains and exits 0.",
    )
    run.add_argument("--config", type=Path, default=config_default, help=config_help)
    replay = sub.add_parser(
        "replay",
        help="score a JSONL file of RAG records or of OTLP/JSON traces (gzip too)",
        description="Score a file of RAG records or OTLP/JSON traces through the same "
        "pipeline as run, and print a summary per evaluator.",
    )
    replay.add_argument("file", type=Path)
    replay.add_argument("--config", type=Path, default=config_default, help=config_help)
    replay.add_argument("--output", type=Path, help="write one results line per record here")
    replay.add_argument("--strict", action="store_true", help="exit 1 if any line was malformed")
    check = sub.add_parser(
        "check-config",
        help="validate a config file; print the effective configuration (secrets masked)",
        description="Validate a config file: every problem on stderr as "
        "'path.to.key: what is wrong' (exit 1), or the effective configuration on stdout, "
        "defaults filled in and secrets masked.",
    )
    check.add_argument(
        "file", type=Path, nargs="?", default=config_default, help=f"default ${FLAG_ENV['config']}"
    )
    check.add_argument(
        "--probe",
        action="store_true",
        help="also have each judge evaluator judge one sample record and read its verdict",
    )
    backtest = sub.add_parser(
        "backtest",
        help="run the alert rules over a timestamped verdict stream (results files or "
        "verdict rows, gzip too) on simulated time; print each page and resolve",
        description="Replay results files (or verdict rows) through the config's alert "
        "rules on simulated time, each row at its `time`: every page and resolve the rules "
        "would have sent on stdout, the rows read, the pages per rule and the rows refused "
        "on stderr.",
    )
    backtest.add_argument("files", type=Path, nargs="+", metavar="FILE")
    backtest.add_argument(
        "--config",
        type=Path,
        default=config_default,
        help=f"YAML config (env {FLAG_ENV['config']}; without it the first of "
        "monitor.yaml, rag-monitor.yaml and /etc/rag-monitor/config.yaml that exists, else "
        "the embedded defaults)",
    )
    backtest.add_argument("--json", action="store_true", help="one JSON object per event")
    backtest.add_argument(
        "--strict", action="store_true", help="exit 1 if any row could not be read"
    )
    sample = sub.add_parser(
        "send-sample",
        help="send one faithful and one hallucinated sample RAG trace to a running monitor",
        description="Send one faithful and one hallucinated sample RAG trace over OTLP/HTTP "
        "to a running monitor; exits 1 if it does not take them.",
    )
    sample.add_argument(
        "--endpoint",
        help="the monitor's OTLP/HTTP address (default $OTEL_EXPORTER_OTLP_ENDPOINT, "
        "else http://127.0.0.1:4318)",
    )
    explain = sub.add_parser(
        "explain",
        help="say what each span of a trace was taken as, what its record lacks and why, "
        "and propose an extraction.conventions entry that reads it",
        description="For each trace in an OTLP/JSON file (one ExportTraceServiceRequest "
        "per line, as the Collector's file exporter writes it; gzip too): what each span "
        "was taken as (role, the convention that declared it, the values read), the records "
        "the extraction makes, what they lack and why, and, when something is missing, a "
        "proposed extraction.conventions entry with the record it makes. Or the same for "
        "the traces whose spans a running monitor's /debug/records keeps.",
    )
    where = explain.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "file", type=Path, nargs="?", help="OTLP/JSON traces, one request per line (.gz too)"
    )
    where.add_argument(
        "--from-debug",
        metavar="URL",
        help="read the traces from the /debug/records of the monitor whose metrics port is "
        "at URL (e.g. http://127.0.0.1:9464)",
    )
    explain.add_argument("--trace-id", help="explain this trace only (32 hex digits)")
    explain.add_argument(
        "--config", type=Path, default=config_default, help=config_help + ": its conventions"
    )
    for subparser in (run, replay, check, backtest, sample, explain):
        _logging_flags(subparser, None)
    return parser


def _parse_args(argv: list[str] | None, environ: Mapping[str, str]) -> argparse.Namespace:
    parser = _parser(environ)
    args = parser.parse_args(argv)
    # argparse checks `choices` for values given on the command line only.
    for dest, allowed in (("log_level", LOG_LEVELS), ("log_format", LOG_FORMATS)):
        value = getattr(args, dest).lower()
        if value not in allowed:
            parser.error(
                f"{FLAG_ENV[dest]}: invalid value {value!r} (choose from {', '.join(allowed)})"
            )
        setattr(args, dest, value)
    if args.command == "check-config" and args.file is None:
        parser.error(f"check-config: give a FILE or set {FLAG_ENV['config']}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv, os.environ)
    configure_logging(args.log_level, args.log_format)
    if args.command == "check-config":
        return check_config(args.file, tuple(FLAG_ENV.values()), args.probe)
    if args.command == "send-sample":
        return _send_sample(args.endpoint)
    if args.command == "explain":
        return _explain(args.file, args.from_debug, args.trace_id, args.config)
    tune_gc()
    if args.command == "backtest" and args.config is None:
        args.config = _usual_config()
    try:
        config = load_config(
            args.config,
            evaluator_check=evaluator_problems,
            on_unread=lambda line: log.warning("%s", line),
            read_elsewhere=tuple(FLAG_ENV.values()),
            checks=(judge_credentials, convention_keys),
        )
        if args.command == "run":
            # What check-config warns of (a token sent in the clear, no context rule) is
            # said where a sidecar started without check-config is read: its log.
            for line in config_warnings(config):
                log.warning("config: %s", line)
            return _run_loop(_run(config))
        if args.command == "backtest":
            return _backtest(config, args.files, as_json=args.json, strict=args.strict)
        return _replay_main(config, args.file, args.output, args.strict)
    except ConfigError as exc:
        # Also what components find at start (e.g. a judge API key that is not set).
        for problem in exc.problems:
            log.error("config error: %s", problem)
        return 1


# Where `backtest` looks for the sidecar's config when given none: the README's name, the
# project's, and where the Helm chart mounts it.
USUAL_CONFIGS = ("monitor.yaml", "rag-monitor.yaml", "/etc/rag-monitor/config.yaml")


def _usual_config() -> Path | None:
    for name in USUAL_CONFIGS:
        if Path(name).is_file():
            log.info("backtest: reading the config %s (--config FILE reads another)", name)
            return Path(name)
    log.info(
        "backtest: no config given, none of %s exists: the embedded defaults' rules",
        ", ".join(USUAL_CONFIGS),
    )
    return None


def _explain(
    path: Path | None, url: str | None, trace_id: str | None, config_path: Path | None
) -> int:
    """`explain`, reading the config's own conventions (exit 1 on a config problem)."""
    from monitor.cli.explain import explain, explain_from_debug

    try:
        config = load_config(config_path, read_elsewhere=tuple(FLAG_ENV.values()))
    except ConfigError as exc:
        for problem in exc.problems:
            log.error("config error: %s", problem)
        return 1
    if url is not None:
        return explain_from_debug(url, trace_id, config.extraction.conventions)
    assert path is not None  # argparse asks for one of them
    return explain(path, trace_id, config.extraction.conventions)


def _backtest(config: Config, files: list[Path], *, as_json: bool, strict: bool) -> int:
    """Pages and resolves on stdout, one per line (JSON with `as_json`); the summary on
    stderr. Exit 1 when a file is missing, when no rule is configured, or with `strict`
    when a row was refused."""
    from monitor.alerts.backtest import Backtest, read_rows

    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        print(f"{', '.join(missing)}: no such file", file=sys.stderr)
        return 1
    if not config.alerts.rules:
        print(
            "backtest: the config has no alerts.rules to replay; give the sidecar's config "
            f"with --config FILE or {FLAG_ENV['config']} (without either, backtest reads the "
            f"first of {', '.join(USUAL_CONFIGS)} that exists)",
            file=sys.stderr,
        )
        return 1
    replay = Backtest(config)
    for event in replay.run(read_rows(files)):
        print(orjson.dumps(event.as_json()).decode() if as_json else event.text(), flush=True)
    for line in replay.summary.lines():
        print(line, file=sys.stderr)
    return 1 if strict and replay.summary.refused else 0


class _UnjoinedExecutor(ThreadPoolExecutor):
    """The loop's default executor (`asyncio.to_thread`), which the loop does not wait on as
    it closes: a call the shutdown deadline abandoned (an evaluation still scoring in a
    thread, `pipeline.processes: 0`) would otherwise hold `asyncio.run` until it returned.
    New calls are still refused once the loop has shut the executor down."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)


def _run_loop(main: Coroutine[Any, Any, int]) -> int:
    """`asyncio.run(main)`, whose closing waits on no thread the shutdown abandoned."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(_UnjoinedExecutor(thread_name_prefix="asyncio"))
        return runner.run(main)


def cli() -> NoReturn:
    """The `rag-monitor` command: `main`, then the process ends at once with its code.

    The service's shutdown has by then closed the files, stopped the worker processes and
    closed the listeners, within `pipeline.shutdown_timeout_s`, and abandoned what did not
    finish in time (counted); what the interpreter would still do on its way out is bound
    by no deadline. It joins the threads left running (`concurrent.futures` joins its
    executors' threads at exit, however long an abandoned call takes) and then tears down
    every module and frees the whole heap: CPU work that grows with what is loaded (about
    0.4 s of CPU with the models and gRPC loaded, several seconds of wall time on a machine
    whose cores are busy), after the deadline, for nothing the process leaves behind. So
    the log and stdio are flushed and the process exits there, skipping both (`os._exit`)."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # closed, or its reader gone: nothing more can reach it
    os._exit(code)


def _send_sample(endpoint: str | None) -> int:
    from monitor.cli.send_sample import default_endpoint, send_sample

    try:
        sent = send_sample(endpoint or default_endpoint())
    except ConnectionError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(
        f"sent 2 traces to {sent.endpoint}: faithful {sent.faithful_trace_id}, "
        f"hallucinated {sent.hallucinated_trace_id}\n"
        "see the verdicts: curl -s 127.0.0.1:9464/metrics | grep "
        "'evaluations_total{evaluator=\"local_groundedness\".*rag-monitor-sample'"
    )
    return 0


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def _run(config: Config) -> int:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    service = Service(config)
    # SIGHUP reopens the files the monitor writes (after log rotation), as daemons do.
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, service.reopen_files)
    try:
        await service.start()
    except OSError as exc:
        log.error("cannot start: %s", exc)
        return 1
    log.info("rag-monitor %s running; SIGTERM or SIGINT stops it", __version__)
    await stop.wait()
    log.info(
        "stopping: draining in-flight evaluations (deadline %.0fs)",
        config.pipeline.shutdown_timeout_s,
    )
    await service.shutdown()
    log.info(
        "stopped; %d sampled traces and records finished, %d abandoned",
        service.stage.completed,
        service.abandoned,
    )
    return 0


class _Progress:
    """A one-line progress bar on the terminal (only when stdout is one)."""

    def __init__(self) -> None:
        self.enabled = sys.stdout.isatty()

    def update(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        width = 30
        filled = int(width * done / total)
        bar = "#" * filled + "." * (width - filled)
        sys.stdout.write(f"\r[{bar}] {100 * done / total:5.1f}%")
        sys.stdout.flush()

    def finish(self) -> None:
        if self.enabled:
            sys.stdout.write("\n")


def _replay_main(config: Config, path: Path, output: Path | None, strict: bool) -> int:
    if not path.is_file():
        print(f"{path}: no such file", file=sys.stderr)
        return 1
    if output is not None:
        # The results file of replay is the one given on the command line, started afresh;
        # the operator asked for this file of their own records, explanations and all.
        exporters = config.exporters.model_copy(
            update={"results_file": str(output), "include_explanations": True}
        )
        config = config.model_copy(update={"exporters": exporters})
        output.unlink(missing_ok=True)
    return _run_loop(_replay(config, path, output, strict))


async def _replay(config: Config, path: Path, output: Path | None, strict: bool) -> int:
    summary = SummarySink()
    service = Service(config, serve_http=False, with_receivers=False, extra_sinks=[summary])
    stop = asyncio.Event()
    _stop_on_signals(stop)
    progress = _Progress()
    await service.start()
    try:
        stats = await replay_file(
            path,
            service.trace,
            service.telemetry,
            stop=stop,
            on_problem=lambda problem: print(problem, file=sys.stderr),
            on_progress=progress.update,
        )
    finally:
        # A backfill evaluates everything it read, however slow the judges; only an
        # interrupted replay stops at pipeline.shutdown_timeout_s, as `run` does.
        await service.shutdown(None if stop.is_set() else math.inf)
        progress.finish()
    abandoned = service.abandoned
    interrupted = " (interrupted)" if stop.is_set() else ""
    if stats.kind == "otlp":
        records = sum(
            sample.value
            for family in service.telemetry.registry.collect()
            for sample in family.samples
            if sample.name == "rag_monitor_records_total"
        )
        print(
            f"{int(records)} records evaluated from {stats.accepted} OTLP requests, "
            f"{stats.rejected} malformed lines skipped, {abandoned} abandoned{interrupted}"
        )
    else:
        print(
            f"{stats.accepted} records evaluated, {stats.rejected} malformed lines skipped, "
            f"{abandoned} abandoned{interrupted}"
        )
    print(summary.table(skipped_counts(service.telemetry.registry)))
    if output is not None:
        print(f"results: {output}")
    failed = summary.failed_evaluators()
    for name, errors in failed.items():
        print(f"{name}: all {errors} results were errors (the log says why)")
    return 1 if failed or (strict and stats.rejected) else 0


if __name__ == "__main__":
    cli()
