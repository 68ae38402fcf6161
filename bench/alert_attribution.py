"""Does a page say where? Production-shaped streams (`bench/sliced_streams.py`) with a rise
injected into one slice, spread evenly, or into the retriever or the generator of one
slice, replayed through `rag-monitor backtest`'s engine (`monitor.alerts.backtest.Backtest`);
for each run, the first page after the rise and what it tells the pager.

    python bench/alert_attribution.py [--runs 25] [--jobs 2] [--only NAME] [--write-docs]

A run: one service at 1 record a second on average (traffic 3x from night to peak, a daily
cycle of the defect rate), conversations of 5 to 20 turns whose verdicts fail together;
each record judged by `local_groundedness` and `local_retrieval`; the rule is the default
regression rule on `local_groundedness` (sequential test, window 30m, baseline 24h, one
false page per 90d) with `baseline.season: none` (a season needs a week of history, and
the attribution does not depend on it). The rise starts `RISE_AT_H` hours in, at a time
of day drawn per run, and raises the service's defect rate by about `--rise` (0.1), all of
it in the slice. A run replays `AFTER_H` hours after the rise; only runs that paged are
scored. The pager hears of a slice through the page's `Where` alert, sent when the page
first names one (with the page, or at a later evaluation while it fires), so that alert is
what is scored, watched from the page until it resolves or the run ends:

- a slice (one model of three, one version of two, one route of four, one document source
  of five, one topic of six): right when the page's `Where` alert names the injected slice;
- uniform (the same factor on every record, on models of unequal rates): right when the
  page sends no `Where` alert while it fires in the run;
- retriever (one source's documents swapped for unrelated ones: retrieval fails, and
  groundedness with it) and generator (one model's answers contradict good documents):
  right when the page's `cause` is `retriever` / `generator`.

Then what it costs a record, in one process: a question's topic (`question_topic`, in the
worker processes, its words' scores cached as in a worker that has seen them), the record's
dimensions (`Where.of`, on the event loop) and one rule's `observe` (on the event loop).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sliced_streams import Injection, records, slice_factor
from harness import bench_docs, bench_smoke
from harness.production_streams import START, StreamSpec
from monitor.alerts.attribution import Attribution
from monitor.alerts.backtest import Backtest, Event
from monitor.alerts.rule import Rule
from monitor.config import WHERE_SUFFIX, Config, alert_rule
from monitor.records import ContextDoc, RagRecord
from monitor.records.where import Where
from monitor.telemetry import create_telemetry

RISE_AT_H = 6.0
AFTER_H = 8.0
RATE = 1.0
CYCLE = 0.01
RULE_NAME = "hallucination_regression"
RULE = {
    "name": RULE_NAME,
    "evaluator": "local_groundedness",
    "baseline": {"season": "none"},
}


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # slice | uniform | retriever | generator
    dimension: str = ""
    value: str = ""

    def injection(self, rise: float) -> Injection:
        at = RISE_AT_H * 3600
        if self.kind == "uniform":
            base = 0.204  # the stream's mean groundedness defect rate (sliced_streams)
            return Injection("uniform", at, 1 + rise / base)
        if self.kind == "retriever":
            return Injection("retriever", at, 1.0, self.dimension, self.value)
        return Injection(
            self.kind,
            at,
            slice_factor(self.dimension, self.value, rise),
            self.dimension,
            self.value,
        )

    @property
    def expected(self) -> str:
        if self.kind == "slice":
            return f"{self.dimension}={self.value}"
        return "" if self.kind == "uniform" else self.kind


SCENARIOS = (
    Scenario("one model of three", "slice", "model", "claude-3-5-haiku"),
    Scenario("one version of two", "slice", "version", "1.5.0"),
    Scenario("one route of four", "slice", "route", "/chat"),
    Scenario("one document source of five", "slice", "source", "wiki.internal"),
    Scenario("one topic of six", "slice", "topic", "orders"),
    Scenario("uniform rise", "uniform"),
    Scenario("retriever degraded (one source)", "retriever", "source", "docs.example.com"),
    Scenario("generator degraded (one model)", "generator", "model", "claude-3-5-haiku"),
)


@dataclass(frozen=True)
class Outcome:
    paged: bool
    right: bool
    minutes: float  # from the rise to the page
    share: float | None
    rows: int
    said: str = ""  # what a wrong page said
    named_minutes: float | None = None  # from the rise to the `Where` alert
    named_at_page: bool = False  # the `Where` alert came with the page


def run(scenario: Scenario, seed: int, rise: float) -> Outcome:
    logging.disable(logging.WARNING)  # the engine logs every page
    offset = (seed * 7919.0) % 86_400.0  # where in the day the stream starts
    spec = StreamSpec(
        rate=RATE, days=(RISE_AT_H + AFTER_H) / 24, cycle=CYCLE, traffic_ratio=3.0, seed=seed
    )
    injection = scenario.injection(rise)
    config = Config.model_validate({"alerts": {"rules": [RULE]}})
    backtest = Backtest(config)
    rise_at = START + offset + injection.at_s
    name = RULE_NAME
    page: Event | None = None
    where: Event | None = None
    for event in backtest.run(records(spec, injection, offset)):
        if event.time < rise_at:
            continue
        alertname = event.alert.labels["alertname"]
        if page is None:
            if event.status == "firing" and alertname == name:
                page = event
            continue
        if alertname == name and event.status == "resolved":
            break
        if alertname == name + WHERE_SUFFIX and event.status == "firing":
            where = event
            break
    if page is None:
        return Outcome(False, False, float("nan"), None, backtest.summary.rows)
    notes = page.alert.annotations
    named = where.alert.annotations if where is not None else {}
    if scenario.kind == "slice":
        right = named.get("slice") == scenario.expected
        said = named.get("where", "no Where alert while the page fired")
    elif scenario.kind == "uniform":
        right = where is None
        said = named.get("where", "")
    else:
        right = notes.get("cause") == scenario.kind
        said = f"{notes.get('where', '')} / {notes.get('cause_detail', '')}"
    share = _share(named["where"]) if "where" in named else None
    return Outcome(
        True,
        right,
        (page.time - rise_at) / 60,
        share,
        backtest.summary.rows,
        "" if right else said,
        (where.time - rise_at) / 60 if where is not None else None,
        where is not None and where.time == page.time,
    )


def _median_minutes(minutes: Sequence[float | None]) -> str:
    kept = [m for m in minutes if m is not None]
    return f"{statistics.median(kept):.0f}" if kept else "-"


def _share(where: str) -> float | None:
    """The first named slice's share of the excess, from the `where` annotation."""
    head = where.split(";")[0]
    for part in head.split(","):
        if part.strip().endswith("of the excess"):
            return float(part.strip().split("%")[0]) / 100
    return None


