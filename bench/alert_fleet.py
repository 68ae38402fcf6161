"""One test across the fleet: time to page of three replicas that judge the fleet's verdicts
(`alerts.fleet`, read from a real Prometheus) against one sidecar that receives all the
traffic the three share, with the same regression rule.

    python bench/alert_fleet.py [--trials 3] [--rise 0.3] [--replicas 3]

Four `rag-monitor run` processes run side by side: three replicas, each receiving a third
of the requests, scraped by Prometheus every second and querying it every second, and one
sidecar alone receiving as many requests as the three together (the reference, same run).
Each trial sends a healthy stream (a tenth of the answers hallucinated, each at random,
every request worded as its own: `harness.rag_service.fleet_streams` says why) until every
baseline holds its minimum and 30 s more, then raises the hallucinated share to `--rise`
and records, for each process, the seconds until its rule fires. The fleet pages when its
first replica fires (the replicas' alerts carry the same labels, so Alertmanager sends
one); reported with the last replica, the single sidecar and their ratio. Pages during the
healthy part are counted too: with every replica judging the same verdicts, the fleet's
false pages are one sidecar's, not three times as many.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from harness import bench_docs, bench_smoke  # noqa: E402
from harness.rag_service import (  # noqa: E402
    FLEET_RULE,
    HEALTHY_SHARE,
    Traffic,
    fleet_streams,
    metric,
    scrape_targets_config,
    write_config,
    write_targets,
)
from harness.servers import need, prometheus, rag_monitor  # noqa: E402

RULE = FLEET_RULE["name"]
REPLICAS = 3
NUMBERS = {2: "two", 3: "three", 4: "four"}
BASELINE_MIN = 150


def monitor_config(
    path: Path, metrics_port: int, fleet: dict[str, Any] | None, baseline_min: int
) -> None:
    rule = {**FLEET_RULE, "baseline": {**FLEET_RULE["baseline"], "min_samples": baseline_min}}
    alerts: dict[str, Any] = {"evaluation_interval_s": 1, "rules": [rule]}
    if fleet is not None:
        alerts["fleet"] = fleet
    write_config(path, alerts, metrics_port, processes=0)


def firing(port: int) -> bool:
    return (metric(port, "rag_monitor_alert_firing", f'rule="{RULE}"') or 0.0) >= 1.0


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Seconds until `condition()` holds, polled every quarter second."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise SystemExit(f"alert_fleet: {what} not within {timeout_s:.0f} s")
        time.sleep(0.25)  # polling a process's /metrics, not pacing a result
    return time.monotonic() - start


def trial(
    tmp: Path,
    rise: float,
    timeout_s: float,
    baseline_min: int,
    quiet_s: float,
    seed: int,
    replica_count: int = REPLICAS,
) -> dict[str, float]:
    # Prometheus first (the replicas read the fleet from it), scraping the replicas the
    # targets file names once they have bound their ports.
    targets = tmp / "targets.json"
    write_targets(targets, [])
    with (
        prometheus(tmp, scrape_targets_config(targets)) as prom,
        contextlib.ExitStack() as stack,
    ):
        fleet = {
            "prometheus_url": prom,
            "selector": 'job="rag-monitor"',
            "query_interval_s": 1,
        }
        replicas = []
        for i in range(replica_count):
            home = tmp / f"replica{i}"
            home.mkdir()
            monitor_config(home / "monitor.yaml", 0, fleet, baseline_min)
            replicas.append(stack.enter_context(rag_monitor(home, home / "monitor.yaml")))
        replica_ports = [replica.metrics for replica in replicas]
        write_targets(targets, replica_ports)
        home = tmp / "single"
        home.mkdir()
        monitor_config(home / "monitor.yaml", 0, None, baseline_min)
        single = stack.enter_context(rag_monitor(home, home / "monitor.yaml"))
        single_port = single.metrics
        assert single.http is not None
        services, alone = fleet_streams(
            [r.http for r in replicas if r.http is not None], single.http, seed
        )
        for service in [*services, alone]:
            stack.callback(service.close)
        traffic = Traffic(services, alone)
        stack.callback(traffic.stop)

        every = [*replica_ports, single_port]

        def baselines_full() -> bool:
            return all(
                (metric(p, "rag_monitor_alert_samples", 'window="baseline"') or 0.0) >= baseline_min
                for p in every
            )

        wait_for(baselines_full, timeout_s, "every baseline holding its minimum")
        quiet_until = time.monotonic() + quiet_s
        false_pages = 0
        while time.monotonic() < quiet_until:
            false_pages += sum(firing(p) for p in every)
            time.sleep(1.0)  # sampling the firing gauge once a second
        traffic.share = rise
        start = time.monotonic()
        fired: dict[int, float] = {}
        while len(fired) < len(every):
            if time.monotonic() - start > timeout_s:
                raise SystemExit(f"alert_fleet: not every process fired within {timeout_s:.0f} s")
            for p in every:
                if p not in fired and firing(p):
                    fired[p] = time.monotonic() - start
            time.sleep(0.25)  # polling /metrics
        return {
            "fleet": min(fired[p] for p in replica_ports),
            "last replica": max(fired[p] for p in replica_ports),
            "single": fired[single_port],
            "false": float(false_pages),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rise", type=float, default=0.3, help="hallucinated share after the rise")
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument(
        "--baseline-samples", type=int, default=BASELINE_MIN, help="the baseline's minimum"
    )
    parser.add_argument(
        "--quiet-s", type=float, default=30, help="healthy seconds once every baseline holds"
    )
    parser.add_argument(
        "--replicas", type=int, default=REPLICAS, help="replicas judging the fleet's verdicts"
    )
    bench_docs.add_flag(parser)
    # Smoke: two replicas run the fleet's path (a replica reading the others' counters).
    args = bench_smoke.parse_args(
        parser, trials=1, rise=0.9, baseline_samples=20, quiet_s=2, replicas=2
    )
    if args.replicas < 2:
        parser.error("--replicas: a fleet is two replicas or more")
    need("prometheus")
    results = []
    for i in range(args.trials):
        with tempfile.TemporaryDirectory(prefix="alert-fleet-") as tmp:
            result = trial(
                Path(tmp),
                args.rise,
                args.timeout_s,
                args.baseline_samples,
                args.quiet_s,
                i,
                args.replicas,
            )
        results.append(result)
        print(
            f"trial {i + 1}: fleet {result['fleet']:.1f} s (last replica "
            f"{result['last replica']:.1f} s), single sidecar {result['single']:.1f} s",
            file=sys.stderr,
        )
    rows = []
    replicas = f"{NUMBERS.get(args.replicas, args.replicas)} replicas"
    for key, label in (
        ("fleet", f"{replicas}, first to fire (the page)"),
        ("last replica", f"{replicas}, last to fire"),
        ("single", "one sidecar with all the traffic (reference)"),
    ):
        times = [r[key] for r in results]
        rows.append([label, f"{statistics.median(times):.1f}", f"{max(times):.1f}"])
    ratio = statistics.median(r["fleet"] / r["single"] for r in results)
    rows.append(["fleet ÷ single sidecar, median of trials", f"{ratio:.2f}x", ""])
    rows.append(
        [
            "firing gauges seen on the healthy stream (all processes)",
            f"{sum(r['false'] for r in results):.0f}",
            "",
        ]
    )
    table = bench_docs.table(
        [
            f"time to page, share {HEALTHY_SHARE} → {args.rise}, {args.trials} trials",
            "median s",
            "worst s",
        ],
        rows,
    )
    print(table)
    if args.write_docs:
        bench_docs.write_block("docs/quality.md", "alert-fleet", table)


if __name__ == "__main__":
    main()
