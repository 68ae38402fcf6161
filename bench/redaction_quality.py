"""Precision and recall of the built-in redaction detectors on the labelled sample.

    python bench/redaction_quality.py [--sample tests/data/redaction_sample.jsonl] [--show]

The sample (written for this project, `tests/data/redaction_sample.jsonl`) holds sentences
with personal data of each kind and look-alikes that are not personal data (ISBNs, order
and tracking numbers, versions, dates, timestamps, prices, UUIDs, numbers failing Luhn or
the IBAN checksum, invalid SSN ranges, MAC addresses, ...). A finding counts as a true
positive only when its kind and its exact span match a label (`harness/redaction_sample.py`):
redacting part of an IBAN as a phone number is a false `phone` and a missed `iban`.
`--show` prints every mistake.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import bench_docs, bench_smoke  # noqa: E402
from harness.redaction_sample import SAMPLE, measure  # noqa: E402
from monitor.records.redaction import BUILT_IN  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--show", action="store_true", help="print every mistake")
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(parser)
    q = measure(args.sample)
    rows = []
    for kind in BUILT_IN:
        labelled = q.tp[kind] + q.fn[kind]
        found = q.tp[kind] + q.fp[kind]
        rows.append([kind, labelled, found, f"{q.precision(kind):.3f}", f"{q.recall(kind):.3f}"])
    table = bench_docs.table(["kind", "labelled", "found", "precision", "recall"], rows)
    body = f"{q.rows} strings, {q.clean_rows} of them without personal data.\n\n{table}"
    print(body)
    if args.show:
        print()
        print("\n".join(q.mistakes) or "no mistakes")
    if args.write_docs:
        bench_docs.write_block("docs/quality.md", "redaction-quality", body)


if __name__ == "__main__":
    main()