QUESTIONS = (
    "How do I get a refund for my order?",
    "When will my package be delivered to Oslo?",
    "I forgot my password, how do I reset it?",
    "Is the kettle covered by the warranty if the lid broke?",
    "What payment methods do you accept for a subscription?",
    "How do I change the email address on my account?",
    "Which river flows through Vienna and how long is it?",
    "What are the first symptoms of flu in children?",
)


def costs(rounds: int = 20_000) -> list[list[str]]:
    """Microseconds a record costs (median of five timings of `rounds` records each)."""
    from monitor.detector.topics import question_topic

    rng = random.Random(1)
    records = [
        RagRecord(
            request_id=f"r{k}",
            trace_id=f"{k:032x}",
            service="shop",
            version="1.4.2",
            route="/ask",
            model="gpt-4o",
            conversation=f"c{k // 12}",
            query=rng.choice(QUESTIONS),
            retrieved_context=tuple(
                ContextDoc(content="x" * 800, doc_uri=f"https://kb.example.com/{k}/{d}")
                for d in range(4)
            ),
            response="An answer.",
            metadata={"topic": "warranty"},
        )
        for k in range(rounds)
    ]
    for question in QUESTIONS:
        question_topic(question)  # the words a worker has seen
    rule = Rule.of(alert_rule(RULE), "90d", {})
    clock = [START]
    attribution = Attribution([rule], create_telemetry(), 15.0, clock=lambda: clock[0])
    wheres = [Where._of(r) for r in records]

    def topic() -> None:
        for r in records:
            question_topic(r.query or "")

    def where() -> None:
        for r in records:
            Where._of(r)

    def observe() -> None:
        for w in wheres:
            clock[0] += 2.0
            attribution.observe(
                (0, "shop", ""), w, [1.0, 0.0], ("local_retrieval", False), clock[0]
            )

    out = []
    for name, place, work in (
        ("question topic (question_topic)", "worker process", topic),
        ("dimensions (Where.of)", "event loop", where),
        ("attribution, one rule (observe)", "event loop", observe),
    ):
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            work()
            timings.append((time.perf_counter() - started) / rounds * 1e6)
        out.append([name, place, f"{statistics.median(timings):.1f}"])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--only", default="", help="the scenarios whose name has this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rise", type=float, default=0.1)
    parser.add_argument("--cost-records", type=int, default=20_000, help="records per timing")
    bench_docs.add_flag(parser)
    args = bench_smoke.parse_args(
        parser, argv, runs=1, only="one model of three", jobs=1, cost_records=200
    )
    started = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {
            s: [pool.submit(run, s, seed, args.rise) for seed in range(1, args.runs + 1)]
            for s in SCENARIOS
            if args.only in s.name
        }
        outcomes = {}
        for scenario, fs in futures.items():
            outcomes[scenario] = [f.result() for f in fs]
            for seed, outcome in enumerate(outcomes[scenario], 1):
                if outcome.paged and not outcome.right:
                    print(f"{scenario.name}, run {seed}: {outcome.said}", file=sys.stderr)
            print(f"{scenario.name}: done", file=sys.stderr)
    rows = []
    for scenario, done in outcomes.items():
        paged = [o for o in done if o.paged]
        right = sum(o.right for o in done)
        what = {
            "slice": f"Where alert names {scenario.expected}",
            "uniform": "no Where alert",
            "retriever": "cause: retriever",
            "generator": "cause: generator",
        }[scenario.kind]
        shares = [o.share for o in paged if o.right and o.share is not None]
        named = [o for o in paged if o.named_minutes is not None]
        rows.append(
            [
                scenario.name,
                what,
                f"{len(paged)}/{len(done)}",
                f"{right}/{len(paged)} ({right / len(paged):.0%})" if paged else "-",
                f"{statistics.median(o.minutes for o in paged):.0f}" if paged else "-",
                f"{sum(o.named_at_page for o in named)}/{len(named)}" if named else "-",
                _median_minutes([o.named_minutes for o in named]),
                f"{statistics.median(shares):.0%}" if shares else "-",
            ]
        )
    table = bench_docs.table(
        [
            "injected",
            "right when the page",
            "runs that paged",
            "pages right",
            "minutes to page, median",
            "Where alerts sent with the page",
            "minutes to the Where alert, median",
            "named slice's share of the excess, median",
        ],
        rows,
    )
    records_per_run = statistics.median(o.rows for done in outcomes.values() for o in done)
    note = (
        f"{args.runs} runs per row, {records_per_run:,.0f} records per run (median), "
        f"{time.monotonic() - started:.0f} s on {args.jobs} processes"
    )
    cost = bench_docs.table(
        ["per record", "where it runs", "µs, median of 5"], costs(args.cost_records)
    )
    print(table)
    print(note)
    print(cost)
    if args.write_docs:
        bench_docs.write_block(
            "docs/quality.md", "alert-attribution", f"{table}\n\n{note}\n\n{cost}", mode=""
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
