"""The long fuzz run: mutation fuzzing of every input edge for a time budget.

    python bench/fuzz_long.py [--minutes 10] [--seed 1] [--out DIR] [--targets a,b]

The CI run is bounded (hypothesis, `tests/fuzz/`,
`tests/judge/test_judge_parsers.py`); this one runs as long as it is given. Each target starts
from real seeds (SDK-shaped OTLP requests, `examples/records.jsonl`,
`examples/config.yaml`, well-formed judge answers) and applies random mutations: byte
flips, inserts, deletions, duplicated slices, splices of two seeds, wrapping in deep
nesting, huge repeats. An input is a finding when the target raises anything but its own
documented error, or when one call takes over `--slow` seconds (a hang candidate).
The first input of each distinct finding (target, exception type, raising line) is saved
to `--out`; the summary prints per-target executions, findings, the slowest call and the
process's peak RSS (to spot unbounded allocation).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_smoke  # noqa: E402
from harness.reliability import Trace, export_request, trace_ids  # noqa: E402
from monitor.config import ConfigError, load_config  # noqa: E402
from monitor.extraction import extract_records  # noqa: E402
from monitor.judge import parsers  # noqa: E402
from monitor.judge.parsers import ParseError  # noqa: E402
from monitor.receivers.kafka._messages import decode_message  # noqa: E402
from monitor.receivers.otlp._wire import TooLarge, decode_request  # noqa: E402
from monitor.records import RecordError, parse_record  # noqa: E402
from monitor.spans import DecodeError, RequestSpans  # noqa: E402

LIMIT = 1 << 20


def _otlp_proto(data: bytes) -> None:
    request = decode_request(data, gzip=False, as_json=False, limit=LIMIT)
    assert isinstance(request, RequestSpans)
    extract_records(request.build().spans)


def _otlp_gzip(data: bytes) -> None:
    decode_request(data, gzip=True, as_json=False, limit=LIMIT)


def _otlp_json(data: bytes) -> None:
    decoded = decode_request(data, gzip=False, as_json=True, limit=LIMIT)
    assert not isinstance(decoded, RequestSpans)
    extract_records(decoded.spans)


def _record(data: bytes) -> None:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return  # not JSON: replay and Kafka reject it before the normaliser
    parse_record(value)


def _kafka(data: bytes) -> None:
    decode_message(data, "auto")  # documented to never raise


_CONFIG_DIR = Path(tempfile.mkdtemp(prefix="rag-fuzz-config-"))


def _config(data: bytes) -> None:
    path = _CONFIG_DIR / "config.yaml"
    path.write_bytes(data)
    load_config(path, environ={})


def _judge(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    for parse in (
        lambda t: parsers.parse_score(t, 1, 5),
        parsers.parse_yes_no,
        parsers.parse_pass_fail,
        lambda t: parsers.parse_json(t, ("score",)),
        parsers.parse_unit_score,
        parsers.parse_severity,
        lambda t: parsers.parse_chunks(t, 2),
        lambda t: parsers.parse_retrieval(t, 2),
    ):
        try:
            parse(text)
        except ParseError:
            pass


@dataclass
class Target:
    name: str
    run: Callable[[bytes], None]
    allowed: tuple[type[BaseException], ...]
    seeds: list[bytes]
    execs: int = 0
    slowest: float = 0.0
    findings: dict[str, int] = field(default_factory=dict)


def _seeds() -> dict[str, list[bytes]]:
    traces = [Trace(t) for t in trace_ids(1, 3)]
    proto = export_request(traces)
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    as_json = MessageToJson(ExportTraceServiceRequest.FromString(proto)).encode()
    records = [
        line.encode()
        for line in (REPO / "examples" / "records.jsonl").read_text().splitlines()
        if line.strip()
    ]
    answers = [
        b"The answer is supported.\nScore: 4",
        b"Answer: YES",
        b'```json\n{"score": 0.8, "feedback": "ok"}\n```',
        b'{"severity": 3, "reason": "mild"}',
        b'{"REASONING": "fine", "SCORE": "PASS"}',
        b'{"chunks": [{"id": 1, "relevant": "yes"}, {"id": 2, "relevant": "no"}]}',
        b'{"intents": [{"intent": "a", "answered": true}], "documents": [{"id": 1, "relevant": true}]}',
        b"Good.\n[RESULT] 5",
    ]
    return {
        "otlp_proto": [proto],
        "otlp_gzip": [gzip.compress(proto)],
        "otlp_json": [as_json],
        "record": records,
        "kafka": [*records, proto, as_json],
        "config": [(REPO / "examples" / "config.yaml").read_bytes(), b"{}"],
        "judge": answers,
    }


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        op = rng.random()
        at = rng.randint(0, len(data)) if data else 0
        if op < 0.25 and data:
            data[min(at, len(data) - 1)] = rng.randint(0, 255)
        elif op < 0.4:
            data[at:at] = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 8)))
        elif op < 0.55 and data:
            del data[at : at + rng.randint(1, 64)]
        elif op < 0.7 and data:
            end = min(len(data), at + rng.randint(1, 256))
            data[at:at] = data[at:end] * rng.randint(2, 50)
        elif op < 0.8:
            other = rng.choice(seeds)
            cut = rng.randint(0, len(other))
            data = data[:at] + bytearray(other[cut:])
        elif op < 0.88:
            depth = rng.choice((10, 100, 1000, 5000, 50_000))
            opener, closer = rng.choice(((b"[", b"]"), (b'{"a":', b"}"), (b"{", b"}")))
            data[at:at] = opener * depth + closer * depth
        elif op < 0.95:
            data[at:at] = rng.choice((b"Score: ", b"{", b'"', b"\\", b"\x00", b"9", b"```")) * (
                rng.randint(100, 20_000)
            )
        else:
            data = bytearray(data[: rng.randint(0, len(data))])
    return bytes(data[: 4 * LIMIT])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--slow", type=float, default=2.0, help="seconds per call: a hang candidate"
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "rag-fuzz")
    parser.add_argument("--targets", default="", help="comma-separated subset")
    args = bench_smoke.parse_args(parser, minutes=0.005, slow=60.0)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = _seeds()
    allowed: dict[str, tuple[type[BaseException], ...]] = {
        "otlp_proto": (DecodeError, TooLarge),
        "otlp_gzip": (DecodeError, TooLarge),
        "otlp_json": (DecodeError, TooLarge),
        "record": (RecordError,),
        "kafka": (),
        "config": (ConfigError,),
        "judge": (),
    }
    runners = {
        "otlp_proto": _otlp_proto,
        "otlp_gzip": _otlp_gzip,
        "otlp_json": _otlp_json,
        "record": _record,
        "kafka": _kafka,
        "config": _config,
        "judge": _judge,
    }
    chosen = [t for t in args.targets.split(",") if t] or list(runners)
    targets = [Target(n, runners[n], allowed[n], seeds[n]) for n in chosen]
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.minutes * 60
    while time.monotonic() < deadline:
        for target in targets:
            for _ in range(50):
                data = mutate(rng, target.seeds)
                started = time.perf_counter()
                try:
                    target.run(data)
                except target.allowed:
                    pass
                except Exception as exc:  # a finding
                    frame = traceback.extract_tb(exc.__traceback__)[-1]
                    key = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"
                    if key not in target.findings:
                        saved = args.out / f"{target.name}-{len(target.findings)}.bin"
                        saved.write_bytes(data)
                        print(f"FINDING {target.name}: {key}: {str(exc)[:120]} -> {saved}")
                    target.findings[key] = target.findings.get(key, 0) + 1
                took = time.perf_counter() - started
                if took > args.slow:
                    key = f"call over {args.slow:g}s"
                    saved = args.out / f"{target.name}-slow-{target.execs}.bin"
                    saved.write_bytes(data)
                    print(f"SLOW {target.name}: {took:.1f}s -> {saved}")
                    target.findings[key] = target.findings.get(key, 0) + 1
                target.slowest = max(target.slowest, took)
                target.execs += 1
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{args.minutes:g} min, seed {args.seed}, peak RSS {peak_mb:.0f} MB")
    print(f"{'target':<11} {'execs':>9} {'slowest':>9}  findings")
    for t in targets:
        found = "; ".join(f"{k} x{v}" for k, v in t.findings.items()) or "none"
        print(f"{t.name:<11} {t.execs:>9,} {t.slowest * 1000:>7.1f}ms  {found}")
    return 1 if any(t.findings for t in targets) else 0


if __name__ == "__main__":
    sys.exit(main())
