"""`rag-monitor` command line: run | replay | check-config.

The only module that parses argv, installs signal handlers and picks exit codes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from monitor import __version__
from monitor.config import Config, ConfigError, load_config
from monitor.exporters.summary import SummarySink
from monitor.receivers.replay import replay_file
from monitor.service import Service, tune_gc

log = logging.getLogger("monitor")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rag-monitor", description="Quality monitor for production RAG services."
    )
    parser.add_argument("--version", action="version", version=f"rag-monitor {__version__}")
    parser.add_argument("--log-level", default=os.environ.get("RAG_MONITOR_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the sidecar (OTLP/Kafka in, metrics and alerts out)")
    run.add_argument("--config", type=Path, help="YAML config (embedded defaults without it)")
    replay = sub.add_parser("replay", help="score a JSONL file of RAG records")
    replay.add_argument("file", type=Path)
    replay.add_argument("--config", type=Path)
    replay.add_argument("--output", type=Path, help="write one results line per record here")
    replay.add_argument("--strict", action="store_true", help="exit 1 if any line was malformed")
    check = sub.add_parser("check-config", help="validate a config file and explain it")
    check.add_argument("file", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.command == "check-config":
        return _check_config(args.file)
    tune_gc()
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return 1
    try:  # components check what only the environment can tell (e.g. a judge API key)
        if args.command == "run":
            return asyncio.run(_run(config))
        return _replay_main(config, args.file, args.output, args.strict)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config error: {problem}", file=sys.stderr)
        return 1


def _check_config(path: Path) -> int:
    try:
        config = load_config(path)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem)
        return 1
    print(f"{path}: ok")
    print(_explain(config))
    return 0


def _explain(config: Config) -> str:
    r = config.receivers
    lines = []
    if r.otlp.grpc.enabled:
        lines.append(f"OTLP/gRPC receiver on {r.otlp.grpc.endpoint}")
    if r.otlp.http.enabled:
        lines.append(f"OTLP/HTTP receiver on {r.otlp.http.endpoint}")
    if r.kafka.enabled:
        lines.append(
            f"Kafka receiver: topics {', '.join(r.kafka.topics)}, group {r.kafka.group_id}"
        )
    lines.append(
        f"sampling rate {config.sampling.rate:g} ({len(config.sampling.overrides)} overrides)"
    )
    for entry in config.evaluators:
        rate = "" if entry.sample_rate is None else f", sample_rate {entry.sample_rate:g}"
        lines.append(f"evaluator {entry.name}{rate}")
    lines.append(f"metrics on {config.exporters.prometheus.endpoint}")
    if config.exporters.results_file:
        lines.append(f"results appended to {config.exporters.results_file}")
    for rule in config.alerts.rules:
        lines.append(
            f"alert {rule.name}: defect rate > {rule.max_defect_rate:g} over {rule.window}"
        )
    return "\n".join(lines)


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def _run(config: Config) -> int:
    stop = asyncio.Event()
    _stop_on_signals(stop)
    service = Service(config)
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
    abandoned = await service.shutdown()
    log.info("stopped; %d evaluations completed, %d abandoned", service.stage.completed, abandoned)
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
        # The results file of replay is the one given on the command line, started afresh.
        exporters = config.exporters.model_copy(update={"results_file": str(output)})
        config = config.model_copy(update={"exporters": exporters})
        output.unlink(missing_ok=True)
    return asyncio.run(_replay(config, path, output, strict))


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
            service.stage,
            service.telemetry,
            stop=stop,
            on_problem=lambda problem: print(problem, file=sys.stderr),
            on_progress=progress.update,
        )
    finally:
        abandoned = await service.shutdown()
        progress.finish()
    interrupted = " (interrupted)" if stop.is_set() else ""
    print(
        f"{stats.accepted} records evaluated, {stats.rejected} malformed lines skipped, "
        f"{abandoned} abandoned{interrupted}"
    )
    print(summary.table())
    if output is not None:
        print(f"results: {output}")
    return 1 if strict and stats.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
