"""Decoding one OTLP log event of millions of integers: time and peak memory of the
monitor's decoding, against the protobuf library parsing the same request.

    python bench/log_event_decode.py [--values 3000000] [--runs 3]

The request is one `ExportLogsServiceRequest` (about 5 bytes per integer: 15 MB for
3,000,000) holding a GenAI `gen_ai.tool.message` event whose body is an array of that
many integers, next to the question, a document and the answer as events of the same
chat span. Each step runs in a fresh interpreter (`bench/_log_event_step.py`), after its imports and once the request
is built, so that its peak RSS (`ru_maxrss`) above that point is its own:

- `parse`: `ExportLogsServiceRequest.FromString` (the reference: what any receiver that
  reads the request with the protobuf library pays);
- `to Python`: that parse and every value of the body made a Python object (what the
  receivers did before log events stayed serialized);
- `decode`: `decode_logs_protobuf`, what the OTLP receivers' decode thread does: every
  other request waits behind it;
- `decode + extract`: that, and extracting the trace's record (done for sampled traces,
  in an evaluation worker process), where the body is found to hold too many values and
  is left out.

Prints the median time and peak RSS of each step and their ratios to `parse`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._fresh import Result, in_turns, print_table, run_child
from harness import bench_smoke

STEPS = ("parse", "to Python", "decode", "decode + extract")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=3_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = bench_smoke.parse_args(parser, values=20_000, runs=1)

    def run(step: str) -> Result:
        return run_child("bench._log_event_step", step, str(args.values))

    results = in_turns(STEPS, args.runs, run)
    size = results["parse"][0]["bytes"]
    print(f"one log event of {args.values:,} integers: a request of {size / 1e6:.1f} MB")
    print_table(results)


if __name__ == "__main__":
    main()
