"""Decoding one OTLP log event of millions of integers: time and peak memory of the
monitor's decoding, against the protobuf library parsing the same request.

    python bench/log_event_decode.py [--values 3000000] [--runs 3]

The request is one `ExportLogsServiceRequest` (about 5 bytes per integer: 15 MB for
3,000,000) holding a GenAI `gen_ai.tool.message` event whose body is an array of that
many integers, next to the question, a document and the answer as events of the same
chat span. Each step runs in a fresh interpreter, after its imports and once the request
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

from bench._fresh import REPO, Result, in_turns, print_table, run_child

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from monitor.processors.trace import extract_traces
from monitor.spans import decode_json, decode_logs_protobuf
from monitor.spans._span import _any_value
from tests.trace.test_log_event_bounds import CHAT_SPAN, _body, _chat_trace, logs_request, numbers_value
from tests.trace.test_unreadable_values import ANSWER, DOC, QUESTION, TRACE, json_body

body = logs_request([
    ("gen_ai.user.message", TRACE, CHAT_SPAN, _body(content=QUESTION)),
    ("gen_ai.tool.message", TRACE, CHAT_SPAN, numbers_value({values})),
    ("gen_ai.tool.message", TRACE, CHAT_SPAN, _body(content=DOC, id="c1")),
    ("gen_ai.choice", TRACE, CHAT_SPAN, _body(message={{"content": ANSWER}})),
])
spans = decode_json(json_body(_chat_trace())).spans
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
step = {step!r}
if step == "parse":
    kept = ExportLogsServiceRequest.FromString(body)
elif step == "to Python":
    request = ExportLogsServiceRequest.FromString(body)
    kept = [_any_value(r.body) for r in request.resource_logs[0].scope_logs[0].log_records]
else:
    kept = decode_logs_protobuf(body)
    if step == "decode + extract":
        (records,) = extract_traces([[*spans, *kept.spans]], "http.route")
        assert records[0].metadata["unread_values"] == "too_large", records
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"s": elapsed, "mb": (peak - before) / 1024, "bytes": len(body)}}))
"""

STEPS = ("parse", "to Python", "decode", "decode + extract")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--values", type=int, default=3_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    def run(step: str) -> Result:
        return run_child(_CHILD.format(repo=str(REPO), values=args.values, step=step))

    results = in_turns(STEPS, args.runs, run)
    size = results["parse"][0]["bytes"]
    print(f"one log event of {args.values:,} integers: a request of {size / 1e6:.1f} MB")
    print_table(results)


if __name__ == "__main__":
    main()
