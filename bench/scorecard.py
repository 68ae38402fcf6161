"""The regression rule's statistical scorecard, on simulated time from seeded streams.

    python bench/scorecard.py [--trials 9] [--healthy-days 1] [--seed 1] [--only ROW ...]
        [--write-golden] [--write-docs]

Every row drives the sidecar's engine (`AlertEngine.from_config`, the default regression
rule `baseline: {}` unless a row says otherwise, one false page per 90 days, an evaluation
every 15 s) through `rag-monitor backtest`'s code (`monitor.alerts.backtest.Backtest`) on
a clock that follows the rows: nothing waits on real time, so a service-day costs seconds
of CPU. A service with history first gets **four weeks of it**, as hourly counts (each
hour's verdicts Poisson, its defects binomial about the stream's rate at that hour, the
hour's rate scattered by the stream's design effect so that the history disperses as the
stream does), judged once a day, the last 13 of its hours as rows where the stream has ids (conversations, at 1 a second at
most: the hours the correlation within conversations needs to be measured), the engine
then saved and restored into the backtest (`AlertEngine.snapshot`, `restore`) that
replays each run's rows; the runs of a stream share its warm-up.

Rows (`ROWS`), each over `--trials` seeded runs where it times a page:

- **plain**: independent verdicts at 1 and 10 a second, base 0.10 and 0.35, each on its
  own (no id) and, at base 0.10, in conversations of 5 to 20 turns with ids
  (`harness/production_streams.py`, intraclass correlation 0); half an hour healthy, then x1.5 or x2: the median (worst) of
  the time to page over the **information limit** (`bench/alert_regression.py`: the time a
  test that knew both rates would need, `ln(rate x budget)` nats over the divergence per
  verdict), and pages before the rise.
- **young**: the plain case's independent verdicts at 0.10 without ids from a history of 4
  and of 14 days instead of four weeks, each run warmed up from its own seed (a young
  history's dispersion is as much its own as its verdicts are): x2 at 0.2, 1 and 10 a
  second and x1.5 at 0.2 and 1, half an hour healthy first; page / limit (x1.5: within a
  day at least), and of the runs not paged those whose expectation reads above 0.12 at
  the end (the rise learned into the level).
- **slow**: 0.10 to 0.15 at 0.2 a second (the limit 1.6 h): paged within a day, or not;
  the expectation at the page or at the day's end (whether the rise was learned).
- **healthy**: `--healthy-days` of healthy rows per stream: the plain streams at 1 and 10
  a second (verdicts summed per second) and the production-shaped ones whose ids are no
  conversations (a constant id, the pod, a recycled pool, the user) or that burst 2,000
  identical requests in ten minutes eight times a day (without ids, and each with a fresh session
  id): false pages per service-day.
- **corners**: x2 on the constant-id and user-id streams at 1 a second, page / limit.
- **fresh**: a rule started with no history (the default rule, and a compressed one:
  window 30s, baseline 3m of 240 verdicts, a false page an hour) on 0.10 that rises x3 from its 3rd minute, at 1, 2 and 10 a second: minutes to
  page and the expectation the page states.
- **changeover**: an evaluator's switch from revision "a" (reading the healthy service at
  0.20) to "b" (0.15; the two disagree on about a sixth of the records) after four weeks of
  "a", records at 1 a second one at a time (`harness/simulated_changeover.py`): with a day
  of "b" in shadow at a share of 0.2 (the default) and 0.5, and with no shadow; x2 a
  quarter hour (no shadow: 20 min) after the switch, page / limit at a base of 0.15,
  beside the same streams with no change at all; and each switch without a rise, its false
  pages from the shadow's day to 6 h after the switch.
- **upgrade**: a monitor upgrade that changed an evaluator's verdicts, through a confusion
  model (`harness/simulated_upgrade.py`: a detector at a false-positive rate of 0.30 and a
  true-positive rate of 0.75, a judge at 0.10 / 0.85, the detector with its threshold moved
  at 0.20 / 0.60, on a true rate of 0.20 at 02:00 and 0.40 at 14:00, 1 verdict a second,
  after four weeks of the old one): the day the release shadows itself (the old revision
  of record, the new one scoring 0.2 in shadow), the switch at 02:00 or 14:00, then x2 of the
  true rate a quarter hour later, page / limit of the new revision's reading; beside it
  the same release without the previous revision at night, and switches without a rise.
- **night**: a switch at 02:00 after a day in shadow to a revision that reads the day's
  swing with another slope (the same model), x2 of the true rate 3 h later.
- **sidecar tests**: what the alerting end-to-end tests once asserted of a real sidecar fed
  in real time, each with its test's rule, evaluation interval and stream, from a fresh
  start (`harness/simulated_sidecar_tests.py`): the compressed rule at 8/s with a burst of
  240 identical failing requests, then x2.5; the same rule through a switch to a stricter
  revision 45 s in, then x2.5; default settings on 30 s / 3 min windows at 24/s; the fleet
  rule on a healthy fleet; cohorts by version with v2 at x2.5. With a rise: page / limit
  (cohorts: and any page of the version that did not rise); without: false pages in 20
  minutes of each start.

`--write-golden` writes every run's numbers to `bench/scorecard.json`, which
`tests/alerts/test_scorecard.py` recomputes in part and compares; `--write-docs` writes the
tables to docs/quality.md, and with `--from-golden` the golden file's, computing nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import bench_docs, bench_smoke
from harness.scorecard import GOLDEN, HEADERS, cells, key, run_cell, shown, tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=9, help="runs per timed cell")
    parser.add_argument("--healthy-days", type=float, default=1.0, help="per healthy stream")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=list(HEADERS), nargs="*")
    parser.add_argument("--cell", default="", help="only the cells whose name has this")
    parser.add_argument("--write-golden", action="store_true", help=f"write {GOLDEN.name}")
    parser.add_argument(
        "--from-golden",
        action="store_true",
        help=f"print (and with --write-docs write) the tables of {GOLDEN.name}, computing nothing",
    )
    bench_docs.add_flag(parser)
    # One cell, the cheapest: tests/alerts/test_scorecard.py checks the statistics.
    args = bench_smoke.parse_args(
        parser, argv, trials=1, healthy_days=0.02, only=["fresh"], cell="compressed rule at 10/s"
    )
    logging.basicConfig(level=logging.ERROR)
    if args.from_golden:
        golden = json.loads(GOLDEN.read_text())
        text = tables(golden["cells"], cells(golden["healthy_days"]))
        print(text)
        if args.write_docs:
            commands = "; ".join(f"`{c}`" for c in sorted(set(golden["commands"].values())))
            body = f"The golden values of {commands}:\n\n{text}"
            bench_docs.write_block("docs/quality.md", "scorecard", body)
        return 0
    chosen = [
        c
        for c in cells(args.healthy_days)
        if (args.only is None or c.row in args.only) and args.cell in c.name
    ]
    results: dict[str, list[dict[str, float]]] = {}
    for cell in chosen:
        results[key(cell)] = run_cell(cell, args.trials, args.seed)
        print(" | ".join(shown(cell, results[key(cell)])), flush=True)
    text = tables(results, chosen)
    print("\n" + text)
    if args.write_golden and not args.smoke:
        # A run of some rows or cells (`--only`, `--cell`) replaces theirs and keeps the others'.
        golden = (
            json.loads(GOLDEN.read_text()) if (args.only or args.cell) and GOLDEN.exists() else {}
        )
        if golden and golden["seed"] != args.seed:
            parser.error(f"{GOLDEN.name} was written with --seed {golden['seed']}")
        command = bench_docs.command(None if argv is None else [__file__, *argv])
        golden.setdefault("commands", {}).update({c.row: command for c in chosen})
        golden.setdefault("cells", {}).update(results)
        golden["seed"] = args.seed
        if any(c.row == "healthy" for c in chosen):
            golden["healthy_days"] = args.healthy_days
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    if args.write_docs:
        bench_docs.write_block("docs/quality.md", "scorecard", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
